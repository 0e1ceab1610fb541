package ui

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"fyne.io/systray"

	"codexgate/approvals"
	"codexgate/assets"
	"codexgate/sessionbus"
	"codexgate/supervisor"
	"codexgate/ui/panel/wire"
)

// item is one entry of the tray menu, built from a snapshot and then put
// on the bus; a zero item is a separator.
type item struct {
	label    string
	disabled bool
	action   func()
	sub      []item
}

func (i item) separator() bool { return i.label == "" }

// tray is the StatusNotifierItem icon and its D-Bus menu (fyne.io/systray,
// without Fyne: the long-lived process needs no GL). It is used by Run's
// goroutine only; each menu item has a goroutine that waits for its clicks
// and ends when the item is removed.
type tray struct {
	u    *UI
	quit func()
	end  func() // nil when not started
	icon []byte
}

func (t *tray) start(quit func()) {
	t.quit = quit
	bus, host := trayHost()
	if !host {
		t.u.opts.Log.Warn("no system tray host (StatusNotifierWatcher) on the session bus: use the panel (codexgate panel) and the hotkeys")
		t.u.say("Codexgate has no tray here", "No system tray was found. Open the panel with `codexgate panel`; the hotkeys still work.")
	}
	if !bus {
		return // systray cannot even start, and would fail to stop
	}
	start, end := systray.RunWithExternalLoop(nil, nil)
	start()
	t.end = end
	systray.SetTitle("Codexgate")
	systray.SetTooltip("Codexgate")
}

func (t *tray) stop() {
	if t.end == nil {
		return
	}
	systray.ResetMenu() // ends the items' goroutines
	t.end()
	t.end = nil
}

// trayHost reports whether there is a session bus, and a
// StatusNotifierItem host on it to show the icon.
func trayHost() (bus, host bool) {
	conn, err := sessionbus.Connect()
	if err != nil {
		return false, false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), trayHostTimeout)
	defer cancel()
	err = conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, "org.kde.StatusNotifierWatcher").Store(&host)
	return true, err == nil && host
}

// trayHostTimeout bounds the question to the bus at start.
const trayHostTimeout = 5 * time.Second

// trayIcon is the icon of s: waiting when a card is open, working while a
// worker works, idle otherwise.
func trayIcon(s snapshot) []byte {
	if len(s.cards) > 0 {
		return assets.TrayWaiting
	}
	for _, w := range s.workers {
		if w.State == supervisor.StateWorking || w.State == supervisor.StateWaiting {
			return assets.TrayWorking
		}
	}
	return assets.TrayIdle
}

func (t *tray) update(s snapshot) {
	if t.end == nil {
		return
	}
	if icon := trayIcon(s); !bytes.Equal(icon, t.icon) {
		systray.SetIcon(icon)
		t.icon = icon
	}
	systray.ResetMenu()
	for _, i := range t.menu(s) {
		add(i, nil)
	}
}

// add puts i on the bus, under parent (nil: the top level).
func add(i item, parent *systray.MenuItem) {
	if i.separator() {
		if parent != nil {
			parent.AddSeparator()
		} else {
			systray.AddSeparator()
		}
		return
	}
	var m *systray.MenuItem
	if parent != nil {
		m = parent.AddSubMenuItem(i.label, "")
	} else {
		m = systray.AddMenuItem(i.label, "")
	}
	if i.disabled {
		m.Disable()
	}
	for _, s := range i.sub {
		add(s, m)
	}
	if i.action != nil {
		go func() {
			for range m.ClickedCh {
				i.action()
			}
		}()
	}
}

// menu is the tray menu of s.
func (t *tray) menu(s snapshot) []item {
	u := t.u
	var items []item
	if s.panelFailure != "" {
		items = append(items, item{label: "Panel unavailable: " + approvals.FirstLine(s.panelFailure, labelBytes), disabled: true})
	}
	items = append(items, item{label: cardCount(len(s.cards)), disabled: true})
	for _, c := range s.cards {
		id := c.ID
		items = append(items, item{label: wire.CardLabel(c), action: func() { u.OpenPanel(id) }})
	}
	items = append(items, item{})
	for _, w := range s.workers {
		items = append(items, t.workerItem(w, wire.ActivityOf(s.activity, w.Name)))
	}
	items = append(items, item{})
	if keys := t.hotkeyLine(); keys != "" {
		items = append(items, item{label: keys, disabled: true})
	}
	return append(items,
		item{label: "Open panel", action: func() { u.OpenPanel("") }},
		item{},
		item{label: "Quit", action: t.quit},
	)
}

// hotkeyLine says which keys answer the oldest card, as the X server or the
// desktop assigned them: on Wayland the desktop may have chosen others than
// the config's.
func (t *tray) hotkeyLine() string {
	if t.u.opts.Hotkeys == nil {
		return ""
	}
	keys := t.u.opts.Hotkeys.Triggers()
	var parts []string
	for _, name := range []string{hotkeyAllow, hotkeyDeny} {
		if k := keys[name]; k != "" {
			parts = append(parts, name+" "+approvals.OneLine(k, labelBytes))
		}
	}
	if len(parts) == 0 {
		return "No global hotkeys"
	}
	return "Hotkeys: " + strings.Join(parts, ", ")
}

func cardCount(n int) string {
	switch n {
	case 0:
		return "No cards waiting"
	case 1:
		return "1 card waiting"
	}
	return fmt.Sprintf("%d cards waiting", n)
}

func (t *tray) workerItem(w supervisor.Status, a supervisor.Activity) item {
	u := t.u
	items := []item{{label: "State: " + string(w.State), disabled: true}}
	if w.LastError != "" {
		items = append(items, item{label: "Last error: " + approvals.OneLine(w.LastError, labelBytes), disabled: true})
	}
	name := w.Name
	items = append(items, item{label: "New task…", action: func() { u.panel.open(wire.Show{Task: name}) }})
	act := func(what string, op func(string) error) func() {
		return func() {
			if err := u.workerAction(what, name, op); err != nil {
				u.say("Cannot "+what+" "+name, err.Error())
			}
		}
	}
	if w.State == supervisor.StatePaused {
		items = append(items, item{label: "Resume", action: act("resume", u.b.Resume)})
	} else {
		items = append(items, item{label: "Pause", action: act("pause", u.b.Pause)})
	}
	items = append(items, item{label: "Restart", action: act("restart", u.b.Restart)})
	return item{label: wire.WorkerLine(w, a), sub: items}
}
