// Package notify shows desktop notifications: one per card, with the
// actions Allow, Deny and Open where the server offers actions, replaced
// when the card changes and taken back when it closes; one per request
// declined without asking; one per ended turn. A burst is coalesced into
// one notification that counts it, so a runaway agent cannot flood the
// desktop.
//
// On a session bus with a notification server it speaks
// org.freedesktop.Notifications itself, on a connection of its own; without
// one it falls back to a Sender (beeep). Run is the one goroutine that
// sends, and it alone owns which notification shows which card. The tests
// run a fake server on a private bus (fake_test.go).
package notify

import (
	"context"
	"errors"
	"html"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/godbus/dbus/v5"

	"codexgate/approvals"
	"codexgate/supervisor"
)

// Burst limits: more than BurstSize notifications within BurstWindow are
// held back and summed up in one when the window ends.
const (
	BurstSize   = 3
	BurstWindow = time.Second
)

// Action keys, as the server reports them in ActionInvoked. "default" is
// a click on the notification itself. Allow's key names the revision it
// was offered on, "allow:2": a notification replaced in place keeps its
// id, and a server reports the key of the action the person chose, which
// may have been offered before the card changed (dunst's context menu keeps
// the keys it listed when it opened).
const (
	actionAllow   = "allow:"
	actionDeny    = "deny"
	actionOpen    = "open"
	actionDefault = "default"
)

// Sender shows one notification (beeep.Notify in the app).
type Sender func(title, body string) error

// Queue is the card queue, as a notification answers it.
type Queue interface {
	Answer(approvals.Answer) (approvals.Answered, error)
	MarkShownInFull(id string, revision int, by approvals.By) error
}

// Options configure a Notifier.
type Options struct {
	// Bus is the running session bus's address (sessionbus.Address);
	// empty when there is none. A bus is never started.
	Bus string
	// Queue answers a card from its notification's actions.
	Queue Queue
	// OpenPanel opens the panel at a card ("": the oldest). It must not block.
	OpenPanel func(cardID string)
	// Fallback shows a notification where the bus has no notification server.
	Fallback Sender
	// Turns: a notification for each ended turn.
	Turns bool
	Log   *slog.Logger
}

// Notifier turns card changes and ended turns into notifications.
type Notifier struct {
	opts    Options
	log     *slog.Logger
	turnsOn atomic.Bool
	changes chan approvals.Change
	turns   chan supervisor.TurnEnded
	says    chan note

	// Owned by Run.
	srv       server
	byCard    map[string]*shown
	byID      map[uint32]*shown
	recent    []time.Time // when the notifications of the burst window were shown
	flush     <-chan time.Time
	heldCards []approvals.Change
	heldTurns []supervisor.TurnEnded
}

// shown is a notification on screen that can be answered or taken back.
type shown struct {
	id    uint32
	card  approvals.Card // as the notification shows it; zero for a summary
	allow bool           // the Allow action is offered
	cards map[string]bool
}

// New returns a notifier; Run must be called to send.
func New(opts Options) *Notifier {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	n := &Notifier{
		opts:    opts,
		log:     opts.Log,
		changes: make(chan approvals.Change, 1024),
		turns:   make(chan supervisor.TurnEnded, 64),
		says:    make(chan note, 16),
		byCard:  map[string]*shown{},
		byID:    map[uint32]*shown{},
	}
	n.turnsOn.Store(opts.Turns)
	return n
}

// Notice queues a card change. It never blocks: when the queue is full
// the change is dropped with a warning.
func (n *Notifier) Notice(ch approvals.Change) {
	select {
	case n.changes <- ch:
	default:
		n.log.Warn("notification queue full; a card change is not shown", "card", ch.Card.ID)
	}
}

// TurnEnded queues the notification of an ended turn, unless turn
// notifications are off. It never blocks.
func (n *Notifier) TurnEnded(te supervisor.TurnEnded) {
	if !n.turnsOn.Load() {
		return
	}
	select {
	case n.turns <- te:
	default:
		n.log.Warn("notification queue full; an ended turn is not shown", "worker", te.Worker)
	}
}

// SetTurns turns the notifications of ended turns on or off.
func (n *Notifier) SetTurns(on bool) { n.turnsOn.Store(on) }

