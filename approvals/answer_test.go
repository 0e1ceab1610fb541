package approvals_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/approvals/approvalstest"
	"codexgate/supervisor/codextest"
)

// validReplies fails the test when a reply sent is not valid for its method.
func validReplies(t *testing.T, method string, replies ...*approvalstest.Replies) {
	t.Helper()
	sch, err := codextest.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range replies {
		for _, sent := range r.Sent() {
			if err := sch.ValidateReply(method, sent); err != nil {
				t.Errorf("reply %s: %v", sent, err)
			}
		}
	}
}

func openFileChange(t *testing.T, q *approvals.Queue, id, itemID, diff string) *approvalstest.Replies {
	params := fmt.Sprintf(`{"threadId":"T","turnId":"U","itemId":%q,"startedAtMs":1,"reason":null,"grantRoot":null}`, itemID)
	item := fmt.Sprintf(`{"type":"fileChange","id":%q,"changes":[{"path":"/opt/a.txt","kind":{"type":"add"},"diff":%q}]}`, itemID, diff)
	req, replies := approvalstest.Request(t, "api", 1, id, approvals.MethodFileChangeApproval, params, item)
	q.Open(req)
	return replies
}

func hotkeyAllow() approvals.Answer {
	return approvals.Answer{Decision: approvals.DecisionAllow, By: approvals.ByHotkey}
}

// TestSettleClockFollowsTheOldest: the settle delay restarts whenever the
// oldest card is another card, or the same card at a new revision, from the
// first card to the last.
func TestSettleClockFollowsTheOldest(t *testing.T) {
	q, _, clk := newQueue(t) // settle delay: 1s
	var all []*approvalstest.Replies
	for i, item := range []string{"a", "b", "c"} {
		all = append(all, openCommand(t, q, "api", fmt.Sprint(i), item))
		clk.Add(100 * time.Millisecond)
	}
	all = append(all, openFileChange(t, q, "3", "p1", "first\n"))
	for _, c := range q.Cards() {
		shown(t, q, c.ID)
	}
	cards := q.Cards()
	step := func(name string, wait time.Duration, want error) {
		t.Helper()
		clk.Add(wait)
		got, err := q.Answer(hotkeyAllow())
		if !errors.Is(err, want) || (want != nil && err == nil) {
			t.Fatalf("%s: %+v, %v; want %v", name, got.Card.ID, err, want)
		}
	}
	step("first card, before the delay", 0, approvals.ErrTooSoon)
	step("first card, after the delay", 1500*time.Millisecond, nil)
	// The second and third cards are older than the time the first one
	// became the oldest; each must still settle once it is the oldest.
	step("second card, just become the oldest", 0, approvals.ErrTooSoon)
	step("second card, not yet settled", 900*time.Millisecond, approvals.ErrTooSoon)
	step("second card, settled", 200*time.Millisecond, nil)
	step("third card, just become the oldest", 0, approvals.ErrTooSoon)
	// A newer card, and a card of another worker, change nothing.
	openCommand(t, q, "web", "0", "z")
	step("third card, settled", 1100*time.Millisecond, nil)
	if c := q.Cards()[0]; c.ID != cards[3].ID || c.Revision != 1 {
		t.Fatalf("oldest = %+v", c)
	}
	clk.Add(5 * time.Second)
	// A new revision of the oldest card restarts the clock, and must be
	// shown again.
	q.Event(approvals.Event{Kind: approvals.ItemUpdated, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: "p1",
		Item: json.RawMessage(`{"type":"fileChange","id":"p1","changes":[{"path":"/opt/a.txt","kind":{"type":"add"},"diff":"second\n"}]}`)})
	rev2 := approvals.Answer{Card: cards[3].ID, Revision: 2, Decision: approvals.DecisionAllow, By: approvals.ByHotkey}
	if _, err := q.Answer(rev2); !errors.Is(err, approvals.ErrNotShown) {
		t.Fatalf("a new revision is not shown yet: %v", err)
	}
	if err := q.MarkShownInFull(cards[3].ID, 2, approvals.ByPanel); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Answer(rev2); !errors.Is(err, approvals.ErrTooSoon) {
		t.Fatalf("a new revision of the oldest card did not restart the clock: %v", err)
	}
	clk.Add(1100 * time.Millisecond)
	if _, err := q.Answer(rev2); err != nil {
		t.Fatal(err)
	}
	for i, r := range all {
		if len(r.Sent()) != 1 {
			t.Errorf("card %d: replies %s", i, r.Sent())
		}
	}
	validReplies(t, approvals.MethodCommandApproval, all[:3]...)
	validReplies(t, approvals.MethodFileChangeApproval, all[3])
}

