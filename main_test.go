package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/control"
	"codexgate/supervisor"
	"codexgate/supervisor/codextest"
)

// binary is the codexgate that `make build` made, in bin/ beside the
// panel; `make test` builds them first.
var binary string

func TestMain(m *testing.M) {
	bin := filepath.Join(codextest.Root(), "bin")
	binary = filepath.Join(bin, "codexgate")
	native := filepath.Join(codextest.Root(), ".tools/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
	// Without `make build`, the same builds.
	for _, build := range []struct{ out, pkg, ldflags string }{
		{"codexgate", ".", "-X main.version=test -X main.pinnedCodex=" + native},
		{"codexgate-panel", "./cmd/codexgate-panel", ""},
	} {
		out := filepath.Join(bin, build.out)
		if exists(out) {
			continue
		}
		cmd := exec.Command("go", "build", "-o", out, "-ldflags", build.ldflags, build.pkg)
		cmd.Dir = codextest.Root()
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// testApp is a running `codexgate --headless`, driven only through its command line.
type testApp struct {
	t      testing.TB
	dir    string
	socket string
	env    []string
	cmd    *exec.Cmd
	log    *syncBuffer
	// desktop runs the app with its tray, panel and hotkeys instead of --headless.
	desktop bool
	// exe is the codexgate to run; "" for binary.
	exe string
	// extra is appended to the config file.
	extra string
	// cfgPath is the config file; blocks are its [[worker]] tables by name.
	cfgPath string
	blocks  map[string]string
	// responses are the fake model endpoints by worker name.
	responses map[string]*codextest.Responses
}

// syncBuffer is the app's output, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type workerDef struct {
	name     string
	steps    []codextest.Step
	features []string
	secrets  map[string]string // env var -> keyring secret
}

// startApp starts an app with one worker per def.
func startApp(t *testing.T, defs ...workerDef) (*testApp, map[string]string) {
	t.Helper()
	a := newApp(t)
	return a, a.start(defs...)
}

func newApp(t testing.TB) *testApp {
	dir := codextest.TempDir(t)
	a := &testApp{t: t, dir: dir, socket: filepath.Join(dir, "run", "control.sock"), log: &syncBuffer{}}
	a.env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "state"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	return a
}

// start writes a config with one worker per def, each with its own
// workspace holding a.txt and its own fake Responses endpoint, starts the
// app and returns the workspaces by worker name.
func (a *testApp) start(defs ...workerDef) map[string]string {
	t, dir := a.t, a.dir
	t.Helper()
	var cfg strings.Builder
	workspaces := map[string]string{}
	a.blocks = map[string]string{}
	a.responses = map[string]*codextest.Responses{}
	for _, d := range defs {
		ws := filepath.Join(dir, d.name)
		home := filepath.Join(dir, d.name+"-home")
		for _, p := range []string{ws, home} {
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("keep me\n"), 0o600)
		workspaces[d.name] = ws
		r := codextest.NewResponses(t, d.steps...)
		a.responses[d.name] = r
		args, _ := json.Marshal(r.Args(d.features...))
		env, _ := json.Marshal(codextest.Env(home))
		secrets, _ := json.Marshal(d.secrets)
		a.blocks[d.name] = fmt.Sprintf("[[worker]]\nname = %q\ncwd = %q\nargs = %s\nenv = %s\nsecrets = %s\n\n", d.name, ws, args, tomlInline(env), tomlInline(secrets))
		cfg.WriteString(a.blocks[d.name])
	}
	cfg.WriteString(a.extra)
	a.cfgPath = filepath.Join(dir, "config.toml")
	if err := os.WriteFile(a.cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", a.cfgPath, "--socket", a.socket}
	if !a.desktop {
		args = append(args, "--headless")
	}
	exe := a.exe
	if exe == "" {
		exe = binary
	}
	a.cmd = exec.Command(exe, args...)
	a.cmd.Env = a.env
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.stop)
	a.waitFor("workers idle", func() bool {
		var ws []supervisor.Status
		if a.try(&ws, "workers", "--json") != nil || len(ws) != len(defs) {
			return false
		}
		for _, w := range ws {
			if w.State != supervisor.StateIdle {
				return false
			}
		}
		return true
	})
	return workspaces
}

// tomlInline turns a JSON object of strings into a TOML inline table.
func tomlInline(obj []byte) string {
	var m map[string]string
	json.Unmarshal(obj, &m)
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s = %q", k, v))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// stop ends the app as a person would (SIGTERM) and checks that no process
// of it remains.
func (a *testApp) stop() {
	if a.cmd.ProcessState != nil {
		return
	}
	pids := a.workerPIDs()
	a.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			a.t.Errorf("codexgate exited with %v\n%s", err, a.log)
		}
	case <-time.After(30 * time.Second):
		syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		a.t.Errorf("codexgate did not stop\n%s", a.log)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			a.t.Errorf("codex process %d still runs after codexgate exited", pid)
		}
	}
	if a.t.Failed() {
		a.t.Logf("codexgate log:\n%s", a.log)
	}
}