// Say shows a notification of the app itself. It never blocks.
func (n *Notifier) Say(title, body string) {
	select {
	case n.says <- note{title: title, body: body}:
	default:
		n.log.Warn("notification queue full", "title", title)
	}
}

// Run sends notifications and follows what is done with them until ctx
// ends.
func (n *Notifier) Run(ctx context.Context) {
	n.srv = n.connect(ctx)
	defer func() { n.srv.close() }()
	sigs := n.srv.signals()
	for {
		select {
		case <-ctx.Done():
			return
		case ch := <-n.changes:
			n.change(ctx, ch)
		case te := <-n.turns:
			n.turn(ctx, te)
		case nt := <-n.says:
			n.send(ctx, nt)
		case sig, ok := <-sigs:
			if !ok {
				sigs = nil
				if ctx.Err() == nil {
					n.log.Warn("lost the connection to the notification server; notifications can no longer be answered")
					n.srv = n.fallback()
					clear(n.byCard)
					clear(n.byID)
				}
				continue
			}
			n.signal(ctx, sig)
		case <-n.flush:
			n.flushHeld(ctx)
		}
	}
}

// connect finds the notification server on the session bus, or falls back.
func (n *Notifier) connect(ctx context.Context) server {
	b, err := dialBus(ctx, n.opts.Bus)
	if err == nil {
		n.log.Info("notifications through the session bus", "actions", b.can("actions"), "markup", b.can("body-markup"))
		return b
	}
	switch {
	case errors.Is(err, errNoBus) && busDesktop():
		n.log.Warn("no session bus: desktop notifications are off")
	case errors.Is(err, errNoBus):
		n.log.Debug("notifications without a session bus")
	default:
		n.log.Info("no notification server on the session bus; notifications cannot be answered", "err", err)
	}
	return n.fallback()
}

// busDesktop reports whether notifications on this system go through a
// session bus.
func busDesktop() bool {
	switch runtime.GOOS {
	case "darwin", "windows", "js", "ios", "android":
		return false
	}
	return true
}

// fallback is the Sender, where it cannot start a bus: beeep reaches for
// the session bus itself, and godbus starts one when none is named.
func (n *Notifier) fallback() server {
	if n.opts.Bus == "" && busDesktop() {
		return fallback{}
	}
	return fallback{send: n.opts.Fallback}
}

// admit reports whether one more notification may be shown now; when not,
// the caller holds it for the summary at the end of the window.
func (n *Notifier) admit() bool {
	now := time.Now()
	n.recent = trim(n.recent, now)
	if len(n.recent) >= BurstSize {
		if n.flush == nil {
			n.flush = time.After(n.recent[0].Add(BurstWindow).Sub(now))
		}
		return false
	}
	n.recent = append(n.recent, now)
	return true
}

func trim(times []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(times) && now.Sub(times[i]) >= BurstWindow {
		i++
	}
	return times[i:]
}

func (n *Notifier) change(ctx context.Context, ch approvals.Change) {
	id := ch.Card.ID
	switch ch.Kind {
	case approvals.CardOpened:
		if !n.admit() {
			n.heldCards = append(n.heldCards, ch)
			return
		}
		n.showCard(ctx, ch.Card, nil)
	case approvals.CardDeclined:
		if !n.admit() {
			n.heldCards = append(n.heldCards, ch)
			return
		}
		title, body := Message(ch)
		n.send(ctx, note{title: title, body: body})
	case approvals.CardUpdated:
		if s := n.byCard[id]; s != nil {
			n.showCard(ctx, ch.Card, s)
		}
	case approvals.CardClosed:
		n.heldCards = slices.DeleteFunc(n.heldCards, func(h approvals.Change) bool {
			return h.Kind == approvals.CardOpened && h.Card.ID == id
		})
		if s := n.byCard[id]; s != nil {
			n.takeBack(ctx, s)
		}
		for _, s := range n.byID {
			if s.cards[id] {
				delete(s.cards, id)
				if len(s.cards) == 0 {
					n.takeBack(ctx, s)
				}
			}
		}
	}
}

