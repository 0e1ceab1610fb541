// Package codextest runs the pinned real codex in tests: a fake OpenAI
// Responses endpoint on loopback that scripts the model, an isolated
// CODEX_HOME, and the protocol schema every client message is checked against.
package codextest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Step is one model response of a scenario: a tool call, calls made
// together (Parallel), or a final message.
type Step struct {
	// Calls, when set, are tool calls made in one response.
	Calls []Step
	// Tool is "exec_command", "apply_patch", "request_permissions", ...;
	// empty for a final assistant message.
	Tool string
	// Args are the function-call arguments (encoded as a JSON string, as the
	// Responses API does). For apply_patch, Input is sent instead.
	Args  map[string]any
	Input string
	Text  string // the final message, when Tool is empty
}

// Exec is a step that runs cmd; escalated asks to run it outside the sandbox.
func Exec(cmd string, escalated bool) Step {
	args := map[string]any{"cmd": cmd, "yield_time_ms": 10000}
	if escalated {
		args["sandbox_permissions"] = "require_escalated"
		args["justification"] = "The test needs this to run outside the sandbox."
	}
	return Step{Tool: "exec_command", Args: args}
}

// Patch is an apply_patch step.
func Patch(patch string) Step { return Step{Tool: "apply_patch", Input: patch} }

// Parallel makes several tool calls in one response.
func Parallel(calls ...Step) Step { return Step{Calls: calls} }

// calls is how many tool calls the step makes.
func (s Step) calls() int {
	switch {
	case s.Calls != nil:
		return len(s.Calls)
	case s.Tool != "":
		return 1
	}
	return 0
}

// Say ends the turn with a message.
func Say(text string) Step { return Step{Text: text} }

// Responses is a fake Responses endpoint. A request whose input already
// holds the calls of steps 0..k-1 gets step k; past the end it says "done".
type Responses struct {
	URL string // base URL, ending in /v1

	mu       sync.Mutex // protects requests
	steps    []Step
	requests []json.RawMessage
}

// NewResponses serves steps on 127.0.0.1 until the test ends.
func NewResponses(t testing.TB, steps ...Step) *Responses {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	r := &Responses{URL: "http://" + ln.Addr().String() + "/v1", steps: steps}
	srv := &http.Server{Handler: r}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

// Requests are the bodies the model was sent, in order.
func (r *Responses) Requests() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]json.RawMessage(nil), r.requests...)
}

func (r *Responses) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/responses") {
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in struct {
		Input []struct {
			Type string `json:"type"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	made := 0
	for _, item := range in.Input {
		if item.Type == "function_call" || item.Type == "custom_tool_call" {
			made++
		}
	}
	r.mu.Lock()
	r.requests = append(r.requests, body)
	step := Say("done")
	for k, calls := 0, 0; k < len(r.steps); k++ {
		if calls == made {
			step = r.steps[k]
			break
		}
		calls += r.steps[k].calls()
	}
	n := len(r.requests)
	r.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	respID := fmt.Sprintf("resp_%d", n)
	sse(w, "response.created", map[string]any{"response": map[string]any{"id": respID}})
	items := step.Calls
	if items == nil {
		items = []Step{step}
	}
	for i, s := range items {
		sse(w, "response.output_item.done", map[string]any{"output_index": i, "item": outputItem(s, fmt.Sprintf("%d_%d", n, i))})
	}
	sse(w, "response.completed", map[string]any{"response": map[string]any{
		"id": respID,
		"usage": map[string]any{
			"input_tokens": 10, "input_tokens_details": nil,
			"output_tokens": 5, "output_tokens_details": nil, "total_tokens": 15,
		},
	}})
}

func outputItem(s Step, id string) map[string]any {
	callID := "call_" + id
	switch {
	case s.Tool == "apply_patch":
		return map[string]any{"type": "custom_tool_call", "id": "ctc_" + callID, "call_id": callID, "name": s.Tool, "input": s.Input}
	case s.Tool != "":
		args, _ := json.Marshal(s.Args)
		return map[string]any{"type": "function_call", "id": "fc_" + callID, "call_id": callID, "name": s.Tool, "arguments": string(args)}
	}
	return map[string]any{
		"type": "message", "role": "assistant", "id": "msg_" + callID,
		"content": []any{map[string]any{"type": "output_text", "text": s.Text}},
	}
}

func sse(w io.Writer, event string, data map[string]any) {
	data["type"] = event
	raw, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, raw)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
