package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"codexgate/supervisor/codextest"
)

// TestWaylandPortalHotkeys runs the app as a person on KDE Plasma's Wayland
// session does: no X display, the hotkeys bound through the desktop
// portal's GlobalShortcuts, and keys pressed through the compositor. The
// app has run once before in the session, as after a restart. A plain N
// does nothing; Ctrl+Alt+N denies the oldest card, and only it.
//
// It needs the session scripts/kde-session makes; started outside one, it
// runs itself again inside one.
func TestWaylandPortalHotkeys(t *testing.T) {
	fakeKey := os.Getenv("CODEXGATE_FAKE_KEY")
	if fakeKey == "" {
		cmd := exec.Command(filepath.Join(codextest.Root(), "scripts", "kde-session"),
			os.Args[0], "-test.run=^TestWaylandPortalHotkeys$", "-test.count=1", "-test.v")
		out, err := cmd.CombinedOutput()
		t.Logf("inside a KDE Wayland session:\n%s", out)
		if err != nil {
			t.Fatalf("the test inside the KDE Wayland session: %v", err)
		}
		return
	}
	if os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") == "" {
		t.Fatalf("not a Wayland session without X: DISPLAY=%q WAYLAND_DISPLAY=%q", os.Getenv("DISPLAY"), os.Getenv("WAYLAND_DISPLAY"))
	}
	press := func(keys string) {
		t.Helper()
		if out, err := exec.Command(fakeKey, keys).CombinedOutput(); err != nil {
			t.Fatalf("press %s: %v %s", keys, err, out)
		}
	}

	bound := func(a *testApp) {
		a.waitFor("the hotkeys bound through the portal", func() bool {
			return strings.Contains(a.log.String(), "global hotkeys bound") && strings.Contains(a.log.String(), "deny=Ctrl+Alt+N")
		})
	}
	before := newApp(t)
	before.desktop = true
	before.start(workerDef{name: "before"})
	bound(before)
	before.stop()

	a := newApp(t)
	a.desktop = true
	ws := a.start(
		workerDef{name: "first", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
		workerDef{name: "second", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
	)
	bound(a)
	a.must("task", "first", "delete a.txt")
	oldest := a.cards(1)[0]
	a.must("task", "second", "delete a.txt")
	a.cards(2)

	// The compositor delivers presses in order: once Ctrl+Alt+N has answered
	// one card, the plain N before it has been handled, and did nothing.
	press("n")
	press("ctrl+alt+n")
	if left := a.cards(1); left[0].ID == oldest.ID {
		t.Fatalf("the hotkey answered %s, not the oldest card %s", left[0].ID, oldest.ID)
	}
	a.idle("first")
	if !exists(filepath.Join(ws["first"], "a.txt")) {
		t.Error("the denied rm removed a.txt")
	}
	audit, _ := os.ReadFile(filepath.Join(a.dir, "state", "codexgate", "audit.jsonl"))
	if strings.Count(string(audit), `"by":"hotkey"`) != 1 || !strings.Contains(string(audit), `"decision":"deny"`) {
		t.Errorf("the audit log does not record one deny by hotkey:\n%s", audit)
	}
}
