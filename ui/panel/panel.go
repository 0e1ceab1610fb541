// Package panel is Codexgate's window: the open cards, oldest first, one of
// them shown whole in a wrapped monospaced view with exactly the decisions
// it allows, the question and permission forms, Show all, and each worker
// with New task, Pause or Resume, and Restart. It runs in a process of its
// own (cmd/codexgate-panel), which talks to Codexgate through a Backend; it
// decides nothing itself.
//
// Everything here belongs to Fyne's goroutine: callers from elsewhere go
// through fyne.Do. Calls to the Backend run on goroutines of their own and
// post their outcome back with fyne.Do.
package panel

import (
	"fmt"
	"image"
	"slices"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/widget"

	"codexgate/approvals"
	"codexgate/assets"
	"codexgate/supervisor"
	"codexgate/ui/panel/wire"
)

// AppIcon is the icon of the app and its windows.
var AppIcon = fyne.NewStaticResource("Icon.png", assets.AppIcon)

// Backend is what the panel asks of Codexgate. Its methods block; each
// refusal is an error that says why.
type Backend interface {
	// Answer sends d for the card at the revision on screen.
	Answer(card string, revision int, d approvals.Decision, values map[string]string) (string, error)
	// Full is the whole text of the card at revision.
	Full(card string, revision int) (string, approvals.Card, error)
	// Shown reports that the whole text of the card at revision is on screen.
	Shown(card string, revision int) error
	StartTask(worker, prompt string) (string, error)
	// Worker pauses, resumes or restarts a worker (wire.OpPause, ...).
	Worker(op, worker string) error
	// Ready reports that the window's first frame was painted.
	Ready()
}

const labelBytes = 80

// Panel is the window.
type Panel struct {
	app fyne.App
	b   Backend
	win fyne.Window
	// background runs a call to codexgate off Fyne's goroutine, which a
	// slow channel must not hold up. Tests run it in place.
	background func(func())

	settle  time.Duration
	cards   []approvals.Card
	workers []supervisor.Status
	current approvals.Card // the card shown; ID "" when none
	// shownAt is when the current revision was put on screen: allowing is
	// held back for the settle delay, so that a click meant for a card that
	// just closed cannot land on the one that replaced it.
	shownAt time.Time

	list    *widget.List
	header  *widget.Label
	body    *wrapped
	showAll *widget.Button
	form    *fyne.Container
	buttons *fyne.Container
	status  *widget.Label
	people  *fyne.Container // a row per worker
	cardBox fyne.CanvasObject
	// activity shows what each worker is doing while no card is open.
	activity *activityView
	act      []supervisor.Activity
	inputs   map[string]func() string
	allow    []*widget.Button // buttons that let something happen
	actions  map[approvals.Decision]func()
	tasks    map[string]fyne.Window // open New task windows by worker
}

// New builds the panel's window on app; Show puts it on screen.
func New(app fyne.App, b Backend) *Panel {
	p := &Panel{app: app, b: b, win: app.NewWindow("Codexgate"), tasks: map[string]fyne.Window{}, background: func(f func()) { go f() }}
	p.win.SetIcon(AppIcon)
	p.win.SetMaster() // closing it ends the panel
	p.list = widget.NewList(
		func() int { return len(p.cards) },
		func() fyne.CanvasObject {
			l := widget.NewLabel("")
			l.Truncation = fyne.TextTruncateEllipsis // a long command is cut with a mark, not at the split
			return l
		},
		func(i widget.ListItemID, o fyne.CanvasObject) { o.(*widget.Label).SetText(wire.CardLabel(p.cards[i])) },
	)
	p.list.OnSelected = func(i widget.ListItemID) {
		if i < len(p.cards) && p.cards[i].ID != p.current.ID {
			p.render(p.cards[i])
		}
	}
	p.header = widget.NewLabel("")
	p.header.TextStyle.Bold = true
	p.body = newWrapped()
	p.showAll = widget.NewButton("Show all", p.openFull)
	p.form = container.NewVBox()
	// The decisions wrap onto more rows: a label past the window's edge
	// would not be read.
	p.buttons = container.New(layout.NewRowWrapLayout())
	p.status = widget.NewLabel("")
	p.status.Wrapping = fyne.TextWrapWord
	p.people = container.NewVBox()
	bottom := container.NewVBox(p.form, container.NewHBox(p.showAll), p.buttons, p.status)
	p.cardBox = container.NewBorder(container.NewVBox(p.header), bottom, nil, nil, p.body.box)
	p.activity = newActivityView(p)
	left := container.NewBorder(nil, p.people, nil, nil, p.list)
	split := container.NewHSplit(left, container.NewStack(p.cardBox, p.activity.scroll))
	split.Offset = 0.28
	p.win.SetContent(container.NewStack(split, newFrameProbe(b.Ready)))
	p.win.Resize(fyne.NewSize(980, 620))
	p.shortcuts()
	p.render(approvals.Card{})
	return p
}

