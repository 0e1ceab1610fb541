// Package wire is the private channel between Codexgate and its panel
// process: a socketpair the main process creates and passes to the panel as
// file descriptor 3, carrying newline-delimited JSON.
//
// The main process pushes Updates: a whole State (cards, oldest first,
// worker statuses and their activity) whenever it changes, Show to bring a card or a New task
// form to the front, and a Reply to each Request. The panel sends Requests:
// "ready" once its first frame is painted, "answer", "full" (the whole text
// of a card), "shown" (that text was put on screen), "task", and "pause",
// "resume", "restart" for a worker. The main process treats every Request
// as coming from an untrusted client and checks it against the queue's
// rules.
//
// It imports no Fyne: both processes use it.
package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"codexgate/approvals"
	"codexgate/supervisor"
)

// FD is the panel's file descriptor of the channel (ExtraFiles[0]).
const FD = 3

// Size caps of one line: a request carries at most a prompt or a form; an
// update can carry the whole text of a card.
const (
	MaxRequest = 1 << 20
	MaxUpdate  = 64 << 20
)

// Update is one message from the main process; exactly one field is set.
type Update struct {
	State *State `json:"state,omitempty"`
	Show  *Show  `json:"show,omitempty"`
	Reply *Reply `json:"reply,omitempty"`
}

// State is everything the panel shows.
type State struct {
	Cards   []approvals.Card    `json:"cards"`
	Workers []supervisor.Status `json:"workers"`
	// Activity is each worker's last turns, in the order of Workers.
	Activity []supervisor.Activity `json:"activity,omitempty"`
	// SettleDelay holds allow buttons back after a card is put on screen.
	SettleDelay time.Duration `json:"settleDelay"`
}

// Show brings the panel to the front at a card ("": keep the current one)
// or with the New task form of a worker.
type Show struct {
	Card string `json:"card,omitempty"`
	Task string `json:"task,omitempty"`
}

// Reply answers the Request with the same ID.
type Reply struct {
	ID    uint64 `json:"id"`
	Error string `json:"error,omitempty"`
	// Text is the whole text of a card (full), the turn id (task), or what
	// was sent (answer).
	Text string `json:"text,omitempty"`
	// Card is the card the text belongs to (full).
	Card *approvals.Card `json:"card,omitempty"`
}

// Ops of a Request.
const (
	OpReady   = "ready"
	OpAnswer  = "answer"
	OpFull    = "full"
	OpShown   = "shown"
	OpTask    = "task"
	OpPause   = "pause"
	OpResume  = "resume"
	OpRestart = "restart"
)

// Request is one message from the panel.
type Request struct {
	ID       uint64            `json:"id"`
	Op       string            `json:"op"`
	Card     string            `json:"card,omitempty"`
	Revision int               `json:"revision,omitempty"`
	Decision string            `json:"decision,omitempty"`
	Values   map[string]string `json:"values,omitempty"`
	Worker   string            `json:"worker,omitempty"`
	Prompt   string            `json:"prompt,omitempty"`
}

// ErrTooLong is a line over the cap; the channel is not to be trusted after it.
var ErrTooLong = errors.New("message too long")

// Reader reads one JSON value a line. It is read by one goroutine.
type Reader struct {
	r   *bufio.Reader
	max int
	// lenient accepts fields it does not know: the panel reading a newer
	// codexgate. Codexgate reading the panel is strict.
	lenient bool
}

// NewReader reads lines of at most max bytes from r, and refuses a field it
// does not know.
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Read decodes the next line into v.
func (r *Reader) Read(v any) error {
	var line []byte
	for {
		chunk, err := r.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > r.max {
			return ErrTooLong
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if err == io.EOF && len(line) > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if !r.lenient {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode message: %w", err)
	}
	return nil
}

// Writer writes one JSON value a line; it is safe for concurrent use.
type Writer struct {
	mu sync.Mutex // protects w; one line at a time
	w  io.Writer
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write sends v as one line.
func (w *Writer) Write(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("send message: %w", err)
	}
	return nil
}

// labelBytes caps a card's one-line label.
const labelBytes = 80

// CardLabel is a card in one short escaped line, as the tray menu and the
// panel's list show it: worker, kind, and the first line of the command or
// the file names.
func CardLabel(c approvals.Card) string {
	return c.Worker + " · " + string(c.Kind) + ": " + c.Summary(labelBytes)
}

// WorkerLine is a worker in one short escaped line, as the tray menu and the
// panel show it: its state and what it is doing, "api — working: <the first
// line of the agent's last message>", or how its last turn ended. The
// worker's last error is not in it: each view shows that apart.
func WorkerLine(st supervisor.Status, a supervisor.Activity) string {
	line := st.Name + " — " + string(st.State)
	last, ok := a.Last()
	switch {
	case ok && last.Status == supervisor.TurnWorking && (st.State == supervisor.StateWorking || st.State == supervisor.StateWaiting):
		if msg := last.LastMessage(); msg != "" {
			line += ": " + approvals.FirstLine(msg, labelBytes)
		}
	case ok && st.State == supervisor.StateIdle && last.Status != supervisor.TurnWorking:
		line += " · last turn " + last.Status
		if why := TurnOutcome(last); why != "" {
			line += ": " + approvals.FirstLine(why, labelBytes)
		}
	}
	return line
}

// ActivityOf is the activity of the named worker in all; none when it has
// none.
func ActivityOf(all []supervisor.Activity, name string) supervisor.Activity {
	if i := slices.IndexFunc(all, func(a supervisor.Activity) bool { return a.Worker == name }); i >= 0 {
		return all[i]
	}
	return supervisor.Activity{Worker: name}
}

// TurnOutcome is what a turn came to, escaped: codex's error for a failed
// or interrupted turn, else the agent's last message.
func TurnOutcome(t supervisor.Turn) string {
	if t.Error != "" {
		return t.Error
	}
	return t.LastMessage()
}
