package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/config"
	"codexgate/supervisor/codextest"
)

// TestNotificationsAnswerAndAreTakenBack runs the app against dunst in the
// private desktop session of ./scripts/testenv: a card is allowed from its
// notification through dunst's context menu, a card answered on the command
// line takes its notification away, and the ended turn is announced with
// the agent's last message.
func TestNotificationsAnswerAndAreTakenBack(t *testing.T) {
	envDir := os.Getenv("CODEXGATE_TESTENV_DIR")
	if os.Getenv("DISPLAY") == "" || os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" || envDir == "" {
		t.Fatal("no desktop session: run the tests under ./scripts/testenv, which starts one with dunst")
	}
	monitor := exec.Command("dbus-monitor", "--session", "type='method_call',interface='org.freedesktop.Notifications'")
	calls := &syncBuffer{}
	monitor.Stdout = calls
	if err := monitor.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { monitor.Process.Kill(); monitor.Wait() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("calls to the notification server:\n%s", calls)
		}
	})

	a := newApp(t)
	a.desktop = true
	ws := a.start(workerDef{name: "api", steps: []codextest.Step{
		codextest.Exec("rm a.txt", true),
		codextest.Exec("rm b.txt", true),
		codextest.Say("All done: a.txt is gone.\nNothing else changed."),
	}})

	a.must("task", "api", "delete a.txt, then b.txt")
	first := a.cards(1)[0]
	a.waitFor("the card's notification", func() bool { return strings.Contains(calls.String(), "rm a.txt") })
	if !strings.Contains(calls.String(), `string "allow:1"`) {
		t.Fatalf("the notification does not offer Allow:\n%s", calls)
	}
	// dunst's context menu lists each action as "#Allow (summary) [id,allow:1]";
	// the stand-in for dmenu picks Allow.
	pick := "#!/bin/sh\ngrep -m1 -F ',allow:1]'\n"
	if err := os.WriteFile(filepath.Join(envDir, "dmenu"), []byte(pick), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(first.CreatedAt.Add(config.DefaultCards.SettleDelay.Duration + 500*time.Millisecond)))
	if out, err := exec.Command("dunstctl", "context").CombinedOutput(); err != nil {
		t.Fatalf("dunstctl context: %v %s", err, out)
	}

	var second approvals.Card
	a.waitFor("the next card", func() bool {
		var cards []approvals.Card
		if a.try(&cards, "cards", "--json") != nil || len(cards) != 1 || cards[0].ID == first.ID {
			return false
		}
		second = cards[0]
		return true
	})
	if exists(filepath.Join(ws["api"], "a.txt")) {
		t.Error("the Allow from the notification did not remove a.txt")
	}
	audit, _ := os.ReadFile(filepath.Join(a.dir, "state", "codexgate", "audit.jsonl"))
	if !strings.Contains(string(audit), `"card":"`+first.ID+`"`) || !strings.Contains(string(audit), `"by":"notification"`) {
		t.Errorf("the audit log does not record the answer by notification:\n%s", audit)
	}

	a.waitFor("the second card's notification", func() bool { return strings.Contains(calls.String(), "rm b.txt") })
	closes := strings.Count(calls.String(), "member=CloseNotification")
	a.must("answer", "allow", second.ID)
	a.waitFor("the notification taken back", func() bool {
		return strings.Count(calls.String(), "member=CloseNotification") > closes
	})

	a.idle("api")
	a.waitFor("the turn's notification", func() bool {
		return strings.Contains(calls.String(), `string "api finished: All done: a.txt is gone."`)
	})

}
