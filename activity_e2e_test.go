package main

import (
	"path/filepath"
	"strings"
	"testing"

	"codexgate/control"
	"codexgate/supervisor"
	"codexgate/supervisor/codextest"
)

// TestWorkersShowWhatTheTurnDid: after a task that runs a command and says
// something, `codexgate workers --json` carries the turn's state and the
// agent's last message, escaped.
func TestWorkersShowWhatTheTurnDid(t *testing.T) {
	a, ws := startApp(t, workerDef{name: "api", steps: []codextest.Step{
		codextest.Exec("echo hello > greet.txt && cat greet.txt", false),
		codextest.Say("Wrote greet.txt.\u202e\nIt says hello."),
	}})
	type worker struct {
		supervisor.Status
		Turn *control.TurnState `json:"turn"`
	}
	var before []worker
	if err := a.try(&before, "workers", "--json"); err != nil || len(before) != 1 || before[0].Turn != nil {
		t.Fatalf("before any task: %+v (%v)", before, err)
	}

	turn := strings.TrimSpace(a.must("task", "api", "write a greeting"))
	var w worker
	a.waitFor("the turn to complete", func() bool {
		var ws []worker
		if a.try(&ws, "workers", "--json") != nil || len(ws) != 1 || ws[0].Turn == nil {
			return false
		}
		w = ws[0]
		return w.Turn.Status != supervisor.TurnWorking
	})
	if w.Turn.ID != turn || w.Turn.Status != supervisor.TurnCompleted {
		t.Errorf("turn = %+v, want %s completed", w.Turn, turn)
	}
	if want := "Wrote greet.txt.\\u{202e}\nIt says hello."; w.Turn.LastMessage != want {
		t.Errorf("last message = %q, want %q", w.Turn.LastMessage, want)
	}
	if w.Turn.Tokens <= 0 {
		t.Errorf("no tokens reported: %+v", w.Turn)
	}
	if !exists(filepath.Join(ws["api"], "greet.txt")) {
		t.Error("the turn's command did not run")
	}
	if w.State != supervisor.StateIdle || w.Turn.Error != "" {
		t.Errorf("worker after the turn: %+v", w)
	}
}
