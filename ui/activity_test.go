package ui

import (
	"context"
	"testing"

	"codexgate/approvals"
	"codexgate/supervisor"
)

func TestTrayMenuSaysWhatEachWorkerDoes(t *testing.T) {
	u := New(context.Background(), newBackend(approvals.DefaultLimits), Options{})
	tr := &tray{u: u, quit: func() {}}
	s := u.snapshot()
	s.workers = []supervisor.Status{{Name: "api", State: supervisor.StateWorking}, {Name: "web", State: supervisor.StateIdle}}
	s.activity = []supervisor.Activity{
		{Worker: "api", Seq: 2, Turns: []supervisor.Turn{{ID: "t", Status: supervisor.TurnWorking, Messages: []string{"Running the tests now.\nThen the linter."}}}},
		{Worker: "web"},
	}
	var labels []string
	for _, i := range tr.menu(s) {
		labels = append(labels, i.label)
	}
	for _, want := range []string{"api — working: Running the tests now. … (+1 line)", "web — idle"} {
		found := false
		for _, l := range labels {
			found = found || l == want
		}
		if !found {
			t.Errorf("the menu lacks %q: %q", want, labels)
		}
	}
	// The panel gets the same activity, and a new one is a change to push.
	if st := s.state(); len(st.Activity) != 2 || st.Activity[0].Turns[0].Messages[0] != "Running the tests now.\nThen the linter." {
		t.Errorf("the panel's state lacks the activity: %+v", st.Activity)
	}
	next := s
	next.activity = []supervisor.Activity{{Worker: "api", Seq: 3}, {Worker: "web"}}
	if s.equal(next) || !s.equal(s) {
		t.Error("a new activity is not a change")
	}
}
