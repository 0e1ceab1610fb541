package codexrpc

import "encoding/json"

// Methods the client calls.
const (
	MethodInitialize    = "initialize"
	MethodInitialized   = "initialized"
	MethodThreadStart   = "thread/start"
	MethodThreadResume  = "thread/resume"
	MethodTurnStart     = "turn/start"
	MethodTurnInterrupt = "turn/interrupt"
	MethodAccountRead   = "account/read"
	MethodLoginStart    = "account/login/start"
)

// Server notifications the supervisor follows.
const (
	NotifyItemStarted         = "item/started"
	NotifyItemCompleted       = "item/completed"
	NotifyPatchUpdated        = "item/fileChange/patchUpdated"
	NotifyRequestResolved     = "serverRequest/resolved"
	NotifyTurnStarted         = "turn/started"
	NotifyTurnCompleted       = "turn/completed"
	NotifyThreadStatusChanged = "thread/status/changed"
	NotifyThreadClosed        = "thread/closed"
	NotifyError               = "error"
	NotifyWarning             = "warning"
	NotifyConfigWarning       = "configWarning"
	NotifyDeprecationNotice   = "deprecationNotice"
	NotifyTokenUsage          = "thread/tokenUsage/updated"
)

// The policy every worker runs under. It is sent on thread/start and again on
// thread/resume, because resume otherwise keeps whatever the thread had.
const (
	SandboxWorkspaceWrite = "workspace-write"
	ApprovalOnRequest     = "on-request"
)

// NoisyNotifications are opted out of at initialize: streaming deltas and
// counters that no card needs, which would otherwise dominate the stream.
// Token usage is kept: it comes once per model response, and the activity
// history shows it.
var NoisyNotifications = []string{
	"item/agentMessage/delta",
	"item/reasoning/summaryTextDelta",
	"item/reasoning/summaryPartAdded",
	"item/reasoning/textDelta",
	"item/commandExecution/outputDelta",
	"account/rateLimits/updated",
	"mcpServer/startupStatus/updated",
	"remoteControl/status/changed",
}

type ClientInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

type Capabilities struct {
	// ExperimentalAPI is set because availableDecisions and
	// additionalPermissions, which cards show, are experimental fields.
	ExperimentalAPI           bool     `json:"experimentalApi"`
	OptOutNotificationMethods []string `json:"optOutNotificationMethods,omitempty"`
}

type InitializeParams struct {
	ClientInfo   ClientInfo   `json:"clientInfo"`
	Capabilities Capabilities `json:"capabilities"`
}

type InitializeResult struct {
	UserAgent string `json:"userAgent"`
	CodexHome string `json:"codexHome"`
}

type ThreadStartParams struct {
	Cwd            string `json:"cwd"`
	Model          string `json:"model,omitempty"`
	Sandbox        string `json:"sandbox"`
	ApprovalPolicy string `json:"approvalPolicy"`
}

type ThreadResumeParams struct {
	ThreadID string `json:"threadId"`
	ThreadStartParams
	ExcludeTurns bool `json:"excludeTurns"`
}

type Thread struct {
	ID     string       `json:"id"`
	Status ThreadStatus `json:"status"`
}

type ThreadResult struct {
	Thread Thread `json:"thread"`
}

type UserInput struct {
	Type         string `json:"type"`
	Text         string `json:"text"`
	TextElements []any  `json:"text_elements"`
}

// TextInput is the input of a turn that carries one prompt.
func TextInput(prompt string) []UserInput {
	return []UserInput{{Type: "text", Text: prompt, TextElements: []any{}}}
}

type TurnStartParams struct {
	ThreadID string      `json:"threadId"`
	Input    []UserInput `json:"input"`
}

type Turn struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

type TurnResult struct {
	Turn Turn `json:"turn"`
}

type TurnInterruptParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
}

// ThreadStatus is {type: idle|active|notLoaded|systemError, activeFlags}.
type ThreadStatus struct {
	Type        string   `json:"type"`
	ActiveFlags []string `json:"activeFlags,omitempty"`
}

type ThreadStatusChanged struct {
	ThreadID string       `json:"threadId"`
	Status   ThreadStatus `json:"status"`
}

// ItemNotification is item/started and item/completed. Item is kept raw:
// cards show fields the supervisor has no use for.
type ItemNotification struct {
	ThreadID string          `json:"threadId"`
	TurnID   string          `json:"turnId"`
	Item     json.RawMessage `json:"item"`
}

// ItemHeader is the part of an item the supervisor reads.
type ItemHeader struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type PatchUpdated struct {
	ThreadID string          `json:"threadId"`
	TurnID   string          `json:"turnId"`
	ItemID   string          `json:"itemId"`
	Changes  json.RawMessage `json:"changes"`
}

type RequestResolved struct {
	ThreadID  string          `json:"threadId"`
	RequestID json.RawMessage `json:"requestId"`
}

type TurnNotification struct {
	ThreadID string `json:"threadId"`
	Turn     Turn   `json:"turn"`
}

// TokenUsageUpdated is thread/tokenUsage/updated: the thread's usage after
// a model response of the turn.
type TokenUsageUpdated struct {
	ThreadID   string `json:"threadId"`
	TurnID     string `json:"turnId"`
	TokenUsage struct {
		Total TokenCount `json:"total"`
		Last  TokenCount `json:"last"`
	} `json:"tokenUsage"`
}

type TokenCount struct {
	TotalTokens int64 `json:"totalTokens"`
}

type ThreadClosed struct {
	ThreadID string `json:"threadId"`
}

type ErrorNotification struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
	WillRetry bool   `json:"willRetry"`
	ThreadID  string `json:"threadId"`
	TurnID    string `json:"turnId"`
}

type MessageNotification struct {
	Message string `json:"message"`
}

type AccountReadParams struct{}

type AccountReadResult struct {
	Account *struct {
		Type string `json:"type"`
	} `json:"account"`
}

type LoginStartParams struct {
	Type   string `json:"type"`
	APIKey string `json:"apiKey"`
}
