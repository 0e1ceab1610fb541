package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"codexgate/approvals"
)

// feeder is a worker's connection handler fed notifications by hand, as
// its read loop would.
type feeder struct {
	w      *Worker
	h      *connHandler
	pushed []Activity
}

func newFeeder(t *testing.T) *feeder {
	f := &feeder{}
	opts := &Options{Approver: newRecorder(), Log: testLog(t), OnActivity: func(a Activity) { f.pushed = append(f.pushed, a) }}
	f.w = newWorker(Spec{Name: "api"}, opts, nil)
	f.w.session, f.w.items = 7, map[string]trackedItem{}
	f.h = &connHandler{w: f.w, session: 7}
	go func() { // drain the approver's events
		for range opts.Approver.(*recorder).events {
		}
	}()
	t.Cleanup(func() { close(opts.Approver.(*recorder).events) })
	return f
}

func (f *feeder) send(method, params string) { f.h.Notification(method, json.RawMessage(params)) }

// The message shapes are codex's, as PROTOCOL.md records them.
const (
	turnStarted   = `{"threadId":"T","turn":{"id":"U","status":"inProgress","items":[]}}`
	cmdStarted    = `{"item":{"type":"commandExecution","id":"call_resp_0","command":"/bin/bash -lc 'go test ./... && echo done'","cwd":"/w","processId":null,"source":"agent","status":"inProgress","commandActions":[],"aggregatedOutput":null,"exitCode":null,"durationMs":null},"threadId":"T","turnId":"U","startedAtMs":1}`
	cmdCompleted  = `{"item":{"type":"commandExecution","id":"call_resp_0","processId":"92590","source":"unifiedExecStartup","status":"completed","aggregatedOutput":"done\n","exitCode":0,"durationMs":89},"threadId":"T","turnId":"U"}`
	fileStarted   = `{"item":{"type":"fileChange","id":"call_resp_1","changes":[{"path":"/w/new.txt","kind":{"type":"add"},"diff":"hello\n"}],"status":"inProgress"},"threadId":"T","turnId":"U","startedAtMs":1}`
	fileCompleted = `{"item":{"type":"fileChange","id":"call_resp_1","changes":[{"path":"/w/new.txt","kind":{"type":"add"},"diff":"hello\n"}],"status":"completed"},"threadId":"T","turnId":"U"}`
	said          = `{"item":{"type":"agentMessage","id":"msg_1","text":"Done: tests pass.\u001b[31m\u202e\nAdded new.txt.","phase":"final_answer"},"threadId":"T","turnId":"U"}`
	tokens1       = `{"threadId":"T","turnId":"U","tokenUsage":{"total":{"totalTokens":1500,"inputTokens":1400,"cachedInputTokens":0,"outputTokens":100,"reasoningOutputTokens":0},"last":{"totalTokens":500,"inputTokens":450,"cachedInputTokens":0,"outputTokens":50,"reasoningOutputTokens":0},"modelContextWindow":null}}`
	tokens2       = `{"threadId":"T","turnId":"U","tokenUsage":{"total":{"totalTokens":2100,"inputTokens":1900,"cachedInputTokens":0,"outputTokens":200,"reasoningOutputTokens":0},"last":{"totalTokens":600,"inputTokens":500,"cachedInputTokens":0,"outputTokens":100,"reasoningOutputTokens":0},"modelContextWindow":null}}`
	turnDone      = `{"threadId":"T","turn":{"id":"U","status":"completed","items":[],"error":null}}`
	turnFailed    = `{"threadId":"T","turn":{"id":"U","status":"failed","items":[],"error":{"message":"stream disconnected before completion\u001b[2J","codexErrorInfo":null,"additionalDetails":null}}}`
)

