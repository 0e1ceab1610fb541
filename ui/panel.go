package ui

import (
	"fmt"
	"slices"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"

	"codexgate/approvals"
)

// panel is the window that shows one card whole, a list of the others, and
// the buttons of exactly the decisions the card allows. It belongs to Fyne's
// goroutine.
type panel struct {
	u   *UI
	win fyne.Window

	cards   []approvals.Card
	current approvals.Card // the card shown; ID "" when none
	// shownAt is when the current revision was put on screen: allowing is
	// held back for the settle delay, so that a click meant for a card that
	// just closed cannot land on the one that replaced it.
	shownAt time.Time

	list    *widget.List
	header  *widget.Label
	grid    *widget.TextGrid
	showAll *widget.Button
	form    *fyne.Container
	buttons *fyne.Container
	status  *widget.Label
	bottom  *fyne.Container // holds form, Show all, buttons and status: re-laid out on each render
	inputs  map[string]func() string
	allow   []*widget.Button // buttons that let something happen
	actions map[approvals.Decision]func()
}

func newPanel(u *UI) *panel {
	p := &panel{u: u, win: u.app.NewWindow("Codexgate")}
	p.win.SetIcon(AppIcon)
	p.list = widget.NewList(
		func() int { return len(p.cards) },
		func() fyne.CanvasObject { return widget.NewLabel("") },
		func(i widget.ListItemID, o fyne.CanvasObject) { o.(*widget.Label).SetText(CardLabel(p.cards[i])) },
	)
	p.list.OnSelected = func(i widget.ListItemID) {
		if i < len(p.cards) && p.cards[i].ID != p.current.ID {
			p.render(p.cards[i])
		}
	}
	p.header = widget.NewLabel("")
	p.header.TextStyle.Bold = true
	p.grid = widget.NewTextGrid()
	p.showAll = widget.NewButton("Show all", p.openFull)
	p.form = container.NewVBox()
	p.buttons = container.NewHBox()
	p.status = widget.NewLabel("")
	p.status.Wrapping = fyne.TextWrapWord
	p.bottom = container.NewVBox(p.form, container.NewHBox(p.showAll), p.buttons, p.status)
	// The grid scrolls inside a container of its own, which clips it.
	p.grid.Scroll = fyne.ScrollNone
	body := container.NewBorder(container.NewVBox(p.header), p.bottom, nil, nil, container.NewScroll(p.grid))
	split := container.NewHSplit(p.list, body)
	split.Offset = 0.28
	p.win.SetContent(split)
	p.win.Resize(fyne.NewSize(980, 620))
	p.shortcuts()
	p.win.SetCloseIntercept(func() { p.win.Hide() })
	return p
}

// shortcuts binds Alt+A allow, Alt+S allow for session, Alt+D deny, Alt+X
// deny and stop: the same as the buttons, and only when they are enabled.
func (p *panel) shortcuts() {
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
}

// update shows new cards: the current card stays unless it closed, then the
// oldest is shown.
func (p *panel) update(cards []approvals.Card) {
	p.cards = cards
	p.list.Refresh()
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

// show puts the card id on screen.
func (p *panel) show(id string) {
	if i := slices.IndexFunc(p.cards, func(c approvals.Card) bool { return c.ID == id }); i >= 0 {
		p.render(p.cards[i])
		p.list.Select(i)
	}
}

// render shows c: its body, what was left out, its form and its buttons.
func (p *panel) render(c approvals.Card) {
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
	if c.ID == "" {
		p.header.SetText("No cards waiting")
		p.grid.Rows = nil
		p.grid.Refresh()
		p.showAll.Hide()
		return
	}
	p.header.SetText(fmt.Sprintf("%s · %s · revision %d", c.ID, c.Kind, c.Revision))
	p.grid.Rows = gridRows(c.Body, truncationNotice(c))
	p.grid.Refresh()
	if c.Truncated {
		p.showAll.Show()
	} else {
		p.showAll.Hide()
	}
	p.buildForm(c)
	for _, d := range c.Decisions {
		btn := widget.NewButton(buttonLabel(c, d), nil)
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
func (p *panel) holdAllow() {
	c := p.current
	wait := time.Until(p.shownAt.Add(p.u.opts.SettleDelay))
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

// buttonLabel names a decision: what it does, and what it grants.
func buttonLabel(c approvals.Card, d approvals.Decision) string { return c.DecisionLabel(d) }

// buildForm adds the inputs of a question or elicitation card.
func (p *panel) buildForm(c approvals.Card) {
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
func (p *panel) answer(c approvals.Card, d approvals.Decision) {
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
	a := approvals.Answer{Card: c.ID, Decision: d, Revision: c.Revision, By: approvals.ByPanel, Values: values}
	go func() {
		sent, err := p.u.b.Answer(a)
		fyne.Do(func() {
			if err != nil {
				p.status.SetText("Not sent: " + err.Error())
				return
			}
			p.status.SetText(fmt.Sprintf("Sent %s to %s.", sent.Decision, sent.Card.ID))
			p.u.Changed()
		})
	}()
}

// openFull shows every byte of the current card in its own scrollable
// view, and records that it was shown, which lets it be allowed.
func (p *panel) openFull() {
	c := p.current
	full, card, err := p.u.b.Full(c.ID)
	if err != nil || card.Revision != c.Revision {
		p.status.SetText("The card changed or closed; nothing to show.")
		return
	}
	w := p.u.app.NewWindow(fmt.Sprintf("%s · revision %d · all %d bytes", c.ID, c.Revision, len(full)))
	grid := widget.NewTextGrid()
	grid.Rows = gridRows(full, "")
	grid.Scroll = fyne.ScrollNone
	w.SetContent(container.NewScroll(grid))
	w.Resize(fyne.NewSize(980, 700))
	w.Show()
	if err := p.u.b.MarkShownInFull(c.ID, c.Revision, approvals.ByPanel); err != nil {
		p.status.SetText(err.Error())
		return
	}
	p.u.Changed()
}
