// Package ui is what a person sees and touches in the long-lived process:
// the tray icon and menu, one notification per card, the global hotkeys,
// and the panel, which is a process of its own (cmd/codexgate-panel, see
// ui/panel) started on demand. It renders what approvals gives it and sends
// answers back; it decides nothing itself. It links no Fyne and no OpenGL:
// nothing here wakes while nothing happens.
//
// Run is the one goroutine that snapshots the state, after a change was
// pushed (cards from approvals, worker statuses from the supervisor), and
// shows it in the tray and the panel, at most every refreshGap.
package ui

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"codexgate/approvals"
	"codexgate/supervisor"
	"codexgate/ui/notify"
	"codexgate/ui/panel/wire"
)

// Backend is what the UI asks of the rest of the app.
type Backend interface {
	Cards() []approvals.Card
	Full(id string) (string, approvals.Card, error)
	MarkShownInFull(id string, revision int, by approvals.By) error
	Answer(approvals.Answer) (approvals.Answered, error)
	Workers() []supervisor.Status
	Activity() []supervisor.Activity
	// SettleDelay is how long a card waits in the panel before it can be
	// allowed.
	SettleDelay() time.Duration
	StartTask(ctx context.Context, worker, prompt string) (string, error)
	Pause(worker string) error
	Resume(worker string) error
	Restart(worker string) error
}

// Hotkeys is the global hotkey manager as the UI drives it.
type Hotkeys interface {
	Want(on bool)
	// Triggers are the keys that answer, by name ("allow", "deny"), as
	// their holder (the X server, or the desktop's portal) assigned them.
	Triggers() map[string]string
}

// Options configure the UI.
type Options struct {
	Notifier *notify.Notifier
	Hotkeys  Hotkeys
	Log      *slog.Logger
	// Panel is the panel binary; "" for codexgate-panel beside this one.
	Panel string
}

const (
	refreshGap  = 50 * time.Millisecond
	labelBytes  = 80
	hotkeyAllow = "allow"
	hotkeyDeny  = "deny"
)

// UI is the desktop front of Codexgate.
type UI struct {
	ctx  context.Context // the app's lifetime
	b    Backend
	opts Options

	changed chan struct{}  // 1-buffered: the state changed, redraw
	opening sync.WaitGroup // panels opened by OpenPanelSoon, waited for by Run
	tray    *tray
	panel   *panelHost
}

// New builds the UI of an app that lives until ctx ends; Run makes it live.
func New(ctx context.Context, b Backend, opts Options) *UI {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Panel == "" {
		opts.Panel = panelPath()
	}
	u := &UI{ctx: ctx, b: b, opts: opts, changed: make(chan struct{}, 1)}
	u.tray = &tray{u: u}
	u.panel = &panelHost{u: u, path: opts.Panel}
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

// OnStatus is the supervisor's OnStatus hook.
func (u *UI) OnStatus(supervisor.Status) { u.Changed() }

// OnActivity is the supervisor's OnActivity hook.
func (u *UI) OnActivity(supervisor.Activity) { u.Changed() }

// snapshot is the state one redraw shows.
type snapshot struct {
	cards    []approvals.Card
	workers  []supervisor.Status
	activity []supervisor.Activity // each worker's, in the order of workers
	settle   time.Duration
	// panelFailure says why the panel could not start; "" when it could.
	panelFailure string
}

func (s snapshot) equal(o snapshot) bool {
	return slices.EqualFunc(s.cards, o.cards, func(a, b approvals.Card) bool {
		return a.ID == b.ID && a.Revision == b.Revision && a.ShownInFull == b.ShownInFull
	}) && slices.Equal(s.workers, o.workers) && s.settle == o.settle && s.panelFailure == o.panelFailure &&
		slices.EqualFunc(s.activity, o.activity, func(a, b supervisor.Activity) bool { return a.Worker == b.Worker && a.Seq == b.Seq })
}

func (s snapshot) state() wire.State {
	return wire.State{Cards: s.cards, Workers: s.workers, Activity: s.activity, SettleDelay: s.settle}
}

func (u *UI) snapshot() snapshot {
	return snapshot{
		cards: u.b.Cards(), workers: u.b.Workers(), activity: u.b.Activity(),
		settle: u.b.SettleDelay(), panelFailure: u.panel.failure(),
	}
}

// Run shows the tray, and redraws it and the panel after each change, until
// ctx ends; the tray's Quit calls quit. Then it closes the panel.
func (u *UI) Run(ctx context.Context, quit func()) {
	u.tray.start(quit)
	defer u.tray.stop()
	defer u.opening.Wait() // after the panel closed, which ends an opening too
	defer u.panel.close()
	u.Changed()
	var last snapshot
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.changed:
		}
		s := u.snapshot()
		if u.opts.Hotkeys != nil {
			u.opts.Hotkeys.Want(len(s.cards) > 0)
		}
		if !first && s.equal(last) {
			continue
		}
		first, last = false, s
		u.tray.update(s)
		u.panel.push(s)
		select { // coalesce bursts
		case <-ctx.Done():
			return
		case <-time.After(refreshGap):
		}
	}
}

// OpenPanelSoon opens the panel as OpenPanel does, without waiting for it:
// for callers that must not block (a notification's Open). Its failure is
// shown in the tray and a notification.
func (u *UI) OpenPanelSoon(cardID string) {
	u.opening.Go(func() { u.OpenPanel(cardID) })
}

// OpenPanel starts the panel, or brings it to the front, at a card ("":
// where it is). It returns once the panel has painted its window, or why it
// could not; a failure is also shown in the tray and a notification.
func (u *UI) OpenPanel(cardID string) error {
	return u.panel.open(wire.Show{Card: cardID})
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

func (u *UI) workerAction(what, worker string, act func(string) error) error {
	if err := act(worker); err != nil {
		u.opts.Log.Warn(what+" worker", "worker", worker, "err", err)
		return err
	}
	u.Changed()
	return nil
}