// showCard shows a card's notification, or replaces prev with it.
func (n *Notifier) showCard(ctx context.Context, c approvals.Card, prev *shown) {
	title, body := Message(approvals.Change{Kind: approvals.CardOpened, Card: c})
	whole := n.srv.can("body") && holdsWhole(c) && !approvals.RightToLeft(c.Body) && n.srv.showsWholeBody(ctx)
	if whole {
		body = strings.TrimSuffix(c.Body, "\n")
	}
	s := &shown{card: c, allow: whole && n.srv.can("actions") && c.QuickYesOffered()}
	nt := note{title: title, body: body, actions: n.actions(c, s.allow), sticky: true}
	n.replace(ctx, prev, s, nt)
	if whole && s.id != 0 {
		if err := n.opts.Queue.MarkShownInFull(c.ID, c.Revision, approvals.ByNotification); err != nil {
			n.log.Debug("card changed or closed while its notification was shown", "card", c.ID, "err", err)
		}
	}
}

// replace shows nt as s, in place of prev when there is one.
func (n *Notifier) replace(ctx context.Context, prev, s *shown, nt note) {
	if prev != nil {
		nt.replaces = prev.id
	}
	id, err := n.send(ctx, nt)
	if err != nil {
		return
	}
	if prev != nil {
		n.forget(prev)
	}
	if id != 0 {
		s.id = id
		n.byID[id] = s
		if s.card.ID != "" {
			n.byCard[s.card.ID] = s
		}
	}
}

// holdsWhole: the card's whole text fits in a notification's body, as
// the servers show it. They wrap long lines and cut what passes their
// height, silently or with an ellipsis in the middle (dunst's defaults: 300
// pixels wide and high, ellipsize = middle), so the text must fit in a few
// rows of a narrow box, counting wrapped lines, not just in a few lines.
func holdsWhole(c approvals.Card) bool {
	const wholeBytes = 1024
	return !c.Truncated && c.Body != "" && len(c.Body) <= wholeBytes && rows(strings.TrimSuffix(c.Body, "\n")) <= wholeRows
}

// A body is shown whole if it takes at most wholeRows rows of wholeColumns
// columns.
const wholeRows, wholeColumns = 12, 40

// rows is how many rows text takes wrapped at wholeColumns columns,
// counting a tab as 8 columns and any other code point but ASCII as 2 (it
// may be wide).
func rows(text string) int {
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		cols := 0
		for _, r := range line {
			switch {
			case r == '\t':
				cols += 8
			case r < utf8.RuneSelf:
				cols++
			default:
				cols += 2
			}
		}
		n += max(1, (cols+wholeColumns-1)/wholeColumns)
	}
	return n
}

func (n *Notifier) actions(c approvals.Card, allow bool) []string {
	if !n.srv.can("actions") {
		return nil
	}
	var a []string
	if allow {
		a = append(a, actionAllow+strconv.Itoa(c.Revision), c.DecisionLabel(approvals.DecisionAllow))
	}
	if slices.Contains(c.Decisions, approvals.DecisionDeny) {
		a = append(a, actionDeny, c.DecisionLabel(approvals.DecisionDeny))
	}
	return append(a, actionOpen, "Open", actionDefault, "Open")
}

// send shows nt, its texts escaped for markup where the server parses it,
// so that a tag in a command cannot hide the text after it.
func (n *Notifier) send(ctx context.Context, nt note) (uint32, error) {
	if n.srv.can("body-markup") {
		nt.title, nt.body = html.EscapeString(nt.title), html.EscapeString(nt.body)
	}
	id, err := n.srv.show(ctx, nt)
	if err != nil {
		n.log.Warn("notification", "err", err)
	}
	return id, err
}

// takeBack closes a notification whose card closed.
func (n *Notifier) takeBack(ctx context.Context, s *shown) {
	n.forget(s)
	if err := n.srv.takeBack(ctx, s.id); err != nil {
		n.log.Debug("take back a notification", "err", err) // the person may have closed it
	}
}

func (n *Notifier) forget(s *shown) {
	delete(n.byID, s.id)
	if n.byCard[s.card.ID] == s {
		delete(n.byCard, s.card.ID)
	}
}

func (n *Notifier) turn(ctx context.Context, te supervisor.TurnEnded) {
	if !n.admit() {
		n.heldTurns = append(n.heldTurns, te)
		return
	}
	title, body := TurnMessage(te)
	n.send(ctx, note{title: title, body: body})
}