// TestQuickYesRules: a yes by hotkey, by notification, or that names no
// card, passes only when the oldest card was shown in full at its
// revision, is settled, short, needs no input and grants nothing.
func TestQuickYesRules(t *testing.T) {
	const (
		plain       = `{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"touch b.txt","cwd":"/w","availableDecisions":["accept","acceptForSession","cancel"]}`
		addPerm     = `{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"touch /opt/x/y","cwd":"/w","additionalPermissions":{"network":null,"fileSystem":{"read":null,"write":["/opt/x"],"entries":null}},"availableDecisions":["accept","cancel"]}`
		grantRoot   = `{"threadId":"T","turnId":"U","itemId":"p1","startedAtMs":1,"reason":null,"grantRoot":"/srv"}`
		permissions = `{"threadId":"T","turnId":"U","itemId":"i","cwd":"/w","permissions":{"network":{"enabled":true},"fileSystem":null}}`
		question    = `{"threadId":"T","turnId":"U","itemId":"i","questions":[{"id":"q","header":"H","question":"?","isOther":false,"isSecret":false,"options":[{"label":"A","description":""}]}]}`
		fourLines   = `{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"echo 1\necho 2\necho 3\nrm -rf ~","cwd":"/w","availableDecisions":["accept","cancel"]}`
	)
	item := fmt.Sprintf(patchItem, "x")
	for _, tc := range []struct {
		name        string
		method      string
		params      string
		item        string
		limit       int // ShowBytes; 0: the default
		unshown     bool
		unsettled   bool
		notOldest   bool
		decision    approvals.Decision
		want        error
		wantMessage string
	}{
		{name: "shown and settled", method: approvals.MethodCommandApproval, params: plain},
		{name: "four lines, shown and settled", method: approvals.MethodCommandApproval, params: fourLines},
		{name: "not shown", method: approvals.MethodCommandApproval, params: fourLines, unshown: true, want: approvals.ErrNotShown, wantMessage: "run `codexgate show api-1` or open it in the panel first"},
		{name: "not settled", method: approvals.MethodCommandApproval, params: plain, unsettled: true, want: approvals.ErrTooSoon, wantMessage: "try again in 1s"},
		{name: "not the oldest", method: approvals.MethodCommandApproval, params: plain, notOldest: true, want: approvals.ErrNotOldest},
		{name: "truncated, though shown", method: approvals.MethodCommandApproval, params: fourLines, limit: 16, want: approvals.ErrTruncated},
		{name: "additional permissions", method: approvals.MethodCommandApproval, params: addPerm, want: approvals.ErrGrants, wantMessage: "grant write /opt/x"},
		{name: "grant root", method: approvals.MethodFileChangeApproval, params: grantRoot, item: item, want: approvals.ErrGrants, wantMessage: "grant writes under /srv"},
		{name: "permissions", method: approvals.MethodPermissions, params: permissions, want: approvals.ErrGrants},
		{name: "typed input", method: approvals.MethodUserInput, params: question, want: approvals.ErrNeedsInput},
		{name: "for the session", method: approvals.MethodCommandApproval, params: plain, decision: approvals.DecisionAllowSession, want: approvals.ErrGrants},
		{name: "deny is never held back", method: approvals.MethodCommandApproval, params: fourLines, limit: 16, unshown: true, unsettled: true, decision: approvals.DecisionDeny},
		{name: "stop is never held back", method: approvals.MethodCommandApproval, params: addPerm, unshown: true, unsettled: true, decision: approvals.DecisionStop},
	} {
		for _, by := range []string{"hotkey", "notification", "cli without a card"} {
			t.Run(tc.name+" by "+by, func(t *testing.T) {
				audit := &approvalstest.Audit{}
				clk := approvalstest.NewClock()
				lim := approvals.DefaultLimits
				if tc.limit != 0 {
					lim.ShowBytes = tc.limit
				}
				q := approvals.NewQueue(approvals.Options{Audit: audit, Now: clk.Now, SettleDelay: time.Second, Limits: lim})
				req, replies := approvalstest.Request(t, "api", 1, "0", tc.method, tc.params, tc.item)
				q.Open(req)
				c := q.Cards()[0]
				if len(c.Decisions) == 0 || c.ID != "api-1" {
					t.Fatalf("card %+v", c)
				}
				if !tc.unshown {
					shown(t, q, c.ID)
				}
				if !tc.unsettled {
					clk.Add(2 * time.Second)
				}
				d := tc.decision
				if d == "" {
					d = approvals.DecisionAllow
				}
				a := approvals.Answer{Decision: d, Revision: c.Revision}
				switch by {
				case "hotkey":
					a.Card, a.By = c.ID, approvals.ByHotkey
				case "notification":
					a.Card, a.By = c.ID, approvals.ByNotification
				default:
					a.By = approvals.ByCLI
				}
				if tc.notOldest {
					older, _ := approvalstest.Request(t, "api", 1, "9", approvals.MethodCommandApproval, plain, "")
					q.Open(older) // opened later, so not the oldest: the card under test is made second below
					q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionDeny, By: approvals.ByCLI})
					req, replies = approvalstest.Request(t, "api", 1, "1", tc.method, tc.params, tc.item)
					q.Open(req)
					c = q.Cards()[1]
					shown(t, q, c.ID)
					clk.Add(2 * time.Second)
					a.Card = c.ID
					if by == "cli without a card" {
						a.By = approvals.ByNotification // an answer that names no card is the oldest's by definition
					}
				}
				sent, err := q.Answer(a)
				if !errors.Is(err, tc.want) || (tc.want != nil && err == nil) {
					t.Fatalf("answer: %v, want %v", err, tc.want)
				}
				if tc.wantMessage != "" && !strings.Contains(err.Error(), tc.wantMessage) {
					t.Errorf("error %q does not say %q", err, tc.wantMessage)
				}
				if tc.want != nil {
					if len(replies.Sent()) != 0 {
						t.Errorf("a refused yes sent %s", replies.Sent())
					}
					return
				}
				if s := replies.Sent(); len(s) != 1 || string(s[0]) != string(sent.Reply) {
					t.Errorf("sent %s, answered %s", s, sent.Reply)
				}
				validReplies(t, tc.method, replies)
			})
		}
	}
}

