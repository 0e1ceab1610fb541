package supervisor

import (
	"encoding/json"
	"slices"

	"codexgate/approvals"
)

// Turn statuses of the activity history: codex's three ends, and working
// while the turn runs.
const (
	TurnWorking     = "working"
	TurnCompleted   = "completed"
	TurnFailed      = "failed"
	TurnInterrupted = "interrupted"
)

// Caps of the activity history: it lives in memory for as long as the app,
// and everything in it is codex's text, escaped like a card.
const (
	historyTurns = 5    // turns kept per worker
	turnItems    = 20   // messages, commands and file changes kept per turn, each
	promptBytes  = 2048 // a prompt
	messageBytes = 4096 // an agent message
	lineBytes    = 512  // a command or a path
	wordBytes    = 128  // an id, a status or a kind
)

// Activity is what one worker has been doing: its last turns, oldest
// first. Seq grows with every change, so that a view can tell whether it
// has the latest.
type Activity struct {
	Worker string `json:"worker"`
	Seq    uint64 `json:"seq"`
	Turns  []Turn `json:"turns"`
}

// Turn is one turn of a worker. Every text in it is escaped (approvals.Escape)
// and capped; Omitted counts the items left out past the caps.
type Turn struct {
	ID     string `json:"id"`
	Status string `json:"status"` // TurnWorking, TurnCompleted, TurnFailed, TurnInterrupted
	// Prompt is the task the app sent with turn/start; "" for a turn
	// started elsewhere.
	Prompt   string       `json:"prompt,omitempty"`
	Messages []string     `json:"messages,omitempty"`
	Commands []Command    `json:"commands,omitempty"`
	Files    []FileChange `json:"files,omitempty"`
	// Tokens is the tokens the turn used, as codex reported them; 0 when it
	// reported none.
	Tokens  int64  `json:"tokens,omitempty"`
	Error   string `json:"error,omitempty"`
	Omitted int    `json:"omitted,omitempty"`
}

// Command is a command the agent ran, or asked to run.
type Command struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	Status   string `json:"status"` // codex's: inProgress, completed, failed, declined
	ExitCode *int   `json:"exitCode,omitempty"`
}

// FileChange is a file the agent changed, or asked to change.
type FileChange struct {
	ItemID string `json:"itemId"`
	Path   string `json:"path"`
	Kind   string `json:"kind"` // add, delete, update
	Status string `json:"status"`
}

// LastMessage is the last agent message of the turn, or "".
func (t Turn) LastMessage() string {
	if len(t.Messages) == 0 {
		return ""
	}
	return t.Messages[len(t.Messages)-1]
}

// Last is the worker's current or last turn.
func (a Activity) Last() (Turn, bool) {
	if len(a.Turns) == 0 {
		return Turn{}, false
	}
	return a.Turns[len(a.Turns)-1], true
}

// history is a worker's Activity as it is built; the worker's mu guards it.
type history struct {
	Activity
	// tokenBase is the thread's token total before each kept turn; it goes
	// with its turn, so that a late usage update still counts right.
	tokenBase map[string]int64
}

func capped(s string, multiline bool, limit int) string {
	// Cap first, so that escaping works on a bounded text, then again: an
	// escape is longer than what it shows.
	const more = " …"
	s, cut := approvals.Cap(s, limit)
	s, cutEscaped := approvals.Cap(approvals.Escape(s, multiline), limit)
	if cut || cutEscaped {
		s, _ = approvals.Cap(s, limit-len(more))
		s += more
	}
	return s
}

// turn is the kept turn with that id, added as working when it is new; nil
// for an empty id.
func (h *history) turn(id string) *Turn {
	if id == "" {
		return nil
	}
	id = capped(id, false, wordBytes)
	if i := slices.IndexFunc(h.Turns, func(t Turn) bool { return t.ID == id }); i >= 0 {
		return &h.Turns[i]
	}
	h.Turns = append(h.Turns, Turn{ID: id, Status: TurnWorking})
	if over := len(h.Turns) - historyTurns; over > 0 {
		for _, t := range h.Turns[:over] {
			delete(h.tokenBase, t.ID)
		}
		h.Turns = slices.Delete(h.Turns, 0, over)
	}
	return &h.Turns[len(h.Turns)-1]
}

func (h *history) prompt(turnID, prompt string) {
	if t := h.turn(turnID); t != nil {
		t.Prompt = capped(prompt, true, promptBytes)
	}
}