// Window is the panel's window.
func (p *Panel) Window() fyne.Window { return p.win }

// newFrameProbe is an invisible pixel whose content is made when the
// window's first frame is painted; it calls painted then, once.
func newFrameProbe(painted func()) fyne.CanvasObject {
	var once sync.Once
	probe := canvas.NewRaster(func(w, h int) image.Image {
		once.Do(func() { go painted() })
		return image.NewNRGBA(image.Rect(0, 0, 1, 1)) // one transparent pixel
	})
	probe.Resize(fyne.NewSize(1, 1))
	return container.NewWithoutLayout(probe) // at the corner, drawn with the rest
}

// shortcuts binds Alt+A allow, Alt+S allow for session, Alt+D deny, Alt+X
// deny and stop: the same as the buttons, and only when they are enabled.
// Ctrl+W closes the panel.
func (p *Panel) shortcuts() {
	for key, d := range map[fyne.KeyName]approvals.Decision{
		fyne.KeyA: approvals.DecisionAllow, fyne.KeyS: approvals.DecisionAllowSession,
		fyne.KeyD: approvals.DecisionDeny, fyne.KeyX: approvals.DecisionStop,
	} {
		p.win.Canvas().AddShortcut(&desktop.CustomShortcut{KeyName: key, Modifier: fyne.KeyModifierAlt}, func(fyne.Shortcut) {
			if act := p.actions[d]; act != nil {
				act()
			}
		})
	}
	closeOnCtrlW(p.win)
}

// closeOnCtrlW lets Ctrl+W close w, as it closes the panel.
func closeOnCtrlW(w fyne.Window) {
	w.Canvas().AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyW, Modifier: fyne.KeyModifierControl}, func(fyne.Shortcut) {
		w.Close()
	})
}

// Update shows a new state: the current card stays unless it closed, then
// the oldest is shown.
func (p *Panel) Update(s wire.State) {
	p.settle = s.SettleDelay
	p.cards = s.Cards
	workersChanged := !slices.Equal(p.workers, s.Workers)
	actChanged := !slices.EqualFunc(p.act, s.Activity, func(a, b supervisor.Activity) bool { return a.Worker == b.Worker && a.Seq == b.Seq })
	p.workers, p.act = s.Workers, s.Activity
	if workersChanged || actChanged {
		p.showWorkers()
	}
	p.activity.update(s.Workers, s.Activity, workersChanged)
	p.list.Refresh()
	cards := s.Cards
	i := slices.IndexFunc(cards, func(c approvals.Card) bool { return c.ID == p.current.ID })
	switch {
	case i >= 0 && (cards[i].Revision != p.current.Revision || cards[i].ShownInFull != p.current.ShownInFull):
		p.render(cards[i])
	case i >= 0:
	case len(cards) > 0:
		p.render(cards[0])
	default:
		p.render(approvals.Card{})
	}
	if i := slices.IndexFunc(cards, func(c approvals.Card) bool { return c.ID == p.current.ID }); i >= 0 {
		p.list.Select(i)
	}
}

// Show brings the window to the front, at a card or with a New task form.
func (p *Panel) Show(s wire.Show) {
	if s.Card != "" {
		if i := slices.IndexFunc(p.cards, func(c approvals.Card) bool { return c.ID == s.Card }); i >= 0 {
			p.render(p.cards[i])
			p.list.Select(i)
		}
	}
	p.win.Show()
	p.win.RequestFocus()
	if s.Task != "" {
		p.newTask(s.Task)
	}
}

