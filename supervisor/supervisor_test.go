package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/proc"
	"codexgate/supervisor/codexrpc"
	"codexgate/supervisor/codextest"
)

func TestMain(m *testing.M) {
	codextest.RunFakeIfAsked()
	os.Exit(m.Run())
}

const waitLimit = 60 * time.Second

// recorder is an Approver that hands on what it gets.
type recorder struct {
	reqs   chan approvals.Request
	events chan approvals.Event
}

func newRecorder() *recorder {
	return &recorder{reqs: make(chan approvals.Request, 100), events: make(chan approvals.Event, 1000)}
}

func (r *recorder) Open(req approvals.Request) { r.reqs <- req }
func (r *recorder) Event(ev approvals.Event)   { r.events <- ev }

func (r *recorder) request(t *testing.T) approvals.Request {
	t.Helper()
	select {
	case req := <-r.reqs:
		return req
	case <-time.After(waitLimit):
		t.Fatal("no request reached the approver")
	}
	return approvals.Request{}
}

func (r *recorder) event(t *testing.T, kind approvals.EventKind) approvals.Event {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case ev := <-r.events:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %v event", kind)
		}
	}
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

var fastBackoff = Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond, MaxFailures: 3, StableAfter: time.Hour}

// fakeWorker starts one worker whose codex is this test binary as the fake
// app-server; it returns the worker, its approver and the fake's log dir.
func fakeWorker(t *testing.T, env map[string]string) (*Supervisor, *Worker, *recorder, string) {
	t.Helper()
	dir := t.TempDir()
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	s := New(ctx, Options{Approver: rec, Log: testLog(t), Version: "test", Backoff: fastBackoff, StopGrace: 500 * time.Millisecond})
	fenv := map[string]string{codextest.FakeEnv: dir}
	for k, v := range env {
		fenv[k] = v
	}
	if err := s.Apply(ctx, []Spec{{Name: "w", Cwd: dir, Codex: os.Args[0], Env: fenv}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop(context.Background())
		cancel()
	})
	w, err := s.Worker("w")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, w, StateIdle)
	return s, w, rec, dir
}

