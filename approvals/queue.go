package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Errors of Answer, for callers that branch on them. Answer wraps them
// with the card and what to do about it.
var (
	ErrNoCards         = errors.New("no open cards")
	ErrUnknownCard     = errors.New("no such card")
	ErrAlreadyAnswered = errors.New("already answered")
	ErrClosed          = errors.New("card closed")
	ErrStale           = errors.New("the card changed since it was shown")
	ErrNotOffered      = errors.New("decision not offered for this card")
	ErrAudit           = errors.New("the audit log cannot be written")
	ErrNotSent         = errors.New("the worker is gone; nothing was sent")

	// Refusals of a yes. A quick yes (hotkey, notification, or an answer
	// that names no card) needs all of: shown in full at this revision,
	// the oldest card, unchanged, for the settle delay, not truncated, no
	// typed input, nothing granted. A yes that names its card needs it
	// shown in full at this revision.
	ErrNotShown   = errors.New("the card was not shown in full at its current revision")
	ErrTruncated  = errors.New("the card is too long to show whole at a glance")
	ErrNeedsInput = errors.New("the card needs typed input")
	ErrGrants     = errors.New("allowing the card grants more than running it once")
	ErrNotOldest  = errors.New("only the oldest card can be allowed without naming it")
	ErrTooSoon    = errors.New("the card has not been the oldest, unchanged, for the settle delay")
)

// ChangeKind is what happened to a card.
type ChangeKind int

const (
	CardOpened ChangeKind = iota + 1
	CardUpdated
	CardClosed   // answered, or no longer wanted
	CardDeclined // a request declined without asking: Card has what is known
)

// Change is reported to Options.OnChange.
type Change struct {
	Kind ChangeKind
	Card Card
	Why  string // for CardClosed and CardDeclined
}

// Options configure a Queue.
type Options struct {
	Limits Limits
	// SettleDelay: a card must have been the oldest, with the same id and
	// revision, this long before a quick yes may allow it.
	SettleDelay time.Duration
	Audit       Auditor
	Log         *slog.Logger
	Now         func() time.Time
	// OnChange is called after each change, in order, outside the queue's
	// lock. It must not block, and must not answer cards itself.
	OnChange func(Change)
}

// Answer is a person's decision on a card.
type Answer struct {
	Card     string // empty: the oldest open card
	Decision Decision
	// Revision is the revision the person saw; 0 accepts only a card that
	// never changed.
	Revision int
	// By is the view that answered. Hotkeys and notifications, and any
	// answer that names no Card, are quick answers: a yes among them must
	// pass every rule of the quick yes.
	By By
	// Values are the entries of a form or the chosen answers, by field name.
	Values map[string]string
}

// Answered is what an answer sent.
type Answered struct {
	Card     Card            `json:"card"`
	Decision Decision        `json:"decision"`
	Reply    json.RawMessage `json:"reply"`
}

// endedMemory is how many ended cards are remembered for clear errors.
const endedMemory = 4096

// Queue holds the open cards, oldest first, across all workers. It is the
// one owner of card state: every method is safe for concurrent use.
type Queue struct {
	opts Options

	mu         sync.Mutex // protects open, ended, endedOrder, seq, oldest
	open       []*entry   // by arrival
	ended      map[string]string
	endedOrder []string
	seq        uint64
	oldest     settle

	notifyMu sync.Mutex // keeps OnChange calls in order
}

// settle is the card that is the oldest, at which revision, and since when:
// the clock of the settle delay restarts whenever the id or the revision of
// open[0] changes.
type settle struct {
	id       string
	revision int
	since    time.Time
}

type entry struct {
	*built
	req Request // without what keep drops
}

// size is about how many bytes e keeps.
func (e *entry) size() int { return e.built.size() + len(e.req.Params) + len(e.req.Item) }

func (e *entry) is(worker string, session uint64) bool {
	return e.req.Worker == worker && e.req.Session == session
}

