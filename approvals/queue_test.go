package approvals_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/approvals/approvalstest"
)

const (
	command    = `{"threadId":"T","turnId":"U","itemId":"%s","startedAtMs":1,"command":"rm %s","cwd":"/w","availableDecisions":["accept","acceptForSession","decline","cancel"]}`
	fileChange = `{"threadId":"T","turnId":"U","itemId":"p1","startedAtMs":1,"reason":null,"grantRoot":null}`
	patchItem  = `{"type":"fileChange","id":"p1","changes":[{"path":"/opt/a.txt","kind":{"type":"add"},"diff":"%s\n"}]}`
)

func newQueue(t *testing.T) (*approvals.Queue, *approvalstest.Audit, *approvalstest.Clock) {
	audit := &approvalstest.Audit{}
	clk := approvalstest.NewClock()
	q := approvals.NewQueue(approvals.Options{Audit: audit, Now: clk.Now, SettleDelay: time.Second})
	return q, audit, clk
}

// shown records that card id, at its current revision, was shown whole on
// the command line.
func shown(t *testing.T, q *approvals.Queue, id string) {
	t.Helper()
	for _, c := range q.Cards() {
		if c.ID == id {
			if err := q.MarkShownInFull(id, c.Revision, approvals.ByCLI); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no open card %s", id)
}

func openCommand(t *testing.T, q *approvals.Queue, worker, id, item string) *approvalstest.Replies {
	req, replies := approvalstest.Request(t, worker, 1, id, approvals.MethodCommandApproval, fmt.Sprintf(command, item, item), "")
	q.Open(req)
	return replies
}

func TestOldestFirstAcrossWorkers(t *testing.T) {
	q, audit, clk := newQueue(t)
	r1 := openCommand(t, q, "api", "0", "a")
	r2 := openCommand(t, q, "web", "0", "b")
	r3 := openCommand(t, q, "api", "1", "c")
	cards := q.Cards()
	if len(cards) != 3 || cards[0].Worker != "api" || cards[1].Worker != "web" || cards[2].Command != "rm c" {
		t.Fatalf("cards = %+v", cards)
	}
	shown(t, q, cards[0].ID)
	clk.Add(2 * time.Second)
	got, err := q.Answer(approvals.Answer{Decision: approvals.DecisionAllow, By: approvals.ByCLI})
	if err != nil || got.Card.ID != cards[0].ID || string(got.Reply) != `{"decision":"accept"}` {
		t.Fatalf("answer oldest: %+v %v", got, err)
	}
	if _, err := q.Answer(approvals.Answer{Card: cards[2].ID, Decision: approvals.DecisionDeny, By: approvals.ByPanel}); err != nil {
		t.Fatal(err)
	}
	if s := r1.Sent(); len(s) != 1 || string(s[0]) != `{"decision":"accept"}` {
		t.Errorf("first replies %s", s)
	}
	if s := r3.Sent(); len(s) != 1 || string(s[0]) != `{"decision":"decline"}` {
		t.Errorf("third replies %s", s)
	}
	if len(r2.Sent()) != 0 || len(q.Cards()) != 1 {
		t.Error("an unanswered card was touched")
	}
	_, err = q.Answer(approvals.Answer{Card: cards[0].ID, Decision: approvals.DecisionDeny, By: approvals.ByCLI})
	if !errors.Is(err, approvals.ErrAlreadyAnswered) {
		t.Errorf("second answer: %v", err)
	}
	var ends []approvals.Record
	for _, r := range audit.Records() {
		if r.Event == "end" {
			ends = append(ends, r)
		}
	}
	if len(ends) != 2 || ends[0].Decision != approvals.DecisionAllow || ends[0].By != approvals.ByCLI || ends[0].Command != "rm a" || ends[0].SHA256 == "" {
		t.Errorf("audit ends = %+v", ends)
	}
}

func TestDecisionsNotOfferedAreRefused(t *testing.T) {
	q, _, _ := newQueue(t)
	req, replies := approvalstest.Request(t, "api", 1, "0", approvals.MethodCommandApproval,
		`{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"ls","cwd":"/w","availableDecisions":["accept","cancel"]}`, "")
	q.Open(req)
	_, err := q.Answer(approvals.Answer{Decision: approvals.DecisionAllowSession, By: approvals.ByCLI})
	if !errors.Is(err, approvals.ErrNotOffered) {
		t.Errorf("allow-session: %v", err)
	}
	if _, err := q.Answer(approvals.Answer{Decision: approvals.DecisionDeny, By: approvals.ByCLI}); err != nil {
		t.Fatal(err)
	}
	if s := replies.Sent(); len(s) != 1 || string(s[0]) != `{"decision":"decline"}` {
		t.Errorf("deny without decline offered sent %s", s)
	}
}

func TestWhatIsShownIsWhatIsAnswered(t *testing.T) {
	q, _, _ := newQueue(t)
	req, replies := approvalstest.Request(t, "api", 1, "0", approvals.MethodFileChangeApproval, fileChange, fmt.Sprintf(patchItem, "first"))
	q.Open(req)
	c := q.Cards()[0]
	if c.Revision != 1 || !strings.Contains(c.Diff, "+first") {
		t.Fatalf("card %+v", c)
	}
	q.Event(approvals.Event{Kind: approvals.ItemUpdated, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: "p1", Item: json.RawMessage(fmt.Sprintf(patchItem, "second"))})
	c2 := q.Cards()[0]
	if c2.ID != c.ID || c2.Revision != 2 || !strings.Contains(c2.Diff, "+second") || strings.Contains(c2.Diff, "first") {
		t.Fatalf("updated card %+v", c2)
	}
	for _, rev := range []int{0, 1} {
		_, err := q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionAllow, Revision: rev, By: approvals.ByPanel})
		if !errors.Is(err, approvals.ErrStale) {
			t.Errorf("allow at revision %d: %v", rev, err)
		}
	}
	if len(replies.Sent()) != 0 {
		t.Fatal("a stale answer was sent")
	}
	if _, err := q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionAllow, Revision: 2, By: approvals.ByPanel}); err != nil {
		t.Fatal(err)
	}
	// A patch update that leaves nothing to show is declined.
	req, replies = approvalstest.Request(t, "api", 1, "1", approvals.MethodFileChangeApproval, fileChange, fmt.Sprintf(patchItem, "x"))
	q.Open(req)
	q.Event(approvals.Event{Kind: approvals.ItemUpdated, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: "p1", Item: json.RawMessage(`{"type":"fileChange","id":"p1","changes":[]}`)})
	if s := replies.Sent(); len(q.Cards()) != 0 || len(s) != 1 || string(s[0]) != `{"decision":"decline"}` {
		t.Errorf("empty update: cards %d, sent %s", len(q.Cards()), s)
	}
	// An update without an item (its id is shared by another item in
	// flight, so whose it is cannot be told) is declined too.
	req, replies = approvalstest.Request(t, "api", 1, "2", approvals.MethodFileChangeApproval, fileChange, fmt.Sprintf(patchItem, "x"))
	q.Open(req)
	q.Event(approvals.Event{Kind: approvals.ItemUpdated, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: "p1"})
	if s := replies.Sent(); len(q.Cards()) != 0 || len(s) != 1 || string(s[0]) != `{"decision":"decline"}` {
		t.Errorf("update without an item: cards %d, sent %s", len(q.Cards()), s)
	}
}

