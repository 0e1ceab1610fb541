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

// Errors of Answer, for callers that branch on them.
var (
	ErrNoCards         = errors.New("no open cards")
	ErrUnknownCard     = errors.New("no such card")
	ErrAlreadyAnswered = errors.New("already answered")
	ErrClosed          = errors.New("card closed")
	ErrStale           = errors.New("the card changed since it was shown")
	ErrTruncated       = errors.New("the card was not shown in full")
	ErrNotOffered      = errors.New("decision not offered for this card")
	ErrNeedsInput      = errors.New("the card needs input from the panel")
	ErrTooSoon         = errors.New("the card is too new to allow by hotkey")
	ErrGrants          = errors.New("the card grants access and must be allowed from the panel")
	ErrAudit           = errors.New("the audit log cannot be written")
	ErrNotSent         = errors.New("the worker is gone; nothing was sent")
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
	// SettleDelay: a card must have been the oldest, unchanged, this long
	// before a hotkey or notification may allow it.
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
	By       By
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

	mu          sync.Mutex // protects open, ended, endedOrder, seq, oldestSince
	open        []*entry   // by arrival
	ended       map[string]string
	endedOrder  []string
	seq         uint64
	oldestSince time.Time // when open[0] became the oldest

	notifyMu sync.Mutex // keeps OnChange calls in order
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
	if len(q.open) == 1 {
		q.oldestSince = c.CreatedAt
	}
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
			return c.ItemID == ev.ItemID, "its item completed"
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
		if err := e.req.Reply(reply); err != nil {
			q.opts.Log.Warn("deny on stop", "card", e.card.ID, "err", err)
		}
	}
	q.notify(changes...)
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
		if e.is(ev.Worker, ev.Session) && e.card.ItemID == ev.ItemID && e.card.Kind == KindFileChange {
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
		builds[i], errs[i] = rebuild(req, lim)
	}
	q.mu.Lock()
	var changes []Change
	for i, e := range hits {
		// The new item wins over a revision made meanwhile from the old one.
		if slices.Contains(q.open, e) {
			changes = append(changes, q.revise(e, reqs[i], builds[i], errs[i], lim, "its patch changed"))
		}
	}
	q.notify(changes...)
}

// rebuild builds a card again from what its entry kept of the request.
func rebuild(req Request, lim Limits) (*built, error) {
	if req.Params == nil || req.Item == nil {
		return nil, refuse("its request is above %d bytes and was not kept", lim.ShowBytes)
	}
	return build(req, lim)
}

// revise makes b, built from req, the next revision of e, or, when err
// says it cannot be shown, closes e with a denial; q.mu is held.
func (q *Queue) revise(e *entry, req Request, b *built, err error, lim Limits, why string) Change {
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
		if err := e.req.Reply(e.replies[DecisionDeny]); err != nil {
			q.opts.Log.Warn("deny changed card", "card", e.card.ID, "err", err)
		}
		return ch
	}
	old := e.card
	b.card.ID, b.card.CreatedAt = old.ID, old.CreatedAt
	b.card.Revision, b.card.ChangedAt = old.Revision+1, q.opts.Now()
	e.built, e.req = b, req
	rec := record("revised", &b.card, req.Method)
	rec.Why = why
	if err := q.opts.Audit.Write(rec); err != nil {
		q.opts.Log.Error("audit log", "err", err)
	}
	return Change{Kind: CardUpdated, Card: b.card}
}

// touchOldest restarts the settle clock when the oldest card changed; q.mu is held.
func (q *Queue) touchOldest() {
	if len(q.open) > 0 && q.open[0].card.CreatedAt.After(q.oldestSince) {
		q.oldestSince = q.opts.Now()
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
		return nil, fmt.Errorf("%w: it is at revision %d, the answer saw %d", ErrStale, c.Revision, a.Revision)
	}
	if !a.Decision.Allows() {
		return reply, nil
	}
	if c.Truncated && !c.ShownInFull {
		return nil, fmt.Errorf("%w: open it in the panel and use Show all first", ErrTruncated)
	}
	if a.By == ByHotkey || a.By == ByNotification {
		switch {
		case c.NeedsInput:
			return nil, ErrNeedsInput
		case c.Grants() != "":
			return nil, ErrGrants
		case index != 0:
			return nil, errors.New("only the oldest card can be allowed this way")
		}
		since := q.oldestSince
		if c.ChangedAt.After(since) {
			since = c.ChangedAt
		}
		if q.opts.Now().Before(since.Add(q.opts.SettleDelay)) {
			return nil, ErrTooSoon
		}
	}
	if reply == nil {
		if a.By != ByPanel && a.By != ByCLI {
			return nil, ErrNeedsInput
		}
		return formReply(e.built, a.Values)
	}
	return reply, nil
}

// MarkShownInFull records that the whole text of a card, at revision, was
// shown; a truncated card can be allowed only after that.
func (q *Queue) MarkShownInFull(id string, revision int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	i, err := q.find(id)
	if err != nil {
		return err
	}
	c := &q.open[i].card
	if c.Revision != revision {
		return fmt.Errorf("card %s: %w", id, ErrStale)
	}
	c.ShownInFull = true
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