// ownsItem reports whether ev is about e's own item. Item ids are the
// model's call ids, which can repeat across parallel calls and turns: an
// item is known by worker, session, thread, turn and id, and an empty id
// names no item.
func (e *entry) ownsItem(ev Event) bool {
	c := &e.card
	return e.is(ev.Worker, ev.Session) && ev.ItemID != "" &&
		c.ItemID == ev.ItemID && c.ThreadID == ev.ThreadID && c.TurnID == ev.TurnID
}

// NewQueue returns an empty queue.
func NewQueue(opts Options) *Queue {
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Queue{opts: opts, ended: make(map[string]string)}
}

// SetLimits applies new limits and settle delay to cards opened from now on.
func (q *Queue) SetLimits(lim Limits, settle time.Duration) {
	q.mu.Lock()
	q.opts.Limits, q.opts.SettleDelay = lim, settle
	q.mu.Unlock()
}

// SettleDelay is how long a card must have been the oldest, unchanged,
// before a yes that does not name it counts.
func (q *Queue) SettleDelay() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.opts.SettleDelay
}

// Open turns a request into a card, or declines it at once (recording why)
// when it cannot show what would happen, or when the open cards are at
// their caps.
func (q *Queue) Open(req Request) {
	q.mu.Lock()
	limits := q.opts.Limits.orDefault()
	why := q.overCaps(limits, 1)
	q.mu.Unlock()
	if why != "" {
		q.decline(req, why)
		return
	}
	// Escaping and capping a large request, and reading the files a change
	// touches, take a while: they are done without the lock, so other cards
	// can be answered meanwhile.
	b, err := build(req, limits)
	if err != nil {
		q.decline(req, err.Error())
		return
	}
	e := &entry{built: b, req: keep(req, b.card.Kind, limits)}
	q.mu.Lock()
	if why := q.overCaps(limits, e.size()); why != "" {
		q.mu.Unlock()
		q.decline(req, why)
		return
	}
	q.seq++
	c := &b.card
	c.ID = fmt.Sprintf("%s-%d", req.Worker, q.seq)
	c.Revision = 1
	c.CreatedAt = q.opts.Now()
	c.ChangedAt = c.CreatedAt
	rec := record("open", c, req.Method)
	if err := q.opts.Audit.Write(rec); err != nil {
		q.mu.Unlock()
		q.opts.Log.Error("audit log", "err", err)
		q.decline(req, "the audit log cannot be written: "+err.Error())
		return
	}
	q.open = append(q.open, e)
	q.touchOldest()
	q.notify(Change{Kind: CardOpened, Card: *c})
}

// overCaps says why one more card keeping size bytes would pass the caps
// on open cards, or ""; q.mu is held.
func (q *Queue) overCaps(lim Limits, size int) string {
	if len(q.open) >= lim.OpenCards {
		return fmt.Sprintf("%d cards are open, the most allowed (cards.max_open_cards)", len(q.open))
	}
	return q.overBytes(lim, size, nil)
}

// overBytes says why the open cards, but except, and one more keeping
// size bytes would pass the cap on the bytes they keep, or ""; q.mu is
// held.
func (q *Queue) overBytes(lim Limits, size int, except *entry) string {
	total := size
	for _, e := range q.open {
		if e != except {
			total += e.size()
		}
	}
	if total > lim.OpenBytes {
		return fmt.Sprintf("the open cards would keep %d bytes, above the %d-byte limit (cards.max_open_bytes)", total, lim.OpenBytes)
	}
	return ""
}

// keep is what a card keeps of its request once it is built and hashed:
// the ids and the reply, and, for a file change whose params and item are
// within ShowBytes, those too, to build it again when its files change.
// Everything else is dropped: the card's own texts show it.
func keep(req Request, kind Kind, lim Limits) Request {
	if kind != KindFileChange || len(req.Params) > lim.ShowBytes {
		req.Params = nil
	}
	if kind != KindFileChange || len(req.Item) > lim.ShowBytes {
		req.Item = nil
	}
	return req
}

