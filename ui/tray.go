package ui

import (
	"context"
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"
	"github.com/godbus/dbus/v5"

	"codexgate/approvals"
	"codexgate/assets"
	"codexgate/supervisor"
)

var (
	iconIdle    = fyne.NewStaticResource("tray-idle.png", assets.TrayIdle)
	iconWorking = fyne.NewStaticResource("tray-working.png", assets.TrayWorking)
	iconWaiting = fyne.NewStaticResource("tray-waiting.png", assets.TrayWaiting)
	// AppIcon is the icon of the app and its windows.
	AppIcon = fyne.NewStaticResource("Icon.png", assets.AppIcon)
)

// tray is the menu-bar icon and menu. It belongs to Fyne's goroutine.
type tray struct {
	u    *UI
	desk desktop.App // nil without a tray
	icon fyne.Resource
}

func newTray(u *UI) *tray {
	t := &tray{u: u}
	desk, ok := u.app.(desktop.App)
	if !ok {
		return t
	}
	t.desk = desk
	if !trayHostAvailable() {
		u.opts.Log.Warn("no system tray host (StatusNotifierWatcher) on the session bus: use the panel (codexgate panel) and the hotkeys")
		u.say("Codexgate has no tray here", "No system tray was found. Open the panel with `codexgate panel`; the hotkeys still work.")
	}
	desk.SetSystemTrayIcon(iconIdle)
	desk.SetSystemTrayMenu(t.menu(snapshot{}))
	return t
}

// trayHostAvailable reports whether a StatusNotifierItem host is there to
// show the icon.
func trayHostAvailable() bool {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return false
	}
	defer conn.Close()
	var has bool
	err = conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, "org.kde.StatusNotifierWatcher").Store(&has)
	return err == nil && has
}

func (t *tray) update(s snapshot) {
	if t.desk == nil {
		return
	}
	icon := iconIdle
	for _, w := range s.workers {
		if w.State == supervisor.StateWorking || w.State == supervisor.StateWaiting {
			icon = iconWorking
		}
	}
	if len(s.cards) > 0 {
		icon = iconWaiting
	}
	if icon != t.icon {
		t.desk.SetSystemTrayIcon(icon)
		t.icon = icon
	}
	t.desk.SetSystemTrayMenu(t.menu(s))
}

// menu is the tray menu of s. Fyne adds Quit itself.
func (t *tray) menu(s snapshot) *fyne.Menu {
	header := fyne.NewMenuItem(cardCount(len(s.cards)), nil)
	header.Disabled = true
	items := []*fyne.MenuItem{header}
	for _, c := range s.cards {
		id := c.ID
		items = append(items, fyne.NewMenuItem(CardLabel(c), func() { t.u.ShowPanel(id) }))
	}
	items = append(items, fyne.NewMenuItemSeparator())
	for _, w := range s.workers {
		items = append(items, t.workerItem(w))
	}
	items = append(items, fyne.NewMenuItemSeparator(), fyne.NewMenuItem("Open panel", func() { t.u.ShowPanel("") }))
	return fyne.NewMenu("Codexgate", items...)
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

// CardLabel is a card in one short escaped line: worker, kind, and the first
// line of the command or the file names.
func CardLabel(c approvals.Card) string {
	return c.Worker + " · " + string(c.Kind) + ": " + c.Summary(labelBytes)
}

func (t *tray) workerItem(w supervisor.Status) *fyne.MenuItem {
	state := fyne.NewMenuItem("State: "+string(w.State), nil)
	state.Disabled = true
	items := []*fyne.MenuItem{state}
	if w.LastError != "" {
		last := fyne.NewMenuItem("Last error: "+approvals.FirstLine(approvals.Escape(w.LastError, false), labelBytes), nil)
		last.Disabled = true
		items = append(items, last)
	}
	name := w.Name
	items = append(items, fyne.NewMenuItem("New task…", func() { t.u.newTask(name) }))
	if w.State == supervisor.StatePaused {
		items = append(items, fyne.NewMenuItem("Resume", func() { t.u.workerAction("resume", name, t.u.b.Resume) }))
	} else {
		items = append(items, fyne.NewMenuItem("Pause", func() { t.u.workerAction("pause", name, t.u.b.Pause) }))
	}
	items = append(items, fyne.NewMenuItem("Restart", func() { t.u.workerAction("restart", name, t.u.b.Restart) }))
	item := fyne.NewMenuItem(w.Name+" — "+string(w.State), nil)
	item.ChildMenu = fyne.NewMenu(w.Name, items...)
	return item
}

func (u *UI) workerAction(what, worker string, act func(string) error) {
	go func() {
		if err := act(worker); err != nil {
			u.opts.Log.Warn(what+" worker", "worker", worker, "err", err)
			u.say("Cannot "+what+" "+worker, err.Error())
		}
		u.Changed()
	}()
}

// newTask asks for a prompt and starts a turn with it.
func (u *UI) newTask(worker string) {
	w := u.app.NewWindow("New task for " + worker)
	w.SetIcon(AppIcon)
	prompt := widget.NewMultiLineEntry()
	prompt.SetPlaceHolder("What should " + worker + " do?")
	status := widget.NewLabel("")
	var start *widget.Button
	start = widget.NewButton("Start", func() {
		text := prompt.Text
		if text == "" {
			status.SetText("Write a task first.")
			return
		}
		start.Disable()
		go func() {
			turn, err := u.b.StartTask(context.Background(), worker, text)
			fyne.Do(func() {
				if err != nil {
					status.SetText(err.Error())
					start.Enable()
					return
				}
				u.opts.Log.Info("task started", "worker", worker, "turn", turn)
				w.Close()
			})
		}()
	})
	w.SetContent(widget.NewForm(
		widget.NewFormItem("Task", prompt),
		widget.NewFormItem("", start),
		widget.NewFormItem("", status),
	))
	w.Resize(fyne.NewSize(480, 220))
	w.Show()
}