// item records a started or completed item of the turn: agent messages
// when they complete, commands and file changes as they start and end.
func (h *history) item(turnID string, raw json.RawMessage, completed bool) bool {
	var it struct {
		// Codex's texts: escaped and capped below before they are kept.
		Type     string          `json:"type"`
		ID       string          `json:"id"`
		Text     string          `json:"text"`
		Command  *string         `json:"command"`
		Status   string          `json:"status"`
		ExitCode *int            `json:"exitCode"`
		Changes  json.RawMessage `json:"changes"`
	}
	if json.Unmarshal(raw, &it) != nil {
		return false
	}
	switch it.Type {
	case "agentMessage":
		if !completed {
			return false
		}
		t := h.turn(turnID)
		if t == nil {
			return false
		}
		if len(t.Messages) == turnItems {
			t.Messages = slices.Delete(t.Messages, 0, 1) // the last ones say the most
			t.Omitted++
		}
		t.Messages = append(t.Messages, capped(it.Text, true, messageBytes))
	case "commandExecution":
		t := h.turn(turnID)
		if t == nil {
			return false
		}
		id := capped(it.ID, false, wordBytes)
		i := slices.IndexFunc(t.Commands, func(c Command) bool { return c.ID == id })
		if i < 0 {
			if len(t.Commands) == turnItems {
				t.Omitted++
				return true
			}
			t.Commands = append(t.Commands, Command{ID: id})
			i = len(t.Commands) - 1
		}
		c := &t.Commands[i]
		if it.Command != nil {
			c.Command = capped(*it.Command, false, lineBytes)
		}
		if it.Status != "" {
			c.Status = capped(it.Status, false, wordBytes)
		}
		if it.ExitCode != nil {
			c.ExitCode = it.ExitCode
		}
	case "fileChange":
		t := h.turn(turnID)
		if t == nil {
			return false
		}
		var changes []fileChangeJSON
		_ = json.Unmarshal(it.Changes, &changes) // a completed item may leave them out
		id, status, keep := capped(it.ID, false, wordBytes), capped(it.Status, false, wordBytes), len(changes) == 0
		t.Files = slices.DeleteFunc(t.Files, func(f FileChange) bool {
			if f.ItemID != id {
				return false
			}
			if keep { // the paths the item started with
				var c fileChangeJSON
				c.Path, c.Kind.Type = f.Path, f.Kind
				changes = append(changes, c)
			}
			return true
		})
		for _, ch := range changes {
			if len(t.Files) == turnItems {
				t.Omitted++
				continue
			}
			t.Files = append(t.Files, FileChange{ItemID: id, Path: capped(ch.Path, false, lineBytes), Kind: capped(ch.Kind.Type, false, wordBytes), Status: status})
		}
	default:
		return false
	}
	return true
}

// fileChangeJSON is one change of a fileChange item, as codex sends it.
type fileChangeJSON struct {
	Path string `json:"path"`
	Kind struct {
		Type string `json:"type"`
	} `json:"kind"`
}

// tokens records the thread's usage after a model response of the turn:
// the turn's tokens are the thread's total less what it was before the turn.
func (h *history) tokens(turnID string, total, last int64) {
	t := h.turn(turnID)
	if t == nil {
		return
	}
	if h.tokenBase == nil {
		h.tokenBase = map[string]int64{}
	}
	base, ok := h.tokenBase[turnID]
	if !ok {
		base = total - last
		h.tokenBase[turnID] = base
	}
	t.Tokens = max(total-base, 0)
}

// ended records how a turn ended.
func (h *history) ended(turnID, status, errMsg string) {
	t := h.turn(turnID)
	if t == nil {
		return
	}
	switch status {
	case TurnCompleted, TurnFailed, TurnInterrupted:
		t.Status = status
	default:
		t.Status = TurnFailed
		errMsg = "codex ended the turn as " + status + ": " + errMsg
	}
	if errMsg != "" {
		t.Error = capped(errMsg, true, messageBytes)
	}
}

// lost ends every working turn: codex exited, and will never say how they
// ended.
func (h *history) lost() bool {
	changed := false
	for i := range h.Turns {
		if t := &h.Turns[i]; t.Status == TurnWorking {
			t.Status, t.Error = TurnInterrupted, "codex exited before the turn ended"
			changed = true
		}
	}
	return changed
}

// snapshot is a deep copy of the history, for readers outside the lock.
func (h *history) snapshot() Activity {
	a := h.Activity
	a.Turns = slices.Clone(a.Turns)
	for i, t := range a.Turns {
		a.Turns[i].Messages = slices.Clone(t.Messages)
		a.Turns[i].Commands = slices.Clone(t.Commands)
		a.Turns[i].Files = slices.Clone(t.Files)
	}
	return a
}