// decline answers req with its kind's denial, without a card.
func (q *Queue) decline(req Request, why string) {
	reply := denial(req.Method)
	card := Card{Worker: req.Worker}
	var ref ids
	_ = json.Unmarshal(req.Params, &ref)
	ref.apply(&card)
	rec := record("end", &card, req.Method)
	rec.Decision, rec.By, rec.Why, rec.Reply = DecisionDeny, ByAuto, why, reply
	if err := q.opts.Audit.Write(rec); err != nil {
		q.opts.Log.Error("audit log", "err", err) // a denial goes out all the same
	}
	q.opts.Log.Warn("declined without asking", "worker", req.Worker, "method", req.Method, "why", why)
	if err := req.Reply(reply); err != nil {
		q.opts.Log.Warn("send denial", "worker", req.Worker, "err", err)
	}
	q.mu.Lock()
	q.notify(Change{Kind: CardDeclined, Card: card, Why: why})
}

// denial is the "no" of a request method, for requests that got no card.
func denial(method string) json.RawMessage {
	switch method {
	case MethodPermissions:
		return mustJSON(map[string]any{"permissions": map[string]any{}, "scope": "turn"})
	case MethodElicitation:
		return mustJSON(map[string]any{"action": "decline", "content": nil, "_meta": nil})
	case MethodUserInput:
		return mustJSON(map[string]any{"answers": map[string]any{}})
	case MethodLegacyExec, MethodLegacyPatch:
		return mustJSON(map[string]any{"decision": map[string]any{"denied": map[string]string{"rejection": "codexgate answers only v2 approval requests"}}})
	}
	return decision("decline")
}

// notify reports ch to OnChange. It is called with q.mu held and releases
// it, so that changes are reported in the order they happened.
func (q *Queue) notify(changes ...Change) {
	q.notifyMu.Lock()
	q.mu.Unlock()
	defer q.notifyMu.Unlock()
	if q.opts.OnChange == nil {
		return
	}
	for _, ch := range changes {
		q.opts.OnChange(ch)
	}
}

func record(event string, c *Card, method string) Record {
	r := Record{
		Event: event, Card: c.ID, Worker: c.Worker, ThreadID: c.ThreadID, TurnID: c.TurnID, ItemID: c.ItemID,
		Method: method, Kind: c.Kind, Command: c.Command, Cwd: c.Cwd, Host: c.Host, GrantRoot: c.GrantRoot,
		Reason: c.Reason, Revision: c.Revision, SHA256: c.SHA256, DiffSHA256: c.DiffSHA256,
	}
	for _, ch := range c.Changes {
		r.Files = append(r.Files, ch.Path)
	}
	return r
}

// Event updates or closes the cards an event concerns.
func (q *Queue) Event(ev Event) {
	if ev.Kind == ItemUpdated {
		q.updateItem(ev)
		return
	}
	q.mu.Lock()
	var changes []Change
	var denials []*entry
	match := func(e *entry) (bool, string) {
		if !e.is(ev.Worker, ev.Session) {
			return false, ""
		}
		c := &e.card
		switch ev.Kind {
		case ItemCompleted:
			return e.ownsItem(ev), "its item completed"
		case TurnCompleted:
			return c.TurnID == ev.TurnID, "its turn ended"
		case TurnStarted:
			return c.ThreadID == ev.ThreadID && c.TurnID != ev.TurnID, "a new turn started"
		case RequestResolved:
			return e.req.ID == ev.RequestID, "codex no longer waits for it"
		case ThreadClosed:
			return c.ThreadID == ev.ThreadID, "its thread closed"
		case WorkerExited:
			return true, "its worker exited"
		case WorkerStopping:
			denials = append(denials, e)
			return true, "its worker is stopping"
		}
		return false, ""
	}
	var replies []pendingReply
	kept := q.open[:0]
	for _, e := range q.open {
		if hit, why := match(e); hit {
			changes = append(changes, q.end(e, why))
			continue
		}
		kept = append(kept, e)
	}
	clear(q.open[len(kept):])
	q.open = kept
	q.touchOldest()
	for _, e := range denials {
		reply := e.replies[DecisionDeny]
		rec := record("end", &e.card, e.req.Method)
		rec.Decision, rec.By, rec.Why, rec.Reply = DecisionDeny, ByAuto, "its worker is stopping", reply
		if err := q.opts.Audit.Write(rec); err != nil {
			q.opts.Log.Error("audit log", "err", err)
		}
		replies = append(replies, pendingReply{e, reply, "deny on stop"})
	}
	q.notify(changes...)
	q.send(replies)
}