func TestCardsCloseWhenNoLongerWanted(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   approvals.Event
	}{
		{"resolved", approvals.Event{Kind: approvals.RequestResolved, Worker: "api", Session: 1, ThreadID: "T", RequestID: "0"}},
		{"item completed", approvals.Event{Kind: approvals.ItemCompleted, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: "a"}},
		{"turn completed", approvals.Event{Kind: approvals.TurnCompleted, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U"}},
		{"new turn", approvals.Event{Kind: approvals.TurnStarted, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U2"}},
		{"thread closed", approvals.Event{Kind: approvals.ThreadClosed, Worker: "api", Session: 1, ThreadID: "T"}},
		{"worker exited", approvals.Event{Kind: approvals.WorkerExited, Worker: "api", Session: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _, _ := newQueue(t)
			replies := openCommand(t, q, "api", "0", "a")
			other := openCommand(t, q, "api", "5", "b")
			// The same id from another worker, or another session, is another request.
			openCommand(t, q, "web", "0", "a")
			req, _ := approvalstest.Request(t, "api", 2, "0", approvals.MethodCommandApproval, fmt.Sprintf(command, "a", "a"), "")
			q.Open(req)
			id := q.Cards()[0].ID
			q.Event(tc.ev)
			_, err := q.Answer(approvals.Answer{Card: id, Decision: approvals.DecisionAllow, By: approvals.ByCLI})
			if !errors.Is(err, approvals.ErrClosed) {
				t.Errorf("answer after close: %v", err)
			}
			if len(replies.Sent()) != 0 {
				t.Error("a closed card was answered")
			}
			for _, c := range q.Cards() {
				if c.ID == id {
					t.Error("the card is still open")
				}
			}
			if n := len(q.Cards()); n < 2 {
				t.Errorf("%d cards left: the event closed cards of other workers or sessions", n)
			}
			_ = other
		})
	}
}

func TestSubApprovalsCloseWithTheirItem(t *testing.T) {
	q, _, _ := newQueue(t)
	for i, approval := range []string{"sub-1", "sub-2"} {
		req, _ := approvalstest.Request(t, "api", 1, fmt.Sprint(i), approvals.MethodCommandApproval,
			`{"threadId":"T","turnId":"U","itemId":"parent","approvalId":"`+approval+`","startedAtMs":1,"command":"git push","cwd":"/w"}`, "")
		q.Open(req)
	}
	if len(q.Cards()) != 2 {
		t.Fatal("each sub-approval is its own card")
	}
	q.Event(approvals.Event{Kind: approvals.ItemCompleted, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: "parent"})
	if len(q.Cards()) != 0 {
		t.Error("sub-approvals stayed open after their item completed")
	}
}

func TestStoppingWorkerDeniesItsCards(t *testing.T) {
	q, audit, _ := newQueue(t)
	replies := openCommand(t, q, "api", "0", "a")
	others := openCommand(t, q, "web", "0", "b")
	q.Event(approvals.Event{Kind: approvals.WorkerStopping, Worker: "api", Session: 1})
	if s := replies.Sent(); len(s) != 1 || string(s[0]) != `{"decision":"decline"}` {
		t.Errorf("stopping worker's card got %s", s)
	}
	if len(others.Sent()) != 0 || len(q.Cards()) != 1 {
		t.Error("another worker's card was touched")
	}
	last := audit.Records()[len(audit.Records())-1]
	if last.By != approvals.ByAuto || !strings.Contains(last.Why, "stopping") {
		t.Errorf("audit %+v", last)
	}
}

func TestTruncatedCardsNeedTheFullView(t *testing.T) {
	audit := &approvalstest.Audit{}
	q := approvals.NewQueue(approvals.Options{Audit: audit, Limits: approvals.Limits{ShowBytes: 1024, MaxBytes: 1 << 20}})
	req, replies := approvalstest.Request(t, "api", 1, "0", approvals.MethodFileChangeApproval, fileChange, fmt.Sprintf(patchItem, strings.Repeat("x", 5000)))
	q.Open(req)
	c := q.Cards()[0]
	if !c.Truncated {
		t.Fatal("not truncated")
	}
	for _, by := range []approvals.By{approvals.ByCLI, approvals.ByHotkey, approvals.ByNotification, approvals.ByPanel} {
		if _, err := q.Answer(approvals.Answer{Decision: approvals.DecisionAllow, By: by}); !errors.Is(err, approvals.ErrTruncated) {
			t.Errorf("allow by %s before the full view: %v", by, err)
		}
	}
	full, _, err := q.Full(c.ID)
	if err != nil || !strings.Contains(full, strings.Repeat("x", 5000)) {
		t.Fatalf("full text: %v", err)
	}
	if err := q.MarkShownInFull(c.ID, c.Revision, approvals.ByPanel); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Answer(approvals.Answer{Decision: approvals.DecisionAllow, By: approvals.ByHotkey}); !errors.Is(err, approvals.ErrTruncated) {
		t.Errorf("quick allow of a truncated card shown in full: %v", err)
	}
	if _, err := q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionAllow, By: approvals.ByPanel}); err != nil {
		t.Fatal(err)
	}
	if len(replies.Sent()) != 1 {
		t.Error("no reply")
	}
}

func TestNoYesWithoutAnAuditRecord(t *testing.T) {
	q, audit, _ := newQueue(t)
	replies := openCommand(t, q, "api", "0", "a")
	id := q.Cards()[0].ID
	shown(t, q, id)
	audit.Fail(errors.New("disk full"))
	if _, err := q.Answer(approvals.Answer{Card: id, Decision: approvals.DecisionAllow, By: approvals.ByCLI}); !errors.Is(err, approvals.ErrAudit) {
		t.Errorf("allow without audit: %v", err)
	}
	if len(replies.Sent()) != 0 || len(q.Cards()) != 1 {
		t.Fatal("a yes went out unrecorded")
	}
	if _, err := q.Answer(approvals.Answer{Decision: approvals.DecisionDeny, By: approvals.ByCLI}); err != nil {
		t.Errorf("deny without audit: %v", err)
	}
	// A request that cannot be recorded when it opens is declined at once.
	replies = openCommand(t, q, "api", "1", "b")
	if s := replies.Sent(); len(q.Cards()) != 0 || len(s) != 1 || string(s[0]) != `{"decision":"decline"}` {
		t.Errorf("open without audit: cards %d sent %s", len(q.Cards()), s)
	}
}

func TestDeclinedRequestsAreRecordedAndAnswered(t *testing.T) {
	var changes []approvals.Change
	audit := &approvalstest.Audit{}
	q := approvals.NewQueue(approvals.Options{Audit: audit, OnChange: func(c approvals.Change) { changes = append(changes, c) }})
	req, replies := approvalstest.Request(t, "api", 1, "0", approvals.MethodFileChangeApproval, fileChange, "")
	q.Open(req)
	if s := replies.Sent(); len(s) != 1 || string(s[0]) != `{"decision":"decline"}` || len(q.Cards()) != 0 {
		t.Errorf("sent %s", s)
	}
	recs := audit.Records()
	if len(recs) != 1 || recs[0].By != approvals.ByAuto || !strings.Contains(recs[0].Why, "never started") {
		t.Errorf("audit %+v", recs)
	}
	if len(changes) != 1 || changes[0].Kind != approvals.CardDeclined || changes[0].Why == "" {
		t.Errorf("changes %+v", changes)
	}
}

func TestAnswerAfterTheWorkerIsGone(t *testing.T) {
	q, _, _ := newQueue(t)
	replies := openCommand(t, q, "api", "0", "a")
	replies.Disconnect()
	id := q.Cards()[0].ID
	shown(t, q, id)
	if _, err := q.Answer(approvals.Answer{Card: id, Decision: approvals.DecisionAllow, By: approvals.ByCLI}); !errors.Is(err, approvals.ErrNotSent) {
		t.Errorf("answer to a gone worker: %v", err)
	}
}

func TestAuditLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "codexgate", "audit.jsonl")
	audit, err := approvals.OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	q := approvals.NewQueue(approvals.Options{Audit: audit})
	openCommand(t, q, "api", "0", "a")
	q.Answer(approvals.Answer{Decision: approvals.DecisionDeny, By: approvals.ByCLI})
	audit.Close()
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("audit log mode: %v %v", info.Mode(), err)
	}
	raw, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 {
		t.Fatalf("audit lines: %q", lines)
	}
	var end approvals.Record
	if err := json.Unmarshal([]byte(lines[1]), &end); err != nil || end.Event != "end" || end.Decision != approvals.DecisionDeny || string(end.Reply) != `{"decision":"decline"}` || end.Time.IsZero() {
		t.Errorf("end record %s", lines[1])
	}
}

func TestConcurrentUse(t *testing.T) {
	q, _, _ := newQueue(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			worker := fmt.Sprintf("w%d", w)
			for i := range 50 {
				openCommand(t, q, worker, fmt.Sprint(i), fmt.Sprint("i", i))
				if i%3 == 0 {
					q.Event(approvals.Event{Kind: approvals.RequestResolved, Worker: worker, Session: 1, RequestID: fmt.Sprint(i)})
				}
				q.Answer(approvals.Answer{Decision: approvals.DecisionDeny, By: approvals.ByCLI})
				q.Cards()
			}
		})
	}
	wg.Wait()
	for len(q.Cards()) > 0 {
		if _, err := q.Answer(approvals.Answer{Decision: approvals.DecisionDeny, By: approvals.ByCLI}); err != nil {
			t.Fatal(err)
		}
	}
}