// render shows c: its body, what was left out, its form and its buttons.
func (p *Panel) render(c approvals.Card) {
	changed := c.ID != p.current.ID || c.Revision != p.current.Revision
	p.current = c
	if changed {
		p.shownAt = time.Now()
		p.status.SetText("")
	}
	p.form.RemoveAll()
	p.buttons.RemoveAll()
	p.allow, p.actions, p.inputs = nil, map[approvals.Decision]func(){}, map[string]func() string{}
	defer p.win.Content().Refresh() // the bottom's height follows its new contents
	if c.ID == "" {                 // cards come first; with none, the activity
		p.cardBox.Hide()
		p.activity.scroll.Show()
		p.header.SetText("No cards waiting")
		p.body.setRows(nil, nil)
		p.showAll.Hide()
		return
	}
	p.activity.scroll.Hide()
	p.cardBox.Show()
	p.header.SetText(fmt.Sprintf("%s · %s · revision %d", c.ID, c.Kind, c.Revision))
	// A card that is not truncated is reported shown in full once its last
	// row has been in view, not when it is put in a view that scrolls.
	var seen func()
	if !c.Truncated && !c.ShownInFull {
		seen = func() { p.reportShown(c) }
	}
	if changed || seen == nil {
		p.body.setRows(gridRows(c.Body, truncationNotice(c)), seen)
	}
	if c.Truncated {
		p.showAll.Show()
	} else {
		p.showAll.Hide()
	}
	p.buildForm(c)
	for _, d := range c.Decisions {
		// A label as long as its rule would widen the window past the
		// screen, and the card's own text with it; the rule is in the card whole.
		btn := widget.NewButton(approvals.FirstLine(c.DecisionLabel(d), labelBytes), nil)
		act := func() { p.answer(c, d) }
		btn.OnTapped = act
		p.actions[d] = func() {
			if !btn.Disabled() {
				act()
			}
		}
		if d.Allows() {
			btn.Importance = widget.HighImportance
			p.allow = append(p.allow, btn)
		} else {
			btn.Importance = widget.DangerImportance
		}
		p.buttons.Add(btn)
	}
	p.holdAllow()
}

// holdAllow disables the buttons that let something happen until the card
// is settled and, if truncated, shown in full.
func (p *Panel) holdAllow() {
	c := p.current
	wait := time.Until(p.shownAt.Add(p.settle))
	blocked := c.Truncated && !c.ShownInFull
	for _, b := range p.allow {
		if blocked || wait > 0 {
			b.Disable()
		} else {
			b.Enable()
		}
	}
	if blocked {
		p.status.SetText("This card is too long to show here. Use Show all to see every byte before allowing it.")
	}
	if wait > 0 && !blocked {
		id, rev := c.ID, c.Revision
		time.AfterFunc(wait, func() {
			fyne.Do(func() {
				if p.current.ID == id && p.current.Revision == rev {
					p.holdAllow()
				}
			})
		})
	}
}

func truncationNotice(c approvals.Card) string {
	if !c.Truncated {
		return ""
	}
	return fmt.Sprintf("… %d more bytes are not shown here: use Show all.", max(c.FullBytes-len(c.Body), 0))
}

// buildForm adds the inputs of a question or elicitation card.
func (p *Panel) buildForm(c approvals.Card) {
	for _, f := range c.Fields {
		var input fyne.CanvasObject
		var value func() string
		switch {
		case f.Type == "boolean":
			check := widget.NewCheck("", nil)
			input, value = check, func() string { return fmt.Sprint(check.Checked) }
		case len(f.Options) > 0 && f.Other:
			sel := widget.NewSelectEntry(f.Options)
			input, value = sel, func() string { return sel.Text }
		case len(f.Options) > 0:
			sel := widget.NewSelect(f.Options, nil)
			input, value = sel, func() string { return sel.Selected }
		case f.Secret:
			e := widget.NewPasswordEntry()
			input, value = e, func() string { return e.Text }
		default:
			e := widget.NewEntry()
			input, value = e, func() string { return e.Text }
		}
		p.inputs[f.Name] = value
		label := f.Label
		if f.Required {
			label += " *"
		}
		p.form.Add(widget.NewForm(widget.NewFormItem(approvals.FirstLine(label, labelBytes), input)))
	}
}