func TestHistoryFollowsATurn(t *testing.T) {
	f := newFeeder(t)
	f.send("turn/started", turnStarted)
	f.w.record(7, func(h *history) bool { h.prompt("U", "run the tests\u202e"); return true })
	f.send("item/started", cmdStarted)
	if last, _ := f.w.Activity().Last(); last.Status != TurnWorking || len(last.Commands) != 1 || last.Commands[0].Status != "inProgress" {
		t.Fatalf("while the command runs: %+v", last)
	}
	for _, m := range [][2]string{
		{"item/completed", cmdCompleted},
		{"item/started", fileStarted},
		{"item/completed", fileCompleted},
		{"item/completed", said},
		{"thread/tokenUsage/updated", tokens1},
		{"thread/tokenUsage/updated", tokens2},
		{"thread/tokenUsage/updated", tokens2}, // sent twice: counted once
		{"turn/completed", turnDone},
	} {
		f.send(m[0], m[1])
	}
	a := f.w.Activity()
	if len(a.Turns) != 1 || a.Worker != "api" {
		t.Fatalf("activity = %+v", a)
	}
	got := a.Turns[0]
	zero := 0
	want := Turn{
		ID: "U", Status: TurnCompleted, Prompt: `run the tests\u{202e}`,
		Messages: []string{"Done: tests pass.\\u{1b}[31m\\u{202e}\nAdded new.txt."},
		Commands: []Command{{ID: "call_resp_0", Command: "/bin/bash -lc 'go test ./... && echo done'", Status: "completed", ExitCode: &zero}},
		Files:    []FileChange{{ItemID: "call_resp_1", Path: "/w/new.txt", Kind: "add", Status: "completed"}},
		Tokens:   1100,
	}
	if fmt.Sprintf("%+v", derefExit(got)) != fmt.Sprintf("%+v", derefExit(want)) {
		t.Errorf("turn =\n%+v\nwant\n%+v", derefExit(got), derefExit(want))
	}
	if got.LastMessage() != want.Messages[0] {
		t.Errorf("last message %q", got.LastMessage())
	}
	if len(f.pushed) == 0 || f.pushed[len(f.pushed)-1].Seq != a.Seq || f.pushed[len(f.pushed)-1].Turns[0].Status != TurnCompleted {
		t.Errorf("the last push is not the history: %+v", f.pushed)
	}
}

// derefExit makes exit codes comparable by value in a printed turn.
func derefExit(t Turn) string {
	var codes []string
	for _, c := range t.Commands {
		if c.ExitCode != nil {
			codes = append(codes, fmt.Sprint(*c.ExitCode))
		}
	}
	t.Commands = nil
	return fmt.Sprintf("%+v exit=%v", t, codes)
}

func TestHistoryTellsFailuresAndLostTurns(t *testing.T) {
	f := newFeeder(t)
	f.send("turn/started", turnStarted)
	f.send("turn/completed", turnFailed)
	if last, _ := f.w.Activity().Last(); last.Status != TurnFailed || last.Error != `stream disconnected before completion\u{1b}[2J` {
		t.Errorf("failed turn = %+v", last)
	}
	f.send("turn/started", strings.ReplaceAll(turnStarted, `"U"`, `"V"`))
	f.w.transition(StateRestarting, running{}, nil) // codex exited mid-turn
	if last, _ := f.w.Activity().Last(); last.ID != "V" || last.Status != TurnInterrupted || last.Error == "" {
		t.Errorf("turn of an exited codex = %+v", last)
	}
	// A late message of the connection that is gone changes nothing.
	before := f.w.Activity().Seq
	f.send("item/completed", said)
	if f.w.Activity().Seq != before {
		t.Error("a message of an old connection changed the history")
	}
}

