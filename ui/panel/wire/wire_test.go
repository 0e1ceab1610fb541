package wire

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"codexgate/approvals"
)

func TestReaderRefusesWhatItMust(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, input string
		want        error // nil: decodes
	}{
		{"request", `{"id":1,"op":"answer","card":"a-1","revision":2,"decision":"deny"}` + "\n", nil},
		{"too long", `{"id":1,"op":"task","prompt":"` + strings.Repeat("x", 200) + `"}` + "\n", ErrTooLong},
		{"unknown field", `{"id":1,"op":"answer","by":"hotkey"}` + "\n", errDecode},
		{"not JSON", "allow\n", errDecode},
		{"cut short", `{"id":1`, io.ErrUnexpectedEOF},
		{"empty", "", io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req Request
			err := NewReader(strings.NewReader(tc.input), 128).Read(&req)
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("error %v", err)
			case tc.want == errDecode && (err == nil || !strings.Contains(err.Error(), "decode")):
				t.Errorf("error %v, want a decode error", err)
			case tc.want != nil && tc.want != errDecode && !errors.Is(err, tc.want):
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

var errDecode = errors.New("decode")

// TestClientCalls: a call gets its own reply, a refusal is an error, and a
// closed channel fails every call instead of leaving it waiting.
func TestClientCalls(t *testing.T) {
	t.Parallel()
	panelEnd, mainEnd := net.Pipe()
	c := NewClient(panelEnd)
	var states []State
	done := make(chan error)
	go func() { done <- c.Run(func(s State) { states = append(states, s) }, func(Show) {}) }()
	go func() { // the main process: a state, then replies
		w, r := NewWriter(mainEnd), NewReader(mainEnd, MaxRequest)
		w.Write(Update{State: &State{Cards: []approvals.Card{{ID: "a-1"}}}})
		for {
			var req Request
			if r.Read(&req) != nil {
				return
			}
			if req.Op == OpAnswer {
				w.Write(Update{Reply: &Reply{ID: req.ID, Error: "no"}})
				mainEnd.Close()
				return
			}
			w.Write(Update{Reply: &Reply{ID: req.ID, Text: "turn-" + req.Prompt}})
		}
	}()
	if reply, err := c.Call(Request{Op: OpTask, Prompt: "1"}); err != nil || reply.Text != "turn-1" {
		t.Errorf("task: %+v %v", reply, err)
	}
	if _, err := c.Call(Request{Op: OpAnswer}); err == nil || err.Error() != "no" {
		t.Errorf("refused answer: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	if _, err := c.Call(Request{Op: OpReady}); !errors.Is(err, ErrClosed) {
		t.Errorf("call after close: %v", err)
	}
	if len(states) != 1 || states[0].Cards[0].ID != "a-1" {
		t.Errorf("states %+v", states)
	}
}