// answer sends d for the revision of c that is on screen.
func (p *Panel) answer(c approvals.Card, d approvals.Decision) {
	if c.ID != p.current.ID || c.Revision != p.current.Revision {
		p.status.SetText("The card changed before the click; nothing was sent. Look at it again.")
		return
	}
	values := map[string]string{}
	for name, v := range p.inputs {
		if s := v(); s != "" {
			values[name] = s
		}
	}
	p.background(func() {
		sent, err := p.b.Answer(c.ID, c.Revision, d, values)
		fyne.Do(func() {
			if err != nil {
				p.status.SetText("Not sent: " + err.Error())
				return
			}
			p.status.SetText(sent)
		})
	})
}

// openFull shows every byte of the current card in a window of its own,
// then, once its end has been in view, reports it shown, which lets it be
// allowed.
func (p *Panel) openFull() {
	c := p.current
	p.background(func() {
		full, card, err := p.b.Full(c.ID, c.Revision)
		fyne.Do(func() {
			if err != nil || card.Revision != c.Revision {
				p.status.SetText("The card changed or closed; nothing to show.")
				return
			}
			w := p.app.NewWindow(fmt.Sprintf("%s · revision %d · all %d bytes", c.ID, c.Revision, len(full)))
			w.SetIcon(AppIcon)
			closeOnCtrlW(w)
			view := newWrapped()
			w.SetContent(view.box)
			w.Resize(fyne.NewSize(980, 700))
			// As in the card view: shown in full once its last row has
			// been in view, not when the window opens.
			view.setRows(gridRows(full, ""), func() { p.reportShown(c) })
			w.Show()
		})
	})
}

// reportShown tells codexgate that the whole text of c has been on screen,
// its last row in view: in the card view, or in Show all for a truncated
// card.
func (p *Panel) reportShown(c approvals.Card) {
	p.background(func() {
		if err := p.b.Shown(c.ID, c.Revision); err != nil {
			fyne.Do(func() { p.status.SetText(err.Error()) })
		}
	})
}

// showWorkers lays out a row per worker: its state and what it is doing,
// New task, Pause or Resume, and Restart.
func (p *Panel) showWorkers() {
	p.people.RemoveAll()
	for _, w := range p.workers {
		name := w.Name
		state := widget.NewLabel(wire.WorkerLine(w, wire.ActivityOf(p.act, name)))
		if w.LastError != "" {
			state.SetText(state.Text + ": " + approvals.OneLine(w.LastError, labelBytes))
		}
		state.Truncation = fyne.TextTruncateEllipsis
		pause := widget.NewButton("Pause", func() { p.workerOp(wire.OpPause, name) })
		if w.State == supervisor.StatePaused {
			pause = widget.NewButton("Resume", func() { p.workerOp(wire.OpResume, name) })
		}
		p.people.Add(state)
		p.people.Add(container.NewHBox(
			widget.NewButton("New task…", func() { p.newTask(name) }),
			pause,
			widget.NewButton("Restart", func() { p.workerOp(wire.OpRestart, name) }),
		))
	}
}

func (p *Panel) workerOp(op, worker string) {
	p.background(func() {
		if err := p.b.Worker(op, worker); err != nil {
			fyne.Do(func() { p.status.SetText(fmt.Sprintf("Cannot %s %s: %v", op, worker, err)) })
		}
	})
}

// newTask asks for a prompt and starts a turn with it.
func (p *Panel) newTask(worker string) {
	if w := p.tasks[worker]; w != nil {
		w.RequestFocus()
		return
	}
	w := p.app.NewWindow("New task for " + worker)
	p.tasks[worker] = w
	w.SetOnClosed(func() { delete(p.tasks, worker) })
	w.SetIcon(AppIcon)
	prompt := widget.NewMultiLineEntry()
	prompt.SetPlaceHolder("What should " + worker + " do?")
	status := widget.NewLabel("")
	var start *widget.Button
	start = widget.NewButton("Start", func() {
		text := prompt.Text
		if strings.TrimSpace(text) == "" {
			status.SetText("Write a task first.")
			return
		}
		start.Disable()
		p.background(func() {
			_, err := p.b.StartTask(worker, text)
			fyne.Do(func() {
				if err != nil {
					status.SetText(err.Error())
					start.Enable()
					return
				}
				w.Close()
			})
		})
	})
	w.SetContent(widget.NewForm(
		widget.NewFormItem("Task", prompt),
		widget.NewFormItem("", start),
		widget.NewFormItem("", status),
	))
	w.Resize(fyne.NewSize(480, 220))
	w.Show()
	w.Canvas().Focus(prompt)
}