func TestHistoryIsBounded(t *testing.T) {
	f := newFeeder(t)
	for turn := range 8 {
		id := fmt.Sprintf("t%d", turn)
		f.send("turn/started", fmt.Sprintf(`{"threadId":"T","turn":{"id":%q,"status":"inProgress","items":[]}}`, id))
		f.w.record(7, func(h *history) bool { h.prompt(id, strings.Repeat("p", 10*promptBytes)); return true })
		for i := range 30 {
			text, _ := json.Marshal(strings.Repeat("\u202e", 3*messageBytes))
			f.send("item/completed", fmt.Sprintf(`{"item":{"type":"agentMessage","id":"m%d","text":%s},"threadId":"T","turnId":%q}`, i, text, id))
			f.send("item/started", fmt.Sprintf(`{"item":{"type":"commandExecution","id":"c%d","command":%q,"status":"inProgress"},"threadId":"T","turnId":%q}`, i, strings.Repeat("x", 4*lineBytes), id))
			f.send("item/started", fmt.Sprintf(`{"item":{"type":"fileChange","id":"f%d","changes":[{"path":"/w/%d","kind":{"type":"add"},"diff":""}],"status":"inProgress"},"threadId":"T","turnId":%q}`, i, i, id))
		}
	}
	a := f.w.Activity()
	if len(a.Turns) != historyTurns || a.Turns[0].ID != "t3" || a.Turns[historyTurns-1].ID != "t7" {
		t.Fatalf("kept turns %d, from %s", len(a.Turns), a.Turns[0].ID)
	}
	last := a.Turns[historyTurns-1]
	if len(last.Messages) != turnItems || len(last.Commands) != turnItems || len(last.Files) != turnItems || last.Omitted != 3*(30-turnItems) {
		t.Errorf("items kept: %d messages, %d commands, %d files, %d omitted", len(last.Messages), len(last.Commands), len(last.Files), last.Omitted)
	}
	if len(last.Prompt) > promptBytes || len(last.Commands[0].Command) > lineBytes {
		t.Errorf("prompt %d bytes, command %d bytes", len(last.Prompt), len(last.Commands[0].Command))
	}
	for _, m := range last.Messages {
		if len(m) > messageBytes || strings.Contains(m, "\u202e") || approvals.Escape(m, true) != m {
			t.Fatalf("a message of %d bytes is not capped and escaped", len(m))
		}
	}
}

func TestHistoryThroughTheAppServer(t *testing.T) {
	_, w, rec, _ := fakeWorker(t, nil)
	turn, err := w.StartTurn(context.Background(), "exec echo hi")
	if err != nil {
		t.Fatal(err)
	}
	req := rec.request(t)
	if last, _ := w.Activity().Last(); last.ID != turn || last.Prompt != "exec echo hi" || last.Status != TurnWorking ||
		len(last.Commands) != 1 || last.Commands[0].Command != "echo hi" {
		t.Errorf("while waiting: %+v", last)
	}
	if err := req.Reply(json.RawMessage(`{"decision":"accept"}`)); err != nil {
		t.Fatal(err)
	}
	rec.event(t, approvals.TurnCompleted)
	if last, _ := w.Activity().Last(); last.Status != TurnCompleted || last.Commands[0].Status != "completed" {
		t.Errorf("after the turn: %+v", last)
	}
}

// FuzzHistoryItem: whatever codex sends as an item or a usage update, the
// history stays bounded and escaped, and nothing panics.
func FuzzHistoryItem(f *testing.F) {
	for _, seed := range []string{cmdStarted, cmdCompleted, fileStarted, fileCompleted, said, `{"item":{"type":"fileChange","id":"x","changes":null}}`, `{"item":{"type":"commandExecution","id":"y","command":"\u001b[2J","exitCode":-1}}`} {
		var n struct {
			Item json.RawMessage `json:"item"`
		}
		json.Unmarshal([]byte(seed), &n)
		f.Add([]byte(n.Item), true, int64(10), int64(3))
	}
	f.Fuzz(func(t *testing.T, raw []byte, completed bool, total, last int64) {
		var h history
		for i := range 3 {
			turn := fmt.Sprint("t", i%2)
			h.item(turn, raw, completed)
			h.item(turn, raw, !completed)
			h.tokens(turn, total, last)
		}
		h.ended("t0", string(raw), string(raw))
		if len(h.Turns) > historyTurns {
			t.Fatalf("%d turns kept", len(h.Turns))
		}
		for _, tu := range h.Turns {
			if len(tu.Messages) > turnItems || len(tu.Commands) > turnItems || len(tu.Files) > turnItems || tu.Tokens < 0 {
				t.Fatalf("turn not bounded: %+v", tu)
			}
			texts := append([]string{tu.ID, tu.Status, tu.Prompt, tu.Error}, tu.Messages...)
			for _, c := range tu.Commands {
				texts = append(texts, c.ID, c.Command, c.Status)
			}
			for _, fc := range tu.Files {
				texts = append(texts, fc.ItemID, fc.Path, fc.Kind, fc.Status)
			}
			for _, s := range texts {
				if approvals.Escape(s, true) != s || len(s) > messageBytes {
					t.Fatalf("a text is not escaped and capped: %q", s)
				}
			}
		}
	})
}
