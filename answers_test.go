package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codexgate/supervisor/codextest"
)

// TestDenyGoesOnAndStopEndsTheTurn: with the real codex, Deny refuses the
// command and the turn goes on (the model is called again and told of the
// refusal), while Deny and stop interrupts the turn (no further model call).
// Neither removes a.txt.
func TestDenyGoesOnAndStopEndsTheTurn(t *testing.T) {
	a, ws := startApp(t,
		workerDef{name: "deny", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
		workerDef{name: "stop", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
	)
	a.must("task", "deny", "delete a.txt")
	c := a.cards(1)[0]
	out := a.must("answer", "deny", c.ID)
	if !strings.Contains(out, `{"decision":"decline"}`) || !strings.Contains(out, "the turn goes on") {
		t.Errorf("deny printed %q", out)
	}
	a.idle("deny")
	if !exists(filepath.Join(ws["deny"], "a.txt")) {
		t.Error("denied rm removed a.txt")
	}
	if rolloutHas(t, filepath.Join(a.dir, "deny-home"), `"turn_aborted"`) {
		t.Error("deny interrupted the turn")
	}
	reqs := a.responses["deny"].Requests()
	if len(reqs) < 2 || !strings.Contains(string(reqs[len(reqs)-1]), "rejected by user") {
		t.Errorf("after deny the model was called %d times; the last request: %.2000s", len(reqs), reqs[len(reqs)-1])
	}

	a.must("task", "stop", "delete a.txt")
	c = a.cards(1)[0]
	out = a.must("answer", "stop", c.ID)
	if !strings.Contains(out, `{"decision":"cancel"}`) || !strings.Contains(out, "stop the turn") {
		t.Errorf("stop printed %q", out)
	}
	a.idle("stop")
	if !exists(filepath.Join(ws["stop"], "a.txt")) {
		t.Error("stopped rm removed a.txt")
	}
	if n := len(a.responses["stop"].Requests()); n != 1 {
		t.Errorf("after stop the model was called %d times, want only the first call", n)
	}
	if !rolloutHas(t, filepath.Join(a.dir, "stop-home"), `"turn_aborted"`) {
		t.Error("codex did not record the turn as interrupted")
	}
}

// rolloutHas reports whether a session file of the codex home holds s.
func rolloutHas(t *testing.T, home, s string) bool {
	t.Helper()
	found := false
	filepath.WalkDir(filepath.Join(home, "sessions"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			raw, _ := os.ReadFile(path)
			found = found || strings.Contains(string(raw), s)
		}
		return nil
	})
	return found
}

// TestAllowNeedsTheCardShown: `answer allow CARD` is refused until `show
// CARD` has printed the card; `answer allow` without a card also waits for
// the settle delay of the oldest card.
func TestAllowNeedsTheCardShown(t *testing.T) {
	const settle = 10 * time.Second
	a := newApp(t)
	a.extra = "[cards]\nsettle_delay = \"10s\"\n"
	ws := a.start(
		workerDef{name: "named", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
		workerDef{name: "quick", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
	)

	a.must("task", "named", "delete a.txt")
	c := a.cards(1)[0]
	if out, err := a.run("answer", "allow", c.ID); err == nil || !strings.Contains(out, "run `codexgate show "+c.ID+"` first") {
		t.Fatalf("named allow before show: %v %q", err, out)
	}
	shown := a.show(c)
	for _, want := range []string{"rm a.txt", "cwd:", "  allow  ", "Allow this once", "  deny  ", "Deny (the turn goes on)", "  stop  ", "Deny and stop the turn"} {
		if !strings.Contains(shown, want) {
			t.Errorf("show printed no %q:\n%s", want, shown)
		}
	}
	if out := a.must("answer", "allow", c.ID); !strings.HasPrefix(out, c.ID+" allow (Allow this once, revision 1): sent") {
		t.Errorf("answer printed %q", out)
	}
	a.idle("named")
	if exists(filepath.Join(ws["named"], "a.txt")) {
		t.Error("the allowed rm did not run")
	}

	a.must("task", "quick", "delete a.txt")
	c = a.cards(1)[0]
	if out, err := a.run("answer", "allow"); err == nil || !strings.Contains(out, "run `codexgate show "+c.ID+"` or open it in the panel first") {
		t.Fatalf("quick allow before show: %v %q", err, out)
	}
	a.show(c)
	if time.Since(c.CreatedAt) > settle-2*time.Second {
		t.Fatalf("the card is already %v old; the early answer would prove nothing", time.Since(c.CreatedAt))
	}
	if out, err := a.run("answer", "allow"); err == nil || !strings.Contains(out, "settle delay") {
		t.Fatalf("quick allow before the settle delay: %v %q", err, out)
	}
	if !exists(filepath.Join(ws["quick"], "a.txt")) || len(a.cards(1)) != 1 {
		t.Fatal("a refused allow answered the card")
	}
	time.Sleep(time.Until(c.CreatedAt.Add(settle + 500*time.Millisecond)))
	if out := a.must("answer", "allow"); !strings.HasPrefix(out, c.ID+" allow") {
		t.Errorf("quick allow after the settle delay: %q", out)
	}
	a.idle("quick")
	if exists(filepath.Join(ws["quick"], "a.txt")) {
		t.Error("the allowed rm did not run")
	}
}