// send sends replies decided under the lock, after it: a worker slow to
// take its reply holds up no other card.
func (q *Queue) send(replies []pendingReply) {
	for _, r := range replies {
		if err := r.e.req.Reply(r.reply); err != nil {
			q.opts.Log.Warn(r.what, "card", r.e.card.ID, "err", err)
		}
	}
}

// pendingReply is a reply decided under the lock and sent after it.
type pendingReply struct {
	e     *entry
	reply json.RawMessage
	what  string // for the log, if it cannot be sent
}

// end records that e closed without an answer from a person; q.mu is held.
func (q *Queue) end(e *entry, why string) Change {
	q.remember(e.card.ID, "closed: "+why)
	if why != "its worker is stopping" { // that one is recorded with its denial
		rec := record("end", &e.card, e.req.Method)
		rec.By, rec.Why = ByAuto, why
		if err := q.opts.Audit.Write(rec); err != nil {
			q.opts.Log.Error("audit log", "err", err)
		}
	}
	return Change{Kind: CardClosed, Card: e.card, Why: why}
}

// updateItem rebuilds the cards of an item whose changes were replaced,
// reading the files they touch without the lock. A card that can no longer
// be shown is declined.
func (q *Queue) updateItem(ev Event) {
	q.mu.Lock()
	lim := q.opts.Limits.orDefault()
	var hits []*entry
	var reqs []Request
	for _, e := range q.open {
		if e.ownsItem(ev) && e.card.Kind == KindFileChange {
			req := e.req
			req.Item = ev.Item
			hits, reqs = append(hits, e), append(reqs, req)
		}
	}
	q.mu.Unlock()
	if len(hits) == 0 {
		return
	}
	builds := make([]*built, len(hits))
	errs := make([]error, len(hits))
	for i, req := range reqs {
		if ev.Item == nil {
			errs[i] = refuse("another item in flight has the same id, so whose changes these are cannot be told")
			continue
		}
		builds[i], errs[i] = rebuild(req, lim)
	}
	q.mu.Lock()
	var changes []Change
	var replies []pendingReply
	for i, e := range hits {
		// The new item wins over a revision made meanwhile from the old one.
		if slices.Contains(q.open, e) {
			ch, denial := q.revise(e, reqs[i], builds[i], errs[i], lim, "its patch changed")
			changes, replies = append(changes, ch), append(replies, denial...)
		}
	}
	q.notify(changes...)
	q.send(replies)
}

// rebuild builds a card again from what its entry kept of the request.
func rebuild(req Request, lim Limits) (*built, error) {
	if req.Params == nil || req.Item == nil {
		return nil, refuse("its request is above %d bytes and was not kept", lim.ShowBytes)
	}
	return build(req, lim)
}

// revise makes b, built from req, the next revision of e, or, when err
// says it cannot be shown, closes e and returns the denial to send after
// the lock; q.mu is held.
func (q *Queue) revise(e *entry, req Request, b *built, err error, lim Limits, why string) (Change, []pendingReply) {
	req = keep(req, KindFileChange, lim)
	if err == nil {
		// A revision may be far larger than the card was (its files grew,
		// or its patch did): it is held to the caps as a new card is.
		if over := q.overBytes(lim, b.size()+len(req.Params)+len(req.Item), e); over != "" {
			err = refuse("%s", over)
		}
	}
	if err != nil {
		ch := q.end(e, why+" and cannot be shown: "+err.Error())
		q.open = slices.DeleteFunc(q.open, func(o *entry) bool { return o == e })
		q.touchOldest()
		return ch, []pendingReply{{e, e.replies[DecisionDeny], "deny changed card"}}
	}
	old := e.card
	b.card.ID, b.card.CreatedAt = old.ID, old.CreatedAt
	b.card.Revision, b.card.ChangedAt = old.Revision+1, q.opts.Now()
	e.built, e.req = b, req
	q.touchOldest()
	rec := record("revised", &b.card, req.Method)
	rec.Why = why
	if err := q.opts.Audit.Write(rec); err != nil {
		q.opts.Log.Error("audit log", "err", err)
	}
	return Change{Kind: CardUpdated, Card: b.card}, nil
}

