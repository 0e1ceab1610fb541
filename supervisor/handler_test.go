package supervisor

import (
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"

	"codexgate/approvals"
	"codexgate/supervisor/codexrpc"
)

// recordingApprover keeps what it is given.
type recordingApprover struct {
	mu     sync.Mutex
	opened []approvals.Request
	events []approvals.Event
}

func (a *recordingApprover) Open(req approvals.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.opened = append(a.opened, req)
}

func (a *recordingApprover) Event(ev approvals.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
}

// Item ids are the model's call ids: two parallel calls can share one, and
// their items are then in flight together. A request that names such an id
// cannot be told apart from the other item's, so it gets no item to show
// (and is declined), rather than the item that started last.
func TestARequestNamingASharedItemIdGetsNoItem(t *testing.T) {
	approver := &recordingApprover{}
	w := newWorker(Spec{Name: "api"}, &Options{Approver: approver, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
	w.session, w.items = 1, map[string]trackedItem{}
	h := &connHandler{w: w, session: 1}
	started := func(path string) {
		params, _ := json.Marshal(map[string]any{"threadId": "T", "turnId": "U", "item": map[string]any{
			"type": "fileChange", "id": "call_1", "status": "inProgress",
			"changes": []any{map[string]any{"path": path, "kind": map[string]any{"type": "add"}, "diff": "x\n"}},
		}})
		h.Notification(codexrpc.NotifyItemStarted, params)
	}
	request := func() approvals.Request {
		h.Request(&codexrpc.Request{ID: json.RawMessage(`7`), Method: approvals.MethodFileChangeApproval,
			Params: json.RawMessage(`{"threadId":"T","turnId":"U","itemId":"call_1","startedAtMs":1,"reason":null,"grantRoot":null}`)})
		approver.mu.Lock()
		defer approver.mu.Unlock()
		return approver.opened[len(approver.opened)-1]
	}
	completed := func() {
		h.Notification(codexrpc.NotifyItemCompleted, json.RawMessage(`{"threadId":"T","turnId":"U","item":{"type":"fileChange","id":"call_1","status":"completed"}}`))
	}

	started("/home/me/.bashrc") // the change codex asks about
	started("/w/README.md")     // the same call id, started next
	if req := request(); req.Item != nil {
		t.Errorf("the request got an item of a shared id: %s", req.Item)
	}
	// One of the two completes: the other is still in flight, and a third
	// started with the id is no more its own.
	completed()
	started("/w/NOTES.md")
	if req := request(); req.Item != nil {
		t.Errorf("the request got an item of a shared id: %s", req.Item)
	}
	completed()
	completions := func() (n int) {
		approver.mu.Lock()
		defer approver.mu.Unlock()
		for _, ev := range approver.events {
			if ev.Kind == approvals.ItemCompleted {
				n++
			}
		}
		return n
	}
	// While the id is shared, which item completed is unknown: no card is
	// closed by it (a card of the other would close unanswered).
	if n := completions(); n != 0 {
		t.Errorf("%d item completions handed on while the id was shared", n)
	}
	completed()
	if n := completions(); n != 1 {
		t.Errorf("%d item completions handed on once the id was one item's, want 1", n)
	}
	// Once none is in flight, the id is one item's again.
	started("/w/NOTES.md")
	if req := request(); req.Item == nil {
		t.Error("an item of its own was not given to the request")
	}
}
