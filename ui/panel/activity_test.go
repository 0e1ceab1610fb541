package panel

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"codexgate/approvals"
	"codexgate/supervisor"
	"codexgate/ui/panel/wire"
)

func exit(code int) *int { return &code }

// Activity as the supervisor's history holds it: escaped and capped.
var (
	workingTurn = supervisor.Turn{
		ID: "turn-2", Status: supervisor.TurnWorking,
		Prompt:   "Make the greeting test pass",
		Messages: []string{"The test expects \"hello\"; fixing the constant in main.go, then running the tests."},
		Commands: []supervisor.Command{{ID: "c1", Command: "/bin/bash -lc 'go test ./...'", Status: "inProgress"}},
		Tokens:   5210,
	}
	finishedTurn = supervisor.Turn{
		ID: "turn-1", Status: supervisor.TurnCompleted,
		Prompt:   "Add a NOTES.md that says what changed",
		Messages: []string{"Added NOTES.md. \\u{202e}The tests pass.\nNothing else changed."},
		Commands: []supervisor.Command{{ID: "c1", Command: "/bin/bash -lc 'go test ./...'", Status: "completed", ExitCode: exit(0)}},
		Files:    []supervisor.FileChange{{ItemID: "f1", Path: "/home/me/api/NOTES.md", Kind: "add", Status: "completed"}},
		Tokens:   3120,
	}
)

func activityState(workers []supervisor.Status, act ...supervisor.Activity) wire.State {
	return wire.State{Workers: workers, Activity: act}
}

func TestActivityGoldens(t *testing.T) {
	api := supervisor.Status{Name: "api", Cwd: "/home/me/api", State: supervisor.StateIdle, ThreadID: "T"}
	web := supervisor.Status{Name: "web", Cwd: "/home/me/web", State: supervisor.StateIdle, ThreadID: "T2"}
	working := api
	working.State, working.TurnID = supervisor.StateWorking, "turn-2"
	for _, tc := range []struct {
		golden string
		state  wire.State
	}{
		{"activity_working", activityState([]supervisor.Status{working, web},
			supervisor.Activity{Worker: "api", Seq: 4, Turns: []supervisor.Turn{finishedTurn, workingTurn}}, supervisor.Activity{Worker: "web"})},
		{"activity_finished", activityState([]supervisor.Status{api, web},
			supervisor.Activity{Worker: "api", Seq: 3, Turns: []supervisor.Turn{finishedTurn}}, supervisor.Activity{Worker: "web"})},
		{"activity_empty", activityState([]supervisor.Status{api, web},
			supervisor.Activity{Worker: "api"}, supervisor.Activity{Worker: "web"})},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			app := test.NewTempApp(t)
			app.Settings().SetTheme(theme.DefaultTheme()) // the test theme has no bold
			p := newTestPanel(app, newBackend(t, approvals.DefaultLimits))
			p.Update(tc.state)
			p.win.Resize(fyne.NewSize(980, 620))
			test.AssertRendersToImage(t, tc.golden+".png", p.win.Canvas())
		})
	}
}

// texts is every text the activity view shows, in order.
func texts(o fyne.CanvasObject) []string {
	var out []string
	var walk func(fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		switch w := o.(type) {
		case *widget.Label:
			out = append(out, w.Text)
		case *widget.RichText:
			out = append(out, w.String())
		case *fyne.Container:
			for _, c := range w.Objects {
				walk(c)
			}
		}
	}
	walk(o)
	return out
}

func TestActivityViewSaysWhatATurnDid(t *testing.T) {
	app := test.NewTempApp(t)
	// One backend for the panel and the card: the panel reports the card
	// shown to the queue that has it.
	b := newBackend(t, approvals.DefaultLimits)
	p := newTestPanel(app, b)
	api := supervisor.Status{Name: "api", State: supervisor.StateIdle}
	p.Update(activityState([]supervisor.Status{api}, supervisor.Activity{Worker: "api", Seq: 1, Turns: []supervisor.Turn{finishedTurn}}))
	got := strings.Join(texts(p.activity.box), "\n")
	for _, want := range []string{
		`api — idle · last turn completed: Added NOTES.md. \u{202e}The tests pass. … (+1 line)`,
		"Turn completed · 1 message · 1 command · 1 file change · 3120 tokens",
		"Task: Add a NOTES.md that says what changed",
		"$ /bin/bash -lc 'go test ./...'   → exit 0",
		"add    /home/me/api/NOTES.md   completed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the view lacks %q:\n%s", want, got)
		}
	}
	if !p.activity.scroll.Visible() || p.cardBox.Visible() {
		t.Error("with no card open, the activity is not what is shown")
	}

	// A card comes first; the activity is back once it closes.
	b.open(t, "0", approvals.MethodCommandApproval, commandParams, "")
	st := b.state(0)
	st.Activity = []supervisor.Activity{{Worker: "api", Seq: 1, Turns: []supervisor.Turn{finishedTurn}}}
	p.Update(st)
	if p.activity.scroll.Visible() || !p.cardBox.Visible() {
		t.Error("an open card is not shown first")
	}
	st.Cards = nil
	p.Update(st)
	if !p.activity.scroll.Visible() {
		t.Error("the activity is not back once the card closed")
	}
}

func TestActivityTaskBoxKeepsItsTextAcrossUpdates(t *testing.T) {
	app := test.NewTempApp(t)
	b := &taskBackend{backend: newBackend(t, approvals.DefaultLimits), started: make(chan [2]string, 1)}
	p := newTestPanel(app, b)
	api := []supervisor.Status{{Name: "api", State: supervisor.StateIdle}}
	p.Update(activityState(api, supervisor.Activity{Worker: "api"}))
	e := p.activity.entries["api"]
	test.Type(e, "run the tests")
	p.Update(activityState(api, supervisor.Activity{Worker: "api", Seq: 1, Turns: []supervisor.Turn{workingTurn}}))
	if e != p.activity.entries["api"] || e.Text != "run the tests" {
		t.Fatalf("the task box lost what was typed: %q", e.Text)
	}
	e.OnSubmitted(e.Text)
	if got := <-b.started; got != [2]string{"api", "run the tests"} {
		t.Errorf("started %q", got)
	}
}

type taskBackend struct {
	*backend
	started chan [2]string
}

func (b *taskBackend) StartTask(worker, prompt string) (string, error) {
	b.started <- [2]string{worker, prompt}
	return "turn-9", nil
}
