package approvals

import "encoding/json"

// Request is one server request of a worker, handed on by the supervisor with
// what the worker knows of the item it names.
type Request struct {
	Worker string
	// Session numbers the worker's connections. Request ids restart at 0 on
	// every connection, so a request is known by worker, session and id.
	Session uint64
	ID      string // the JSON-RPC id, as sent
	Method  string
	Params  json.RawMessage
	// Item is the started item that params.itemId names, as last updated by
	// item/fileChange/patchUpdated; nil when the worker saw none.
	Item json.RawMessage
	// Reply sends the one answer to the request. It fails once the worker's
	// connection has gone, so no answer ever reaches a later process.
	Reply func(result json.RawMessage) error
}

// EventKind says what happened to the requests and items of a worker.
type EventKind int

const (
	// ItemUpdated: Item holds the item with new changes (patchUpdated); no
	// Item when whose changes they are cannot be told, which declines the
	// cards of the item.
	ItemUpdated EventKind = iota + 1
	// ItemCompleted: Item holds the final item.
	ItemCompleted
	// TurnStarted: codex clears the requests of earlier turns of the thread.
	TurnStarted
	TurnCompleted
	RequestResolved
	ThreadClosed
	// WorkerStopping: the worker is being stopped on purpose; its open
	// requests are denied before the process ends.
	WorkerStopping
	// WorkerExited: the connection is gone; its requests can no longer be
	// answered.
	WorkerExited
)

var eventNames = [...]string{
	ItemUpdated:     "item updated",
	ItemCompleted:   "item completed",
	TurnStarted:     "turn started",
	TurnCompleted:   "turn completed",
	RequestResolved: "request resolved",
	ThreadClosed:    "thread closed",
	WorkerStopping:  "worker stopping",
	WorkerExited:    "worker exited",
}

func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown event"
}

// Event is a change, reported by the supervisor, that may update or close cards.
type Event struct {
	Kind      EventKind
	Worker    string
	Session   uint64
	ThreadID  string
	TurnID    string
	ItemID    string
	RequestID string
	Item      json.RawMessage
}

// Methods are the server requests that become cards (or are declined as
// cards would be). Any other method gets a JSON-RPC error from the supervisor.
var Methods = map[string]bool{
	MethodCommandApproval:    true,
	MethodFileChangeApproval: true,
	MethodPermissions:        true,
	MethodElicitation:        true,
	MethodUserInput:          true,
	MethodLegacyExec:         true,
	MethodLegacyPatch:        true,
}

const (
	MethodCommandApproval    = "item/commandExecution/requestApproval"
	MethodFileChangeApproval = "item/fileChange/requestApproval"
	MethodPermissions        = "item/permissions/requestApproval"
	MethodElicitation        = "mcpServer/elicitation/request"
	MethodUserInput          = "item/tool/requestUserInput"
	MethodLegacyExec         = "execCommandApproval"
	MethodLegacyPatch        = "applyPatchApproval"
)
