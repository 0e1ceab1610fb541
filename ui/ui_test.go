package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/approvals/approvalstest"
	"codexgate/assets"
	"codexgate/supervisor"
	"codexgate/ui/panel/wire"
)

// The test binary run with fakePanelEnv set is a panel: it reports its
// first frame, denies the first card it is sent, and ends when its channel
// closes, as the real one does.
const fakePanelEnv = "CODEXGATE_TEST_FAKE_PANEL"

func TestMain(m *testing.M) {
	if os.Getenv(fakePanelEnv) != "" {
		fakePanel()
		return
	}
	os.Exit(m.Run())
}

func fakePanel() {
	if os.Getenv(fakePanelEnv) == "fail" {
		fmt.Fprintln(os.Stderr, "codexgate-panel: no display (neither DISPLAY nor WAYLAND_DISPLAY is set)")
		os.Exit(1)
	}
	conn, err := net.FileConn(os.NewFile(wire.FD, "codexgate"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake panel:", err)
		os.Exit(1)
	}
	c := wire.NewClient(conn)
	go c.Call(wire.Request{Op: wire.OpReady})
	var once sync.Once
	c.Run(func(s wire.State) {
		if len(s.Cards) == 0 {
			return
		}
		card := s.Cards[0]
		once.Do(func() {
			go c.Call(wire.Request{Op: wire.OpAnswer, Card: card.ID, Revision: card.Revision, Decision: string(approvals.DecisionDeny)})
		})
	}, func(wire.Show) {})
}

// backend is a Backend over a real approvals queue.
type backend struct{ q *approvals.Queue }

func newBackend(limits approvals.Limits) *backend {
	return &backend{q: approvals.NewQueue(approvals.Options{Audit: &approvalstest.Audit{}, Limits: limits})}
}

func (b *backend) SettleDelay() time.Duration { return b.q.SettleDelay() }

func (b *backend) open(t *testing.T, id, params, item string) {
	method := approvals.MethodCommandApproval
	if item != "" {
		method = approvals.MethodFileChangeApproval
	}
	req, _ := approvalstest.Request(t, "api", 1, id, method, params, item)
	b.q.Open(req)
}

func (b *backend) Cards() []approvals.Card                        { return b.q.Cards() }
func (b *backend) Full(id string) (string, approvals.Card, error) { return b.q.Full(id) }
func (b *backend) MarkShownInFull(id string, rev int, by approvals.By) error {
	return b.q.MarkShownInFull(id, rev, by)
}
func (b *backend) Answer(a approvals.Answer) (approvals.Answered, error) {
	return b.q.Answer(a)
}
func (b *backend) Workers() []supervisor.Status {
	return []supervisor.Status{{Name: "api", Cwd: "/w", State: supervisor.StatePaused, LastError: "exit\x1b[31m 1"}}
}
func (b *backend) Activity() []supervisor.Activity                           { return nil }
func (b *backend) StartTask(context.Context, string, string) (string, error) { return "turn-1", nil }
func (b *backend) Pause(string) error                                        { return errors.New("no") }
func (b *backend) Resume(string) error                                       { return nil }
func (b *backend) Restart(string) error                                      { return nil }

const (
	commandParams = `{"threadId":"T","turnId":"U","itemId":"c1","startedAtMs":1,"command":"rm a.txt","cwd":"/w","availableDecisions":["accept","decline","cancel"]}`
	patchParams   = `{"threadId":"T","turnId":"U","itemId":"p1","startedAtMs":1,"grantRoot":null}`
)

func bigPatch() string {
	return `{"type":"fileChange","id":"p1","changes":[{"path":"/w/gen.txt","kind":{"type":"add"},"diff":"` + strings.Repeat("line of a long file\\n", 200) + `"}],"status":"inProgress"}`
}

// TestPanelRequestsAreChecked: the main process takes nothing from the
// panel on trust.
func TestPanelRequestsAreChecked(t *testing.T) {
	b := newBackend(approvals.Limits{ShowBytes: 512, MaxBytes: 1 << 20})
	b.open(t, "0", commandParams, "")
	b.open(t, "1", patchParams, bigPatch())
	b.q.SetLimits(approvals.Limits{ShowBytes: 512, MaxBytes: 1 << 20}, time.Hour)
	u := New(context.Background(), b, Options{})
	h := u.panel
	r := &panelRun{pushed: map[string]shownRev{}, full: map[string]int{}, ready: make(chan struct{})}
	cards := b.Cards()
	cmd, patch := cards[0], cards[1]
	// Pushed long ago for the command, just now for the patch.
	r.pushed[cmd.ID] = shownRev{cmd.Revision, time.Now().Add(-2 * time.Hour), !cmd.Truncated}
	r.pushed[patch.ID] = shownRev{patch.Revision, time.Now(), !patch.Truncated}
	for _, tc := range []struct {
		name string
		req  wire.Request
		want string // "" for success
	}{
		{"no card", wire.Request{Op: wire.OpAnswer, Decision: "deny"}, "must name the card"},
		{"no revision", wire.Request{Op: wire.OpAnswer, Card: cmd.ID, Decision: "allow"}, "must name the card"},
		{"bad decision", wire.Request{Op: wire.OpAnswer, Card: cmd.ID, Revision: 1, Decision: "yes"}, "unknown decision"},
		{"never pushed", wire.Request{Op: wire.OpAnswer, Card: "api-99", Revision: 1, Decision: "deny"}, errNotShown.Error()},
		{"other revision", wire.Request{Op: wire.OpAnswer, Card: cmd.ID, Revision: 2, Decision: "deny"}, errNotShown.Error()},
		{"allow too soon", wire.Request{Op: wire.OpAnswer, Card: patch.ID, Revision: 1, Decision: "allow"}, approvals.ErrTooSoon.Error()},
		{"shown without the text", wire.Request{Op: wire.OpShown, Card: patch.ID, Revision: 1}, "was not sent"},
		{"full of another revision", wire.Request{Op: wire.OpFull, Card: patch.ID, Revision: 3}, errNotShown.Error()},
		{"full", wire.Request{Op: wire.OpFull, Card: patch.ID, Revision: 1}, ""},
		{"shown another revision", wire.Request{Op: wire.OpShown, Card: patch.ID, Revision: 2}, "was not sent"},
		{"shown", wire.Request{Op: wire.OpShown, Card: patch.ID, Revision: 1}, ""},
		{"shown, sent whole", wire.Request{Op: wire.OpShown, Card: cmd.ID, Revision: 1}, ""},
		{"task without prompt", wire.Request{Op: wire.OpTask, Worker: "api", Prompt: " "}, "needs a worker and a prompt"},
		{"task", wire.Request{Op: wire.OpTask, Worker: "api", Prompt: "go"}, ""},
		{"pause refused", wire.Request{Op: wire.OpPause, Worker: "api"}, "no"},
		{"resume", wire.Request{Op: wire.OpResume, Worker: "api"}, ""},
		{"unknown", wire.Request{Op: "format-disk"}, "unknown request"},
		{"allow", wire.Request{Op: wire.OpAnswer, Card: cmd.ID, Revision: 1, Decision: "allow"}, ""},
		{"twice", wire.Request{Op: wire.OpAnswer, Card: cmd.ID, Revision: 1, Decision: "deny"}, "already answered"},
	} {
		reply := h.handle(r, tc.req)
		if tc.want == "" && reply.Error != "" || tc.want != "" && !strings.Contains(reply.Error, tc.want) {
			t.Errorf("%s: error %q, want %q", tc.name, reply.Error, tc.want)
		}
	}
	if left := b.Cards(); len(left) != 1 || !left[0].ShownInFull {
		t.Errorf("cards left: %+v", left)
	}
}

func TestTrayMenuFollowsTheState(t *testing.T) {
	b := newBackend(approvals.DefaultLimits)
	b.open(t, "0", commandParams, "")
	u := New(context.Background(), b, Options{})
	tr := &tray{u: u, quit: func() {}}
	s := u.snapshot()
	s.panelFailure = "the panel program is missing"
	var labels []string
	var walk func([]item, string)
	walk = func(items []item, indent string) {
		for _, i := range items {
			label := i.label
			if i.separator() {
				label = "---"
			}
			if i.disabled {
				label = "(" + label + ")"
			}
			labels = append(labels, indent+label)
			walk(i.sub, indent+"  ")
		}
	}
	walk(tr.menu(s), "")
	want := []string{
		"(Panel unavailable: the panel program is missing)",
		"(1 card waiting)",
		"api · command: rm a.txt",
		"---",
		"api — paused",
		"  (State: paused)",
		`  (Last error: exit\u{1b}[31m 1)`,
		"  New task…",
		"  Resume",
		"  Restart",
		"---",
		"Open panel",
		"---",
		"Quit",
	}
	if strings.Join(labels, "\n") != strings.Join(want, "\n") {
		t.Errorf("menu:\n%s\nwant:\n%s", strings.Join(labels, "\n"), strings.Join(want, "\n"))
	}
	if !bytes.Equal(trayIcon(s), assets.TrayWaiting) {
		t.Error("a card is open, and the icon is not the waiting one")
	}
	if s.cards = nil; !bytes.Equal(trayIcon(s), assets.TrayIdle) {
		t.Error("no card, no work, and the icon is not the idle one")
	}
}

// TestPanelProcess: the panel starts on demand, gets the state, answers
// through its channel, and ends when the channel closes; a missing panel is
// reported and leaves the cards alone.
func TestPanelProcess(t *testing.T) {
	t.Setenv(fakePanelEnv, "1")
	b := newBackend(approvals.DefaultLimits)
	b.open(t, "0", commandParams, "")
	u := New(context.Background(), b, Options{Panel: os.Args[0]})
	if err := u.OpenPanel(""); err != nil {
		t.Fatal(err)
	}
	approvalstest.WaitFor(t, func() bool { return len(b.Cards()) == 0 }) // denied in the panel
	u.panel.mu.Lock()
	r := u.panel.run
	u.panel.mu.Unlock()
	u.panel.close()
	select {
	case <-r.exited:
	case <-time.After(panelGrace + time.Second):
		t.Fatal("the panel did not end with its channel")
	}
	approvalstest.WaitFor(t, func() bool {
		u.panel.mu.Lock()
		defer u.panel.mu.Unlock()
		return u.panel.run == nil
	})

	t.Setenv(fakePanelEnv, "fail")
	if err := u.OpenPanel(""); err == nil || !strings.Contains(err.Error(), "no display") {
		t.Errorf("a panel without a display: %v", err)
	}
	if f := u.panel.failure(); !strings.Contains(f, "no display") {
		t.Errorf("failure %q", f)
	}

	missing := New(context.Background(), b, Options{Panel: "/nonexistent/codexgate-panel"})
	if err := missing.OpenPanel(""); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing panel: %v", err)
	}
	if f := missing.panel.failure(); !strings.Contains(f, "missing") {
		t.Errorf("failure %q", f)
	}
}
