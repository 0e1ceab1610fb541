package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codexgate/supervisor/codextest"
)

// artifacts is where the desktop test leaves its screenshot.
var artifacts = filepath.Join(codextest.Root(), ".tools", "artifacts")

// TestDesktop runs the app as a person does, under the private desktop
// session of `make test` (Xvfb, D-Bus, dunst, a tray): one notification per
// card, a registered tray item, and the allow hotkey, which does nothing
// before the settle delay and answers the oldest card, shown whole by
// `codexgate show`, after it.
func TestDesktop(t *testing.T) {
	if os.Getenv("DISPLAY") == "" || os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		t.Fatal("no desktop session: run the tests with `make test`, which starts one")
	}
	monitor := exec.Command("dbus-monitor", "--session", "type='method_call',interface='org.freedesktop.Notifications',member='Notify'")
	notes := &syncBuffer{}
	monitor.Stdout = notes
	if err := monitor.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { monitor.Process.Kill(); monitor.Wait() }()

	a := newApp(t)
	a.desktop = true
	a.extra = "[cards]\nsettle_delay = \"6s\"\n"
	ws := a.start(workerDef{name: "desk", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}})

	a.waitFor("the tray item to register", func() bool {
		out, err := exec.Command("dbus-send", "--session", "--print-reply", "--dest=org.kde.StatusNotifierWatcher", "/StatusNotifierWatcher",
			"org.freedesktop.DBus.Properties.Get", "string:org.kde.StatusNotifierWatcher", "string:RegisteredStatusNotifierItems").CombinedOutput()
		return err == nil && strings.Contains(string(out), "string \"")
	})

	a.must("task", "desk", "delete a.txt")
	card := a.cards(1)[0]
	a.waitFor("the notification", func() bool { return strings.Count(notes.String(), "member=Notify") >= 1 })
	a.waitFor("the hotkeys to register", func() bool { return strings.Contains(a.log.String(), "global hotkeys registered") })
	calls := strings.Count(notes.String(), "member=Notify")
	if calls != 1 {
		t.Errorf("%d Notify calls for one card:\n%s", calls, notes)
	}
	if !strings.Contains(notes.String(), "desk wants to run a command") || !strings.Contains(notes.String(), "rm a.txt") {
		t.Errorf("the notification does not show the command:\n%s", notes)
	}

	a.must("panel", card.ID)
	time.Sleep(2 * time.Second) // the window maps and draws
	shot := filepath.Join(artifacts, "desktop-panel.png")
	os.MkdirAll(artifacts, 0o755)
	if out, err := exec.Command("import", "-window", "root", shot).CombinedOutput(); err != nil {
		t.Errorf("screenshot: %v %s", err, out)
	} else {
		t.Logf("screenshot of the panel: %s", shot)
	}

	// The hotkey allows only a card shown whole; and before the settle
	// delay it answers nothing.
	a.show(card)
	if time.Since(card.CreatedAt) > 5*time.Second {
		t.Fatalf("the card is already %v old; the early key press would prove nothing", time.Since(card.CreatedAt))
	}
	xdotool(t, "ctrl+alt+y")
	time.Sleep(time.Second)
	if open := a.cards(1); open[0].ID != card.ID || !exists(filepath.Join(ws["desk"], "a.txt")) {
		t.Fatal("the hotkey answered a card before the settle delay")
	}
	time.Sleep(time.Until(card.CreatedAt.Add(6*time.Second + 500*time.Millisecond)))
	xdotool(t, "ctrl+alt+y")
	a.cards(0)
	a.idle("desk")
	if exists(filepath.Join(ws["desk"], "a.txt")) {
		t.Error("the hotkey allow did not remove a.txt")
	}
	audit, _ := os.ReadFile(filepath.Join(a.dir, "state", "codexgate", "audit.jsonl"))
	if !strings.Contains(string(audit), `"by":"hotkey"`) {
		t.Errorf("the audit log does not record the hotkey:\n%s", audit)
	}
	a.waitFor("hotkeys released", func() bool { return strings.Contains(a.log.String(), "global hotkeys released") })
}

func xdotool(t *testing.T, keys string) {
	t.Helper()
	if out, err := exec.Command("xdotool", "key", keys).CombinedOutput(); err != nil {
		t.Fatalf("xdotool key %s: %v %s", keys, err, out)
	}
}