// touchOldest restarts the settle clock when the oldest card is another
// card, or the same card at another revision; q.mu is held. It is called
// after every change of the queue.
func (q *Queue) touchOldest() {
	if len(q.open) == 0 {
		q.oldest = settle{}
		return
	}
	c := &q.open[0].card
	if c.ID != q.oldest.id || c.Revision != q.oldest.revision {
		q.oldest = settle{id: c.ID, revision: c.Revision, since: q.opts.Now()}
	}
}

func (q *Queue) remember(id, how string) {
	q.ended[id] = how
	q.endedOrder = append(q.endedOrder, id)
	if len(q.endedOrder) > endedMemory {
		delete(q.ended, q.endedOrder[0])
		q.endedOrder = q.endedOrder[1:]
	}
}

// find returns the open card id (the oldest for ""), or why there is none.
func (q *Queue) find(id string) (int, error) {
	if id == "" {
		if len(q.open) == 0 {
			return -1, ErrNoCards
		}
		return 0, nil
	}
	if i := slices.IndexFunc(q.open, func(e *entry) bool { return e.card.ID == id }); i >= 0 {
		return i, nil
	}
	switch how, ok := q.ended[id]; {
	case !ok:
		return -1, fmt.Errorf("card %s: %w", id, ErrUnknownCard)
	case how == "answered":
		return -1, fmt.Errorf("card %s: %w", id, ErrAlreadyAnswered)
	default:
		return -1, fmt.Errorf("card %s %s: %w", id, how, ErrClosed)
	}
}

// Answer applies a person's decision: it checks the card's revision and the
// safety rules, writes the audit record, and sends the one reply.
func (q *Queue) Answer(a Answer) (Answered, error) {
	shown, err := q.rereadFiles(a) // before a yes, without the lock
	if err != nil {
		return Answered{}, err
	}
	q.mu.Lock()
	i, err := q.find(a.Card)
	if err != nil {
		q.mu.Unlock()
		return Answered{}, err
	}
	e := q.open[i]
	if err := shown.confirm(e); err != nil {
		q.mu.Unlock()
		return Answered{}, fmt.Errorf("card %s: %w", e.card.ID, err)
	}
	reply, err := q.check(e, i, a)
	if err != nil {
		q.mu.Unlock()
		return Answered{}, fmt.Errorf("card %s: %w", e.card.ID, err)
	}
	// The record is synced under the lock, before the card leaves the
	// queue: no second answer can slip in, and no yes goes out unrecorded.
	rec := record("end", &e.card, e.req.Method)
	rec.Decision, rec.By, rec.Reply = a.Decision, a.By, reply
	if err := q.opts.Audit.Write(rec); err != nil && a.Decision.Allows() {
		q.mu.Unlock()
		q.opts.Log.Error("audit log", "err", err)
		return Answered{}, fmt.Errorf("card %s: %w: %v", e.card.ID, ErrAudit, err)
	}
	q.open = slices.Delete(q.open, i, i+1)
	q.remember(e.card.ID, "answered")
	q.touchOldest()
	card := e.card
	q.notify(Change{Kind: CardClosed, Card: card, Why: "answered " + string(a.Decision)})

	if err := e.req.Reply(reply); err != nil {
		rec := record("unsent", &card, e.req.Method)
		rec.Why = err.Error()
		_ = q.opts.Audit.Write(rec)
		return Answered{}, fmt.Errorf("card %s: %w (%v)", card.ID, ErrNotSent, err)
	}
	return Answered{Card: card, Decision: a.Decision, Reply: reply}, nil
}