// TestNamedYesNeedsTheCardShown: `codexgate answer allow CARD` needs the
// card's current revision shown in full by some view; no settle delay.
func TestNamedYesNeedsTheCardShown(t *testing.T) {
	q, audit, _ := newQueue(t)
	replies := openFileChange(t, q, "0", "p1", "first\n")
	c := q.Cards()[0]
	named := approvals.Answer{Card: c.ID, Decision: approvals.DecisionAllow, By: approvals.ByCLI}
	_, err := q.Answer(named)
	if !errors.Is(err, approvals.ErrNotShown) || !strings.Contains(err.Error(), "run `codexgate show "+c.ID+"` first") {
		t.Fatalf("named allow before show: %v", err)
	}
	shown(t, q, c.ID)
	q.Event(approvals.Event{Kind: approvals.ItemUpdated, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: "p1",
		Item: json.RawMessage(`{"type":"fileChange","id":"p1","changes":[{"path":"/opt/a.txt","kind":{"type":"add"},"diff":"second\n"}]}`)})
	named.Revision = 2
	if c := q.Cards()[0]; c.ShownInFull || c.Revision != 2 {
		t.Fatalf("a new revision kept the shown mark: %+v", c)
	}
	if _, err := q.Answer(named); !errors.Is(err, approvals.ErrNotShown) {
		t.Fatalf("named allow of a revision not shown: %v", err)
	}
	if err := q.MarkShownInFull(c.ID, 1, approvals.ByCLI); !errors.Is(err, approvals.ErrStale) {
		t.Errorf("marking an old revision: %v", err)
	}
	shown(t, q, c.ID)
	if _, err := q.Answer(named); err != nil {
		t.Fatal(err)
	}
	validReplies(t, approvals.MethodFileChangeApproval, replies)
	var marks []approvals.Record
	for _, r := range audit.Records() {
		if r.Event == "shown" {
			marks = append(marks, r)
		}
	}
	if len(marks) != 2 || marks[0].Revision != 1 || marks[1].Revision != 2 || marks[1].By != approvals.ByCLI {
		t.Errorf("shown records %+v", marks)
	}
}

