package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/config/keys"
	"codexgate/supervisor/codextest"
	kb "codexgate/ui/hotkey/hotkeytest"
)

// TestHotkeysWithNoWindowFocused runs the app on a display where no window
// has the focus (a bare X session, an empty workspace of a tiling window
// manager), where every key press goes to the root window. Only the
// configured keys, with exactly their modifiers and any lock on, answer the
// oldest card; once no card is open the keys are free for other programs.
func TestHotkeysWithNoWindowFocused(t *testing.T) {
	k := kb.New(t)
	k.Focus(k.Root())
	k.SetLocks(false, false)

	a := newApp(t)
	a.desktop = true
	const settle = time.Second
	a.extra = "[cards]\nsettle_delay = \"1s\"\n"
	ws := a.start(
		workerDef{name: "yes", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
		workerDef{name: "no", steps: []codextest.Step{codextest.Exec("rm a.txt", true)}},
	)
	pressed := func() int { return strings.Count(a.log.String(), "global hotkey pressed") }
	registered := func(n int) {
		t.Helper()
		a.waitFor("the hotkeys to be grabbed", func() bool { return strings.Count(a.log.String(), "global hotkeys registered") >= n })
	}

	a.must("task", "yes", "delete a.txt")
	card := a.cards(1)[0]
	registered(1)
	// Past the settle delay, a press that counted as the allow key would
	// allow the card.
	time.Sleep(time.Until(card.CreatedAt.Add(settle + 500*time.Millisecond)))
	for _, press := range [][]uint32{
		{kb.Ctrl}, {kb.Alt}, {kb.Shift}, {kb.Ctrl, kb.Alt}, {kb.Ctrl, kb.Alt, kb.Shift},
		{'a'}, {'y'}, {'n'}, {'x'},
		{kb.Return}, {kb.Escape},
		{kb.Ctrl, 'y'}, {kb.Alt, 'y'}, {kb.Ctrl, kb.Alt, 'x'}, {kb.Ctrl, kb.Shift, 'y'},
		{kb.Ctrl, 'n'}, {kb.Alt, 'n'}, {kb.Ctrl, kb.Shift, 'n'},
	} {
		k.Tap(press...)
	}

	// The app reads its key events in order: when the allow below has
	// answered the card, any press above would have been logged before it.
	a.show(card)
	k.SetLocks(false, true)
	k.Tap(kb.Ctrl, kb.Alt, 'y')
	a.cards(0)
	if n := pressed(); n != 1 {
		t.Fatalf("%d hotkey presses for one press of Ctrl+Alt+Y among other keys:\n%s", n, a.log)
	}
	a.idle("yes")
	if exists(filepath.Join(ws["yes"], "a.txt")) {
		t.Error("the hotkey allow did not remove a.txt")
	}
	if end := auditEnd(t, a, card.ID); end.Decision != approvals.DecisionAllow || end.By != approvals.ByHotkey {
		t.Errorf("the audit records %+v for the allowed card", end)
	}

	a.must("task", "no", "delete a.txt")
	card = a.cards(1)[0]
	registered(2)
	k.SetLocks(true, true)
	k.Tap(kb.Ctrl, kb.Alt, 'n')
	a.cards(0)
	a.idle("no")
	if !exists(filepath.Join(ws["no"], "a.txt")) {
		t.Error("the hotkey deny removed a.txt")
	}
	if end := auditEnd(t, a, card.ID); end.Decision != approvals.DecisionDeny || end.By != approvals.ByHotkey {
		t.Errorf("the audit records %+v for the denied card", end)
	}
	if n := pressed(); n != 2 {
		t.Errorf("%d hotkey presses, want 2", n)
	}

	// With no card open, another program can grab the keys, with any lock.
	k.SetLocks(false, false)
	a.waitFor("the keys to be free", func() bool {
		for _, sym := range []uint32{'y', 'n'} {
			for _, locks := range []uint16{0, k.NumLockMask(), k.NumLockMask() | 1<<1} {
				if k.Free(keys.ModCtrl|keys.ModAlt|locks, sym) != nil {
					return false
				}
			}
		}
		return true
	})
}

// auditEnd is the audit record of how a card ended.
func auditEnd(t *testing.T, a *testApp, card string) approvals.Record {
	t.Helper()
	f, err := os.Open(filepath.Join(a.dir, "state", "codexgate", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var end approvals.Record
	for s := bufio.NewScanner(f); s.Scan(); {
		var r approvals.Record
		if json.Unmarshal(s.Bytes(), &r) == nil && r.Card == card && r.Event == "end" {
			end = r
		}
	}
	return end
}