// check applies the rules to an answer and returns the reply; q.mu is held.
func (q *Queue) check(e *entry, index int, a Answer) (json.RawMessage, error) {
	c := &e.card
	reply, offered := e.replies[a.Decision]
	if !offered {
		return nil, fmt.Errorf("%w: %s (offered: %v)", ErrNotOffered, a.Decision, c.Decisions)
	}
	if a.Revision != c.Revision && !(a.Revision == 0 && c.Revision == 1) {
		return nil, fmt.Errorf("%w: it is at revision %d, the answer saw %d; run `codexgate show %s` and answer with --revision %d",
			ErrStale, c.Revision, a.Revision, c.ID, c.Revision)
	}
	if !a.Decision.Allows() {
		return reply, nil // a no is never held back
	}
	quick := a.Card == "" || a.By == ByHotkey || a.By == ByNotification
	switch {
	case quick:
		if err := q.quickYes(e, index, a.Decision); err != nil {
			return nil, err
		}
	case a.By == ByCLI:
		if !c.ShownInFull {
			return nil, fmt.Errorf("%w: run `codexgate show %s` first", ErrNotShown, c.ID)
		}
	case a.By == ByPanel:
		if c.Truncated && !c.ShownInFull {
			return nil, fmt.Errorf("%w: use Show all in the panel first", ErrNotShown)
		}
	default:
		return nil, fmt.Errorf("an answer by %q cannot allow", a.By)
	}
	if reply == nil {
		if a.By != ByPanel && a.By != ByCLI {
			return nil, fmt.Errorf("%w: answer it in the panel", ErrNeedsInput)
		}
		return formReply(e.built, a.Values)
	}
	return reply, nil
}

// quickYes applies the rules of a yes given without naming or looking at
// the card; q.mu is held.
func (q *Queue) quickYes(e *entry, index int, d Decision) error {
	c := &e.card
	if index != 0 {
		return fmt.Errorf("%w: name it: `codexgate show %s`, then `codexgate answer %s %s`", ErrNotOldest, c.ID, d, c.ID)
	}
	if err := c.quickNo(d); err != nil {
		return err
	}
	if !c.ShownInFull {
		return fmt.Errorf("%w: run `codexgate show %s` or open it in the panel first", ErrNotShown, c.ID)
	}
	ready := q.oldest.since.Add(q.opts.SettleDelay)
	if q.oldest.id != c.ID || q.oldest.revision != c.Revision || q.opts.Now().Before(ready) {
		wait := max(ready.Sub(q.opts.Now()), 0).Round(100 * time.Millisecond)
		return fmt.Errorf("%w (%s): look at it, and try again in %s", ErrTooSoon, q.opts.SettleDelay, wait)
	}
	return nil
}

// MarkShownInFull records that a view showed the whole text of card id at
// revision: the panel for a card that is not truncated or after Show all, a
// notification whose body held the whole card, `codexgate show`. A yes
// needs it; a new revision clears it. It is recorded in the audit log, and
// not recorded at all when the log cannot be written.
func (q *Queue) MarkShownInFull(id string, revision int, by By) error {
	if id == "" {
		return fmt.Errorf("no card named: %w", ErrUnknownCard)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	i, err := q.find(id)
	if err != nil {
		return err
	}
	e := q.open[i]
	c := &e.card
	if c.Revision != revision {
		return fmt.Errorf("card %s: %w: it is at revision %d, revision %d was shown", id, ErrStale, c.Revision, revision)
	}
	if c.ShownInFull {
		return nil
	}
	rec := record("shown", c, e.req.Method)
	rec.By = by
	if err := q.opts.Audit.Write(rec); err != nil {
		q.opts.Log.Error("audit log", "err", err)
		return fmt.Errorf("card %s: %w: %v", id, ErrAudit, err)
	}
	c.ShownInFull, c.ShownBy = true, by
	return nil
}

// Full is the whole shown text of an open card: every byte, escaped.
func (q *Queue) Full(id string) (string, Card, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i, err := q.find(id)
	if err != nil {
		return "", Card{}, err
	}
	return q.open[i].full, q.open[i].card, nil
}

// Cards are the open cards, oldest first.
func (q *Queue) Cards() []Card {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Card, len(q.open))
	for i, e := range q.open {
		out[i] = e.card
	}
	return out
}

// Refused records a control-socket peer that was refused.
func (q *Queue) Refused(why string) {
	if err := q.opts.Audit.Write(Record{Event: "refused", By: ByCLI, Why: why}); err != nil {
		q.opts.Log.Error("audit log", "err", err)
	}
}