func waitState(t *testing.T, w *Worker, states ...State) Status {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		st := w.Status()
		if slices.Contains(states, st.State) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker is %s (%s), want %v", st.State, st.LastError, states)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkFakeLog fails on any message the client sent that the schema rejects.
func checkFakeLog(t *testing.T, dir string) []codextest.FakeRecord {
	t.Helper()
	log := codextest.FakeLog(t, dir)
	for _, r := range log {
		if r.Invalid != "" {
			t.Errorf("the client sent a message the schema rejects: %s", r.Invalid)
		}
	}
	return log
}

func sent(log []codextest.FakeRecord, method string) []json.RawMessage {
	var out []json.RawMessage
	for _, r := range log {
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if r.Recv != nil && json.Unmarshal(r.Recv, &m) == nil && m.Method == method {
			out = append(out, m.Params)
		}
	}
	return out
}

func events(log []codextest.FakeRecord, prefix string) []string {
	var out []string
	for _, r := range log {
		if strings.HasPrefix(r.Event, prefix) {
			out = append(out, r.Event)
		}
	}
	return out
}

func TestHandshakeAndApproval(t *testing.T) {
	_, w, rec, dir := fakeWorker(t, nil)
	turn, err := w.StartTurn(context.Background(), "exec rm a.txt")
	if err != nil {
		t.Fatal(err)
	}
	req := rec.request(t)
	if req.Method != approvals.MethodCommandApproval || req.ID != "0" || req.Worker != "w" {
		t.Fatalf("request = %s %s from %s", req.Method, req.ID, req.Worker)
	}
	var item struct{ Type, ID string }
	if err := json.Unmarshal(req.Item, &item); err != nil || item.Type != "commandExecution" {
		t.Fatalf("the started item was not handed on: %s", req.Item)
	}
	if st := w.Status(); st.State != StateWaiting || st.TurnID != turn {
		t.Errorf("status while waiting = %+v", st)
	}
	if err := req.Reply(json.RawMessage(`{"decision":"accept"}`)); err != nil {
		t.Fatal(err)
	}
	if err := req.Reply(json.RawMessage(`{"decision":"accept"}`)); !errors.Is(err, codexrpc.ErrAlreadyReplied) {
		t.Errorf("second reply: %v, want ErrAlreadyReplied", err)
	}
	if ev := rec.event(t, approvals.RequestResolved); ev.RequestID != "0" {
		t.Errorf("resolved %q", ev.RequestID)
	}
	rec.event(t, approvals.ItemCompleted)
	if ev := rec.event(t, approvals.TurnCompleted); ev.TurnID != turn {
		t.Errorf("turn completed %q, want %q", ev.TurnID, turn)
	}
	waitState(t, w, StateIdle)

	log := checkFakeLog(t, dir)
	var init codexrpc.InitializeParams
	if p := sent(log, "initialize"); len(p) != 1 || json.Unmarshal(p[0], &init) != nil || init.ClientInfo.Name != "codexgate" || init.ClientInfo.Version != "test" {
		t.Errorf("initialize = %s", p)
	}
	if len(sent(log, "initialized")) != 1 {
		t.Error("no initialized notification")
	}
	var start codexrpc.ThreadStartParams
	if p := sent(log, "thread/start"); len(p) != 1 || json.Unmarshal(p[0], &start) != nil ||
		start.Sandbox != "workspace-write" || start.ApprovalPolicy != "on-request" || start.Cwd != dir {
		t.Errorf("thread/start = %s", p)
	}
	if got := events(log, "reply "); len(got) != 1 || !strings.Contains(got[0], `"accept"`) {
		t.Errorf("replies = %q, want one accept", got)
	}
}

func TestUnhandledRequestsGetAnErrorAtOnce(t *testing.T) {
	_, w, rec, dir := fakeWorker(t, nil)
	if _, err := w.StartTurn(context.Background(), "unknown;garbage;exec ls"); err != nil {
		t.Fatal(err)
	}
	// The unknown request was refused without reaching the approver, the
	// garbage was skipped, and the worker goes on to the next request.
	req := rec.request(t)
	if req.Method != approvals.MethodCommandApproval {
		t.Fatalf("approver got %s", req.Method)
	}
	req.Reply(json.RawMessage(`{"decision":"decline"}`))
	rec.event(t, approvals.TurnCompleted)
	log := checkFakeLog(t, dir)
	got := events(log, "reply item/tool/call")
	if len(got) != 1 || !strings.Contains(got[0], "-32601") {
		t.Errorf("item/tool/call replies = %q, want a method-not-found error", got)
	}
	if st := w.Status(); st.State != StateIdle || st.PID == 0 {
		t.Errorf("worker after garbage: %+v", st)
	}
}

func TestInterruptClosesTheOpenRequest(t *testing.T) {
	_, w, rec, _ := fakeWorker(t, nil)
	if _, err := w.StartTurn(context.Background(), "exec sleep 100"); err != nil {
		t.Fatal(err)
	}
	rec.request(t)
	if err := w.Interrupt(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	rec.event(t, approvals.TurnCompleted)
	if ev := rec.event(t, approvals.RequestResolved); ev.RequestID != "0" {
		t.Errorf("resolved %q", ev.RequestID)
	}
}

func alive(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != "Z"
}

func TestStopDeniesThenEndsTheWholeGroup(t *testing.T) {
	s, w, rec, dir := fakeWorker(t, map[string]string{codextest.FakeIgnoreTerm: "1"})
	if _, err := w.StartTurn(context.Background(), "grandchild;exec rm a.txt"); err != nil {
		t.Fatal(err)
	}
	rec.request(t) // left open
	pid := w.Status().PID
	raw, err := os.ReadFile(filepath.Join(dir, "grandchild"))
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(string(raw))
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.event(t, approvals.WorkerStopping)
	rec.event(t, approvals.WorkerExited)
	if st := w.Status(); st.State != StateStopped {
		t.Errorf("state after stop = %s", st.State)
	}
	for _, p := range []int{pid, grandchild} {
		if alive(p) {
			t.Errorf("process %d is still running after stop", p)
		}
	}
	// The fake exits as soon as its stdin closes, so what it received is the
	// evidence: an error reply (a denial) to request 0.
	var denied bool
	for _, r := range checkFakeLog(t, dir) {
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(r.Recv, &m) == nil && string(m.ID) == "0" && m.Error != nil {
			denied = true
		}
	}
	if !denied {
		t.Error("the open request was not denied before the worker ended")
	}
}

func TestCrashRestartsAndResumesTheThread(t *testing.T) {
	_, w, rec, dir := fakeWorker(t, nil)
	before := w.Status()
	if _, err := w.StartTurn(context.Background(), "exec rm a.txt"); err != nil {
		t.Fatal(err)
	}
	req := rec.request(t)
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if ev := rec.event(t, approvals.WorkerExited); ev.Session != req.Session {
		t.Errorf("exit of session %d, request of %d", ev.Session, req.Session)
	}
	// The pending request is closed: no answer can reach the next process.
	if err := req.Reply(json.RawMessage(`{"decision":"accept"}`)); !errors.Is(err, codexrpc.ErrClosed) {
		t.Errorf("reply after crash: %v, want ErrClosed", err)
	}
	after := waitState(t, w, StateIdle)
	if after.ThreadID != before.ThreadID || after.PID == before.PID {
		t.Errorf("after restart: %+v, before: %+v", after, before)
	}
	if got := events(checkFakeLog(t, dir), "resumed "); len(got) != 1 || got[0] != "resumed "+before.ThreadID {
		t.Errorf("resumes = %q", got)
	}
	var resume codexrpc.ThreadResumeParams
	p := sent(codextest.FakeLog(t, dir), "thread/resume")
	if len(p) != 1 || json.Unmarshal(p[0], &resume) != nil || resume.Sandbox != "workspace-write" || resume.ApprovalPolicy != "on-request" || resume.Cwd == "" {
		t.Errorf("thread/resume = %s", p)
	}
}

func TestAWorkerThatKeepsCrashingFails(t *testing.T) {
	dir := t.TempDir()
	s := New(context.Background(), Options{Approver: newRecorder(), Log: testLog(t), Backoff: fastBackoff})
	defer s.Stop(context.Background())
	s.Apply(context.Background(), []Spec{
		{Name: "crashes", Cwd: dir, Codex: "/bin/false"},
		{Name: "missing", Cwd: dir, Codex: filepath.Join(dir, "no-such-codex")},
	})
	for name, want := range map[string]string{"crashes": "gave up after 3 failed starts", "missing": "no-such-codex"} {
		w, _ := s.Worker(name)
		st := waitState(t, w, StateFailed)
		if !strings.Contains(st.LastError, want) {
			t.Errorf("%s: last error %q, want it to mention %q", name, st.LastError, want)
		}
	}
}

func TestApplyChangesOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	rec := newRecorder()
	s := New(context.Background(), Options{Approver: rec, Log: testLog(t), Backoff: fastBackoff})
	defer s.Stop(context.Background())
	spec := func(name, model string) Spec {
		return Spec{Name: name, Cwd: dir, Codex: os.Args[0], Model: model, Env: map[string]string{codextest.FakeEnv: dir}}
	}
	s.Apply(context.Background(), []Spec{spec("a", ""), spec("b", ""), spec("c", "")})
	ws := map[string]*Worker{}
	for _, n := range []string{"a", "b", "c"} {
		ws[n], _ = s.Worker(n)
		waitState(t, ws[n], StateIdle)
	}
	pidA := ws["a"].Status().PID
	if err := s.Apply(context.Background(), []Spec{spec("a", ""), spec("b", "other"), spec("d", "")}); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Worker("a")
	b, _ := s.Worker("b")
	d, _ := s.Worker("d")
	if a != ws["a"] || a.Status().PID != pidA {
		t.Error("an unchanged worker was restarted")
	}
	if b == ws["b"] {
		t.Error("a changed worker was kept")
	}
	if _, err := s.Worker("c"); err == nil {
		t.Error("a removed worker is still there")
	}
	if st := ws["c"].Status(); st.State != StateStopped {
		t.Errorf("removed worker is %s", st.State)
	}
	waitState(t, b, StateIdle)
	waitState(t, d, StateIdle)
	if names := []string{s.Statuses()[0].Name, s.Statuses()[1].Name, s.Statuses()[2].Name}; !slices.Equal(names, []string{"a", "b", "d"}) {
		t.Errorf("order = %v", names)
	}
}

func TestChildEnvironmentIsScrubbed(t *testing.T) {
	parent := []string{"PATH=/bin", "DISPLAY=:0", "WAYLAND_DISPLAY=w", "XAUTHORITY=/x", "DBUS_SESSION_BUS_ADDRESS=unix:path=/b",
		"CODEXGATE_SOCKET=/s", "XDG_RUNTIME_DIR=/run/user/1", "HOME=/h", "KEEP=1", "SWAYSOCK=/s", "I3SOCK=/i", "NIRI_SOCKET=/n",
		"HYPRLAND_INSTANCE_SIGNATURE=h", "SESSION_MANAGER=local/x", "WAYLAND_SOCKET=3", "TMUX=/t,1,0", "KITTY_LISTEN_ON=unix:/k"}
	got := childEnv(parent, map[string]string{"KEEP": "2", "EXTRA": "x", "DISPLAY": ":1"})
	want := []string{"PATH=/bin", "HOME=/h", "EXTRA=x", "KEEP=2"}
	if !slices.Equal(got, want) {
		t.Errorf("childEnv = %q, want %q", got, want)
	}
}

func TestNetworkRequestBecomesANetworkCard(t *testing.T) {
	dir := t.TempDir()
	var cards []approvals.Card
	changes := make(chan approvals.Change, 10)
	q := approvals.NewQueue(approvals.Options{Audit: discardAudit{}, OnChange: func(c approvals.Change) { changes <- c }})
	s := New(context.Background(), Options{Approver: q, Log: testLog(t)})
	defer s.Stop(context.Background())
	s.Apply(context.Background(), []Spec{{Name: "net", Cwd: dir, Codex: os.Args[0], Env: map[string]string{codextest.FakeEnv: dir}}})
	w, _ := s.Worker("net")
	waitState(t, w, StateIdle)
	w.StartTurn(context.Background(), "network example.org")
	select {
	case c := <-changes:
		cards = q.Cards()
		if c.Kind != approvals.CardOpened || len(cards) != 1 {
			t.Fatalf("change %v, cards %v", c.Kind, cards)
		}
	case <-time.After(waitLimit):
		t.Fatal("no card")
	}
	c := cards[0]
	if c.Kind != approvals.KindNetwork || c.Host != "example.org" || c.Protocol != "http" {
		t.Errorf("card = %+v", c)
	}
	if _, err := q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionDeny, By: approvals.ByCLI}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for len(events(codextest.FakeLog(t, dir), "reply ")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := events(checkFakeLog(t, dir), "reply "); len(got) != 1 || !strings.Contains(got[0], `"decline"`) {
		t.Errorf("replies = %q", got)
	}
}

type discardAudit struct{}

func (discardAudit) Write(approvals.Record) error { return nil }

func TestPauseResumeRestartKeepTheThread(t *testing.T) {
	_, w, rec, dir := fakeWorker(t, nil)
	first := w.Status()
	if err := w.Resume(); err == nil {
		t.Error("resume of a running worker")
	}
	if _, err := w.StartTurn(context.Background(), "exec rm a.txt"); err != nil {
		t.Fatal(err)
	}
	rec.request(t)
	if err := w.Pause(); err != nil {
		t.Fatal(err)
	}
	rec.event(t, approvals.WorkerStopping) // the open request is denied first
	paused := waitState(t, w, StatePaused)
	if paused.PID != 0 || alive(first.PID) {
		t.Errorf("paused worker still runs: %+v", paused)
	}
	if _, err := w.StartTurn(context.Background(), "x"); err == nil {
		t.Error("a paused worker took a task")
	}
	if err := w.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := waitState(t, w, StateIdle)
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := waitState(t, w, StateIdle)
	for restarted.PID == resumed.PID {
		restarted = waitState(t, w, StateIdle)
	}
	if resumed.ThreadID != first.ThreadID || restarted.ThreadID != first.ThreadID {
		t.Errorf("thread changed: %s, %s, %s", first.ThreadID, resumed.ThreadID, restarted.ThreadID)
	}
	if got := events(checkFakeLog(t, dir), "resumed "); len(got) != 2 {
		t.Errorf("resumes = %q", got)
	}
}
