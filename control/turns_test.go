package control

import (
	"strings"
	"testing"

	"codexgate/supervisor"
)

func TestTurnStateIsTheLastTurnCapped(t *testing.T) {
	if _, ok := TurnStateOf(supervisor.Activity{Worker: "api"}); ok {
		t.Error("a worker that ran no turn has a turn state")
	}
	long := strings.Repeat("é", lastMessageBytes) // two bytes each
	a := supervisor.Activity{Worker: "api", Turns: []supervisor.Turn{
		{ID: "t1", Status: supervisor.TurnFailed, Error: "old"},
		{ID: "t2", Status: supervisor.TurnWorking, Messages: []string{"first", long}, Tokens: 42},
	}}
	ts, ok := TurnStateOf(a)
	if !ok || ts.ID != "t2" || ts.Status != supervisor.TurnWorking || ts.Error != "" || ts.Tokens != 42 {
		t.Fatalf("turn state = %+v", ts)
	}
	if len(ts.LastMessage) > lastMessageBytes || !strings.HasPrefix(long, ts.LastMessage) || !strings.HasSuffix(ts.LastMessage, "é") {
		t.Errorf("last message of %d bytes is not capped at a rune boundary", len(ts.LastMessage))
	}
}
