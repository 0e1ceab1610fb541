// Package ui is what a person sees and touches: the tray icon and menu, the
// capped <pre>-style panel, one notification per card and the global
// hotkeys. It renders what approvals gives it and sends answers back; it
// decides nothing itself.
//
// Fyne widgets belong to Fyne's goroutine: everything that touches them runs
// inside fyne.Do. Run is the one goroutine that snapshots the state and
// posts it there, at most every refreshGap.
package ui

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"fyne.io/fyne/v2"

	"codexgate/approvals"
	"codexgate/supervisor"
	"codexgate/ui/notify"
)

// Backend is what the UI asks of the rest of the app.
type Backend interface {
	Cards() []approvals.Card
	Full(id string) (string, approvals.Card, error)
	MarkShownInFull(id string, revision int, by approvals.By) error
	Answer(approvals.Answer) (approvals.Answered, error)
	Workers() []supervisor.Status
	StartTask(ctx context.Context, worker, prompt string) (string, error)
	Pause(worker string) error
	Resume(worker string) error
	Restart(worker string) error
}

// Hotkeys is the global hotkey manager as the UI drives it.
type Hotkeys interface {
	Want(on bool)
}

// Options configure the UI.
type Options struct {
	SettleDelay time.Duration
	Notifier    *notify.Notifier
	Hotkeys     Hotkeys
	Log         *slog.Logger
}

const (
	refreshGap  = 50 * time.Millisecond
	statusPoll  = time.Second
	labelBytes  = 80
	hotkeyAllow = "allow"
	hotkeyDeny  = "deny"
)

// UI is the desktop front of Codexgate.
type UI struct {
	app  fyne.App
	b    Backend
	opts Options

	changed chan struct{} // 1-buffered: the state changed, redraw

	// Owned by Fyne's goroutine.
	tray  *tray
	panel *panel
}

// New builds the UI on app; Run makes it live.
func New(app fyne.App, b Backend, opts Options) *UI {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	u := &UI{app: app, b: b, opts: opts, changed: make(chan struct{}, 1)}
	u.tray = newTray(u)
	return u
}

// Changed reports a change of cards or workers; it never blocks.
func (u *UI) Changed() {
	select {
	case u.changed <- struct{}{}:
	default:
	}
}

// OnCardChange is approvals' OnChange hook.
func (u *UI) OnCardChange(ch approvals.Change) {
	if u.opts.Notifier != nil {
		u.opts.Notifier.Notice(ch)
	}
	u.Changed()
}

// snapshot is the state one redraw shows.
type snapshot struct {
	cards   []approvals.Card
	workers []supervisor.Status
}

// Run redraws on changes, and polls worker states, until ctx ends.
func (u *UI) Run(ctx context.Context) {
	poll := time.NewTicker(statusPoll)
	defer poll.Stop()
	var last snapshot
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.changed:
		case <-poll.C:
		}
		s := snapshot{cards: u.b.Cards(), workers: u.b.Workers()}
		if u.opts.Hotkeys != nil {
			u.opts.Hotkeys.Want(len(s.cards) > 0)
		}
		if s.equal(last) {
			continue
		}
		last = s
		fyne.Do(func() { u.apply(s) })
		select { // coalesce bursts
		case <-ctx.Done():
			return
		case <-time.After(refreshGap):
		}
	}
}

func (s snapshot) equal(o snapshot) bool {
	return slices.EqualFunc(s.cards, o.cards, func(a, b approvals.Card) bool {
		return a.ID == b.ID && a.Revision == b.Revision && a.ShownInFull == b.ShownInFull
	}) && slices.Equal(s.workers, o.workers)
}

// apply shows s; it runs on Fyne's goroutine.
func (u *UI) apply(s snapshot) {
	u.tray.update(s)
	if u.panel != nil {
		u.panel.update(s.cards)
	}
}

// SetSettleDelay changes how long a card shown in the panel waits before it
// can be allowed.
func (u *UI) SetSettleDelay(d time.Duration) {
	fyne.Do(func() { u.opts.SettleDelay = d })
}

// ShowPanel opens the panel at a card ("": the oldest).
func (u *UI) ShowPanel(cardID string) {
	fyne.Do(func() {
		if u.panel == nil {
			u.panel = newPanel(u)
		}
		u.panel.update(u.b.Cards())
		if cardID != "" {
			u.panel.show(cardID)
		}
		u.panel.win.Show()
		u.panel.win.RequestFocus()
	})
}

// Hotkey answers the oldest card for a pressed global hotkey. A refused
// allow is explained in a notification; deny is never delayed.
func (u *UI) Hotkey(name string) {
	cards := u.b.Cards()
	if len(cards) == 0 {
		return
	}
	oldest := cards[0]
	a := approvals.Answer{Card: oldest.ID, Revision: oldest.Revision, By: approvals.ByHotkey}
	switch name {
	case hotkeyAllow:
		a.Decision = approvals.DecisionAllow
	case hotkeyDeny:
		a.Decision = approvals.DecisionDeny
	default:
		return
	}
	sent, err := u.b.Answer(a)
	if err != nil {
		u.opts.Log.Warn("hotkey answer refused", "card", oldest.ID, "err", err)
		u.say("Not answered by hotkey", notify.Refusal(oldest, err))
		return
	}
	u.opts.Log.Info("answered by hotkey", "card", sent.Card.ID, "decision", sent.Decision)
}

func (u *UI) say(title, body string) {
	if u.opts.Notifier != nil {
		u.opts.Notifier.Say(title, body)
	}
}