func TestMarkShownInFullRefuses(t *testing.T) {
	q, audit, _ := newQueue(t)
	openCommand(t, q, "api", "0", "a")
	id := q.Cards()[0].ID
	for _, tc := range []struct {
		id   string
		rev  int
		want error
	}{
		{"", 1, approvals.ErrUnknownCard},
		{"api-99", 1, approvals.ErrUnknownCard},
		{id, 2, approvals.ErrStale},
	} {
		if err := q.MarkShownInFull(tc.id, tc.rev, approvals.ByPanel); !errors.Is(err, tc.want) {
			t.Errorf("MarkShownInFull(%q, %d): %v, want %v", tc.id, tc.rev, err, tc.want)
		}
	}
	audit.Fail(errors.New("disk full"))
	if err := q.MarkShownInFull(id, 1, approvals.ByPanel); !errors.Is(err, approvals.ErrAudit) || q.Cards()[0].ShownInFull {
		t.Errorf("a mark that cannot be recorded: %v", err)
	}
}

// TestItemsCloseOnlyTheirOwnCards: item ids are the model's call ids and
// repeat; a completed item closes the card of the same worker, session,
// thread, turn and id only, and an empty id closes nothing.
func TestItemsCloseOnlyTheirOwnCards(t *testing.T) {
	q, _, _ := newQueue(t)
	open := func(id, thread, turn, item string) {
		params := fmt.Sprintf(`{"threadId":%q,"turnId":%q,"itemId":%q,"startedAtMs":1,"command":"ls","cwd":"/w"}`, thread, turn, item)
		req, _ := approvalstest.Request(t, "api", 1, id, approvals.MethodCommandApproval, params, "")
		q.Open(req)
	}
	open("0", "T", "U", "call_0")
	open("1", "T", "U2", "call_0")
	open("2", "T2", "U", "call_0")
	open("3", "T", "U", "")
	elicit, _ := approvalstest.Request(t, "api", 1, "4", approvals.MethodElicitation,
		`{"threadId":"T","turnId":"U","serverName":"s","mode":"url","message":"m","url":"https://example.com","elicitationId":"e","_meta":null}`, "")
	q.Open(elicit)
	ids := func() []string {
		var out []string
		for _, c := range q.Cards() {
			out = append(out, c.ID)
		}
		return out
	}
	before := ids()
	q.Event(approvals.Event{Kind: approvals.ItemCompleted, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: ""})
	if len(ids()) != len(before) {
		t.Fatalf("an item with an empty id closed %v", before)
	}
	q.Event(approvals.Event{Kind: approvals.ItemCompleted, Worker: "api", Session: 2, ThreadID: "T", TurnID: "U", ItemID: "call_0"})
	if len(ids()) != len(before) {
		t.Fatal("an item of another session closed a card")
	}
	q.Event(approvals.Event{Kind: approvals.ItemCompleted, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: "call_0"})
	got := ids()
	if len(got) != len(before)-1 || got[0] != before[1] {
		t.Fatalf("cards %v after their item completed, from %v", got, before)
	}
}
