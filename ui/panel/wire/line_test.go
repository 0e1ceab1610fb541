package wire

import (
	"testing"

	"codexgate/supervisor"
)

func TestWorkerLineSaysWhatTheWorkerDoes(t *testing.T) {
	said := supervisor.Turn{ID: "t", Status: supervisor.TurnWorking, Messages: []string{`Fixing main.go \u{202e}now` + "\nthen the tests"}}
	failed := supervisor.Turn{ID: "t", Status: supervisor.TurnFailed, Messages: []string{"halfway"}, Error: "stream disconnected"}
	done := supervisor.Turn{ID: "t", Status: supervisor.TurnCompleted, Messages: []string{"All done."}}
	for _, tc := range []struct {
		name  string
		state supervisor.State
		turns []supervisor.Turn
		want  string
	}{
		{"nothing yet", supervisor.StateIdle, nil, "api — idle"},
		{"working, said nothing", supervisor.StateWorking, []supervisor.Turn{{ID: "t", Status: supervisor.TurnWorking}}, "api — working"},
		{"working", supervisor.StateWorking, []supervisor.Turn{done, said}, `api — working: Fixing main.go \u{202e}now … (+1 line)`},
		{"waiting", supervisor.StateWaiting, []supervisor.Turn{said}, `api — waiting: Fixing main.go \u{202e}now … (+1 line)`},
		{"completed", supervisor.StateIdle, []supervisor.Turn{done}, "api — idle · last turn completed: All done."},
		{"failed", supervisor.StateIdle, []supervisor.Turn{failed}, "api — idle · last turn failed: stream disconnected"},
		{"paused", supervisor.StatePaused, []supervisor.Turn{done}, "api — paused"},
	} {
		got := WorkerLine(supervisor.Status{Name: "api", State: tc.state}, supervisor.Activity{Worker: "api", Turns: tc.turns})
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