func (a *testApp) workerPIDs() []int {
	var ws []supervisor.Status
	a.try(&ws, "workers", "--json")
	var pids []int
	for _, w := range ws {
		if w.PID != 0 {
			pids = append(pids, w.PID)
		}
	}
	return pids
}

// run runs the codexgate command line against the app. The output is
// stdout, and stderr too when the command failed.
func (a *testApp) run(args ...string) (string, error) {
	cmd := exec.Command(binary, append([]string{"--socket", a.socket}, args...)...)
	cmd.Env = a.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

func (a *testApp) must(args ...string) string {
	a.t.Helper()
	out, err := a.run(args...)
	if err != nil {
		a.t.Fatalf("codexgate %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (a *testApp) try(v any, args ...string) error {
	out, err := a.run(args...)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(out), v)
}

func (a *testApp) waitFor(what string, cond func() bool) {
	a.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			a.t.Fatalf("timed out waiting for %s\n%s", what, a.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cards waits until n cards are open and returns them.
func (a *testApp) cards(n int) []approvals.Card {
	a.t.Helper()
	var cards []approvals.Card
	a.waitFor(fmt.Sprintf("%d open cards", n), func() bool {
		return a.try(&cards, "cards", "--json") == nil && len(cards) == n
	})
	return cards
}

func (a *testApp) idle(worker string) {
	a.t.Helper()
	a.waitFor(worker+" idle", func() bool {
		var ws []supervisor.Status
		if a.try(&ws, "workers", "--json") != nil {
			return false
		}
		for _, w := range ws {
			if w.Name == worker {
				return w.State == supervisor.StateIdle
			}
		}
		return false
	})
}

// show runs `codexgate show CARD`, which prints the card whole and lets
// it be allowed.
func (a *testApp) show(c approvals.Card) string {
	a.t.Helper()
	out := a.must("show", c.ID)
	if !strings.Contains(out, "card "+c.ID+" · revision "+fmt.Sprint(c.Revision)) {
		a.t.Fatalf("show printed %q", out)
	}
	return out
}

// quickAllow shows the card whole, then allows the oldest card without
// naming it as soon as the settle delay lets it.
func (a *testApp) quickAllow(c approvals.Card) string {
	a.t.Helper()
	a.show(c)
	var out string
	a.waitFor("the settle delay", func() bool {
		o, err := a.run("answer", "allow")
		if err != nil && !strings.Contains(o, "settle delay") {
			a.t.Fatalf("answer allow: %v %q", err, o)
		}
		out = o
		return err == nil
	})
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestCommandCardsFromTheCommandLine(t *testing.T) {
	a, ws := startApp(t,
		workerDef{name: "yes", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
		workerDef{name: "no", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
	)
	if turn := strings.TrimSpace(a.must("task", "yes", "delete", "a.txt")); turn == "" {
		t.Fatal("task printed no turn id")
	}
	c := a.cards(1)[0]
	if c.Worker != "yes" || c.Kind != approvals.KindCommand || !strings.Contains(c.Command, "rm a.txt") || c.Cwd != ws["yes"] || c.Truncated || c.Revision != 1 {
		t.Fatalf("card = %+v", c)
	}
	raw := a.must("cards", "--json")
	for _, field := range []string{"id", "worker", "kind", "command", "cwd", "reason", "host", "grantRoot", "diff", "truncated", "revision", "decisions", "createdAt"} {
		if !strings.Contains(raw, `"`+field+`"`) {
			t.Errorf("cards --json lacks %q", field)
		}
	}
	if out := a.must("cards"); !strings.Contains(out, c.ID) || !strings.Contains(out, "rm a.txt") {
		t.Errorf("cards = %q", out)
	}
	out := a.quickAllow(c)
	if !strings.Contains(out, c.ID) || !strings.Contains(out, `"accept"`) {
		t.Errorf("answer printed %q", out)
	}
	a.idle("yes")
	if exists(filepath.Join(ws["yes"], "a.txt")) {
		t.Error("approved rm did not remove a.txt")
	}
	if out, err := a.run("answer", "allow", c.ID); err == nil || !strings.Contains(out, "already answered") {
		t.Errorf("second answer: %v %q", err, out)
	}

	a.must("task", "no", "delete a.txt")
	c = a.cards(1)[0]
	a.must("answer", "deny", c.ID)
	a.idle("no")
	if !exists(filepath.Join(ws["no"], "a.txt")) {
		t.Error("denied rm removed a.txt")
	}
	audit, err := os.ReadFile(filepath.Join(a.dir, "state", "codexgate", "audit.jsonl"))
	if err != nil || strings.Count(string(audit), `"event":"open"`) != 2 || !strings.Contains(string(audit), `"by":"cli"`) {
		t.Errorf("audit log: %v\n%s", err, audit)
	}
}

func TestFileChangeCardShowsTheDiff(t *testing.T) {
	outside := codextest.TempDir(t)
	target := filepath.Join(outside, "notes.txt")
	a, _ := startApp(t, workerDef{name: "patcher", steps: []codextest.Step{
		codextest.Patch("*** Begin Patch\n*** Add File: " + target + "\n+first line\n+second line\n*** End Patch\n"),
	}})
	a.must("task", "patcher", "write notes")
	c := a.cards(1)[0]
	if c.Kind != approvals.KindFileChange || !strings.Contains(c.Diff, "+first line\n+second line") || len(c.Changes) != 1 || c.Changes[0].Path != target {
		t.Fatalf("card = %+v", c)
	}
	if exists(target) {
		t.Fatal("the patch applied before the answer")
	}
	if out := a.show(c); !strings.Contains(out, "+first line\n+second line") {
		t.Errorf("show printed %q", out)
	}
	a.must("answer", "allow", c.ID)
	a.idle("patcher")
	if got, _ := os.ReadFile(target); string(got) != "first line\nsecond line\n" {
		t.Errorf("after allow: %q", got)
	}
}

// Codex lists a patch's changes in an order of its own, not the order it
// applies them in: "add B, then move A to B" comes as the move, then the
// add, and B ends as A. A card that followed the list showed B ending as
// the added text; such a patch is declined without asking.
func TestAFileChangedTwiceInOnePatchIsDeclined(t *testing.T) {
	outside := codextest.TempDir(t)
	a, b := filepath.Join(outside, "a.txt"), filepath.Join(outside, "b.txt")
	os.WriteFile(a, []byte("from a\n"), 0o600)
	os.WriteFile(b, []byte("b as it was\n"), 0o600)
	app, _ := startApp(t, workerDef{name: "twice", steps: []codextest.Step{
		codextest.Patch("*** Begin Patch\n*** Add File: " + b + "\n+shown as the end of b\n*** Update File: " + a + "\n*** Move to: " + b + "\n@@\n-from a\n+what b really becomes\n*** End Patch\n"),
	}})
	app.must("task", "twice", "write b")
	app.waitFor("the turn's end", func() bool {
		var ws []struct {
			Turn *control.TurnState `json:"turn"`
		}
		return app.try(&ws, "workers", "--json") == nil && len(ws) == 1 && ws[0].Turn != nil && ws[0].Turn.Status == "completed"
	})
	if got, _ := os.ReadFile(b); string(got) != "b as it was\n" || !exists(a) {
		t.Errorf("b = %q, a exists: %v", got, exists(a))
	}
	audit, _ := os.ReadFile(filepath.Join(app.dir, "state", "codexgate", "audit.jsonl"))
	if !strings.Contains(string(audit), "changed twice in one patch") || strings.Contains(string(audit), `"event":"open"`) {
		t.Errorf("audit log:\n%s", audit)
	}
}

func TestTwoCommandsAreAnsweredOldestFirst(t *testing.T) {
	a, ws := startApp(t, workerDef{name: "two", steps: []codextest.Step{
		codextest.Parallel(codextest.Exec("rm a.txt", true), codextest.Exec("touch b.txt", true)),
	}})
	a.must("task", "two", "two commands")
	cards := a.cards(2)
	if !cards[0].CreatedAt.Before(cards[1].CreatedAt) && !cards[0].CreatedAt.Equal(cards[1].CreatedAt) {
		t.Errorf("cards are not oldest first: %v, %v", cards[0].CreatedAt, cards[1].CreatedAt)
	}
	// The first answer goes to the oldest card, the second to the other.
	if out := a.quickAllow(cards[0]); !strings.HasPrefix(out, cards[0].ID+" allow") {
		t.Errorf("first answer: %q, want it for %s", out, cards[0].ID)
	}
	a2, b2 := filepath.Join(ws["two"], "a.txt"), filepath.Join(ws["two"], "b.txt")
	allowed, denied := cards[0].Command, cards[1].Command
	if !strings.Contains(allowed, "rm a.txt") && !strings.Contains(allowed, "touch b.txt") {
		t.Fatalf("cards %q and %q", allowed, denied)
	}
	a.waitFor("the allowed command", func() bool {
		if strings.Contains(allowed, "rm a.txt") {
			return !exists(a2)
		}
		return exists(b2)
	})
	if out := a.must("answer", "deny"); !strings.HasPrefix(out, cards[1].ID+" deny") {
		t.Errorf("second answer: %q, want it for %s", out, cards[1].ID)
	}
	a.idle("two")
	if strings.Contains(denied, "rm a.txt") && !exists(a2) || strings.Contains(denied, "touch b.txt") && exists(b2) {
		t.Errorf("the denied command %q ran", denied)
	}
}

func TestHostileCharactersAreShownEscaped(t *testing.T) {
	a, _ := startApp(t, workerDef{name: "bidi", steps: []codextest.Step{
		codextest.Exec("touch \"evil\u202etxt.sh\" \x1b[8m", true),
	}})
	a.must("task", "bidi", "make a file")
	c := a.cards(1)[0]
	if !strings.Contains(c.Command, `\u{202e}`) || strings.ContainsRune(c.Command, '\u202e') || strings.Contains(c.Command, "\x1b") {
		t.Errorf("command shown as %q", c.Command)
	}
	out := a.must("cards")
	if strings.ContainsRune(out, '\u202e') || !strings.Contains(out, `\u{202e}`) {
		t.Errorf("cards printed %q", out)
	}
	a.must("answer", "deny")
}

func TestAnswerRefusesWhatItMust(t *testing.T) {
	a, _ := startApp(t, workerDef{name: "w", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}})
	if out, err := a.run("answer", "allow"); err == nil || !strings.Contains(out, "no open cards") {
		t.Errorf("answer with no cards: %v %q", err, out)
	}
	a.must("task", "w", "go")
	c := a.cards(1)[0]
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"answer", "allow-session", c.ID}, "not offered"},
		{[]string{"answer", "allow", c.ID, "--revision", "7"}, "changed since it was shown"},
		{[]string{"answer", "maybe"}, "unknown decision"},
		{[]string{"answer", "allow", "w-999"}, "no such card"},
	} {
		if out, err := a.run(tc.args...); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %v %q, want %q", tc.args, err, out, tc.want)
		}
	}
	if len(a.cards(1)) != 1 {
		t.Error("a refused answer closed the card")
	}
	a.must("answer", "stop", c.ID)
}

func TestPermissionsAndQuestionCards(t *testing.T) {
	grant := codextest.TempDir(t)
	a, _ := startApp(t,
		workerDef{name: "perm", features: []string{"request_permissions_tool"}, steps: []codextest.Step{{
			Tool: "request_permissions",
			Args: map[string]any{"reason": "write build output", "permissions": map[string]any{"file_system": map[string]any{"write": []string{grant}}}},
		}}},
		workerDef{name: "ask", features: []string{"default_mode_request_user_input"}, steps: []codextest.Step{{
			Tool: "request_user_input",
			Args: map[string]any{"questions": []any{map[string]any{"id": "db", "header": "Database", "question": "Which one?",
				"options": []any{map[string]any{"label": "Postgres", "description": "big"}, map[string]any{"label": "SQLite", "description": "small"}}}}},
		}}},
	)
	a.must("task", "perm", "build")
	c := a.cards(1)[0]
	if c.Kind != approvals.KindPermissions || !strings.Contains(strings.Join(c.Permissions, ","), "write "+grant) || c.Reason != "write build output" {
		t.Fatalf("permissions card = %+v", c)
	}
	a.show(c)
	out := a.must("answer", "allow", c.ID)
	if !strings.Contains(out, `"scope":"turn"`) || !strings.Contains(out, grant) {
		t.Errorf("permissions answer sent %q", out)
	}
	a.idle("perm")

	a.must("task", "ask", "choose")
	c = a.cards(1)[0]
	if c.Kind != approvals.KindQuestion || len(c.Fields) != 1 || c.Fields[0].Name != "db" {
		t.Fatalf("question card = %+v", c)
	}
	a.show(c)
	if out, err := a.run("answer", "allow", c.ID); err == nil || !strings.Contains(out, "needs an answer") {
		t.Errorf("allow without an answer: %v %q", err, out)
	}
	out = a.must("answer", "allow", c.ID, "--value", "db=SQLite")
	if !strings.Contains(out, `{"answers":{"db":{"answers":["SQLite"]}}}`) {
		t.Errorf("question answer sent %q", out)
	}
	a.idle("ask")
}

// TestAgentCannotAnswerForItself: while one worker's card is open, another
// worker's agent runs `codexgate answer allow`, in its sandbox and as an
// escalated command that the test approves. Neither answers the first card.
func TestAgentCannotAnswerForItself(t *testing.T) {
	a := newApp(t)
	selfAnswer := binary + " --socket " + a.socket + " answer allow"
	ws := a.start(
		workerDef{name: "victim", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
		workerDef{name: "agent", steps: []codextest.Step{codextest.Exec(selfAnswer, false), codextest.Exec(selfAnswer, true)}},
	)
	a.must("task", "victim", "delete a.txt")
	victim := a.cards(1)[0]
	a.must("task", "agent", "approve the other card")
	// The sandboxed attempt runs without a card; the escalated one asks.
	escalated := a.cards(2)[1]
	if escalated.Worker != "agent" || !strings.Contains(escalated.Command, "answer allow") {
		t.Fatalf("second card = %+v", escalated)
	}
	a.show(escalated)
	a.must("answer", "allow", escalated.ID)
	a.idle("agent")
	if open := a.cards(1); open[0].ID != victim.ID {
		t.Fatalf("open cards = %+v", open)
	}
	if !exists(filepath.Join(ws["victim"], "a.txt")) {
		t.Fatal("the agent's own answer removed the victim's file")
	}
	audit, _ := os.ReadFile(filepath.Join(a.dir, "state", "codexgate", "audit.jsonl"))
	if !strings.Contains(string(audit), `"event":"refused"`) || !strings.Contains(string(audit), "descends from worker process") {
		t.Errorf("no refusal in the audit log:\n%s", audit)
	}
	a.must("answer", "deny", victim.ID)
}