// flushHeld sums up what a burst held back.
func (n *Notifier) flushHeld(ctx context.Context) {
	n.flush = nil
	if len(n.heldCards) > 0 {
		title, body := Summary(n.heldCards)
		s := &shown{cards: map[string]bool{}}
		for _, ch := range n.heldCards {
			if ch.Kind == approvals.CardOpened {
				s.cards[ch.Card.ID] = true
			}
		}
		nt := note{title: title, body: body}
		if len(s.cards) > 0 {
			nt.sticky = true
			if n.srv.can("actions") {
				nt.actions = []string{actionOpen, "Open", actionDefault, "Open"}
			}
		}
		n.replace(ctx, nil, s, nt)
		n.recent = append(trim(n.recent, time.Now()), time.Now())
	}
	if len(n.heldTurns) > 0 {
		title, body := TurnSummary(n.heldTurns)
		n.send(ctx, note{title: title, body: body})
		n.recent = append(trim(n.recent, time.Now()), time.Now())
	}
	n.heldCards, n.heldTurns = nil, nil
}

// signal follows what the person did with a notification.
func (n *Notifier) signal(ctx context.Context, sig *dbus.Signal) {
	ok, changed := n.srv.from(ctx, sig)
	if changed {
		n.log.Warn("the notification server changed; the notifications shown before can no longer be answered")
		clear(n.byCard)
		clear(n.byID)
	}
	if !ok {
		n.log.Warn("ignored a notification signal that the notification server did not send", "sender", sig.Sender, "name", sig.Name)
		return
	}
	switch sig.Name {
	case busInterface + ".ActionInvoked":
		var id uint32
		var key string
		if err := dbus.Store(sig.Body, &id, &key); err != nil {
			n.log.Warn("malformed ActionInvoked", "err", err)
			return
		}
		if s := n.byID[id]; s != nil {
			n.action(ctx, s, key)
		}
	case busInterface + ".NotificationClosed":
		var id, reason uint32
		if err := dbus.Store(sig.Body, &id, &reason); err != nil {
			n.log.Warn("malformed NotificationClosed", "err", err)
			return
		}
		if s := n.byID[id]; s != nil {
			n.forget(s)
		}
	}
}

func (n *Notifier) action(ctx context.Context, s *shown, key string) {
	if rev, ok := strings.CutPrefix(key, actionAllow); ok {
		revision, err := strconv.Atoi(rev)
		if !s.allow || err != nil {
			n.log.Warn("ignored Allow on a notification that does not offer it", "card", s.card.ID, "key", key)
			return
		}
		n.answer(ctx, s, approvals.DecisionAllow, revision)
		return
	}
	switch key {
	case actionDefault, actionOpen:
		if n.opts.OpenPanel != nil {
			n.opts.OpenPanel(s.card.ID)
		}
	case actionDeny:
		if s.card.ID != "" {
			n.answer(ctx, s, approvals.DecisionDeny, s.card.Revision)
		}
	}
}

// answer sends the decision on the revision it was chosen on: an Allow's
// key names it, so a click on a revision since replaced is refused as
// stale. A refusal is explained by a notification that, while the card is
// open, takes the place of the card's, with the same actions.
func (n *Notifier) answer(ctx context.Context, s *shown, d approvals.Decision, revision int) {
	sent, err := n.opts.Queue.Answer(approvals.Answer{Card: s.card.ID, Revision: revision, Decision: d, By: approvals.ByNotification})
	if err == nil {
		n.log.Info("answered from a notification", "card", sent.Card.ID, "decision", sent.Decision)
		return
	}
	n.log.Warn("answer from a notification refused", "card", s.card.ID, "decision", d, "err", err)
	// The server has usually closed the notification on the click already.
	n.takeBack(ctx, s)
	nt := note{title: "Not answered from the notification", body: Refusal(s.card, err)}
	if gone(err) {
		n.send(ctx, nt)
		return
	}
	again := &shown{card: s.card, allow: s.allow}
	nt.actions, nt.sticky = n.actions(s.card, s.allow), true
	n.replace(ctx, nil, again, nt)
}

// gone: the card can no longer be answered at all.
func gone(err error) bool {
	for _, e := range []error{approvals.ErrClosed, approvals.ErrAlreadyAnswered, approvals.ErrUnknownCard, approvals.ErrNotSent} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
