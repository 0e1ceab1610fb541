package codextest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FakeEnv turns a test binary into a fake codex app-server when set to a
// directory, where the fake logs what it received. Call RunFakeIfAsked from
// TestMain, and start the test binary itself as the worker's codex.
const FakeEnv = "CODEXGATE_FAKE_CODEX"

// FakeIgnoreTerm makes the fake ignore SIGTERM, so that only KILL ends it.
const FakeIgnoreTerm = "CODEXGATE_FAKE_IGNORE_TERM"

// RunFakeIfAsked runs the fake app-server on stdio and exits, when FakeEnv is set.
func RunFakeIfAsked() {
	dir := os.Getenv(FakeEnv)
	if dir == "" {
		return
	}
	if os.Getenv(FakeIgnoreTerm) != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	f := &fake{dir: dir, out: os.Stdout, pending: map[string]chan json.RawMessage{}, methods: map[string]string{}, stall: make(chan struct{})}
	os.Exit(f.run(os.Stdin))
}

// FakeRecord is one line of the fake's log.
type FakeRecord struct {
	PID     int             `json:"pid"`
	Recv    json.RawMessage `json:"recv,omitempty"`
	Invalid string          `json:"invalid,omitempty"`
	Event   string          `json:"event,omitempty"`
}

// FakeLog reads what the fakes that logged to dir received and did.
func FakeLog(t testing.TB, dir string) []FakeRecord {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []FakeRecord
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		var r FakeRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("fake log: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// fake is the app-server side of one connection, in the message order the
// real 0.171.0 follows (PROTOCOL.md).
type fake struct {
	dir string
	out io.Writer

	mu       sync.Mutex // protects out, pending, methods, nextID, threadID, turnID, interrupt
	pending  map[string]chan json.RawMessage
	methods  map[string]string // server request id -> method
	nextID   int
	threadID string
	turnID   string
	turns    int
	cancel   chan struct{}
	stall    chan struct{} // closed when the fake stops reading stdin for good
	stalled  sync.Once
}

func (f *fake) log(r FakeRecord) {
	r.PID = os.Getpid()
	line, _ := json.Marshal(r)
	lf, err := os.OpenFile(filepath.Join(f.dir, "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	lf.Write(append(line, '\n'))
	lf.Close()
}

func (f *fake) send(v any) {
	line, _ := json.Marshal(v)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.out.Write(append(line, '\n'))
}

func (f *fake) notify(method string, params any) {
	f.send(map[string]any{"method": method, "params": params, "emittedAtMs": time.Now().UnixMilli()})
}

func (f *fake) run(in io.Reader) int {
	schema, err := LoadSchema()
	if err != nil {
		f.log(FakeRecord{Invalid: "schema: " + err.Error()})
		return 2
	}
	r := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0 // stdin closed: codex exits too
		}
		select {
		case <-f.stall:
			f.log(FakeRecord{Event: "stalled"})
			time.Sleep(time.Hour) // reads nothing more, until killed
		default:
		}
		f.log(FakeRecord{Recv: json.RawMessage(strings.TrimSpace(string(line)))})
		answering := func(id json.RawMessage) string {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.methods[string(id)]
		}
		if err := schema.ValidateClientMessage(line, answering); err != nil {
			f.log(FakeRecord{Invalid: err.Error()})
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		if m.Method == "" {
			f.mu.Lock()
			ch := f.pending[string(m.ID)]
			delete(f.pending, string(m.ID))
			f.mu.Unlock()
			if ch != nil {
				if m.Error != nil {
					ch <- json.RawMessage(`{"error":` + string(m.Error) + `}`)
				} else {
					ch <- m.Result
				}
			}
			continue
		}
		f.handle(m.ID, m.Method, m.Params)
	}
}

func (f *fake) reply(id json.RawMessage, result any) {
	f.send(map[string]any{"id": id, "result": result})
}

func (f *fake) thread() map[string]any {
	return map[string]any{"id": f.threadID, "status": map[string]any{"type": "idle"}, "turns": []any{}, "cwd": "/w"}
}

func (f *fake) handle(id json.RawMessage, method string, params json.RawMessage) {
	switch method {
	case "initialize":
		f.reply(id, map[string]any{"userAgent": "fake/0.171.0", "codexHome": f.dir, "platformFamily": "unix", "platformOs": "linux"})
	case "initialized":
	case "thread/start":
		f.threadID = fmt.Sprintf("thread-%d-%d", os.Getpid(), time.Now().UnixNano())
		os.WriteFile(filepath.Join(f.dir, "threads"), []byte(f.threadID+"\n"), 0o600)
		f.reply(id, map[string]any{"thread": f.thread()})
		f.notify("thread/started", map[string]any{"thread": f.thread()})
	case "thread/resume":
		var p struct {
			ThreadID string `json:"threadId"`
		}
		json.Unmarshal(params, &p)
		known, _ := os.ReadFile(filepath.Join(f.dir, "threads"))
		if !strings.Contains(string(known), p.ThreadID+"\n") {
			f.send(map[string]any{"id": id, "error": map[string]any{"code": -32600, "message": "thread not found: " + p.ThreadID}})
			return
		}
		f.threadID = p.ThreadID
		f.log(FakeRecord{Event: "resumed " + p.ThreadID})
		f.reply(id, map[string]any{"thread": f.thread()})
	case "turn/start":
		var p struct {
			Input []struct {
				Text string `json:"text"`
			} `json:"input"`
		}
		json.Unmarshal(params, &p)
		f.mu.Lock()
		f.turns++
		f.turnID = fmt.Sprintf("turn-%d", f.turns)
		f.cancel = make(chan struct{})
		turn, cancel := f.turnID, f.cancel
		f.mu.Unlock()
		f.reply(id, map[string]any{"turn": map[string]any{"id": turn, "status": "inProgress", "items": []any{}, "error": nil}})
		prompt := ""
		if len(p.Input) > 0 {
			prompt = p.Input[0].Text
		}
		go f.runTurn(turn, prompt, cancel)
	case "turn/interrupt":
		f.reply(id, map[string]any{})
		f.mu.Lock()
		if f.cancel != nil {
			close(f.cancel)
			f.cancel = nil
		}
		f.mu.Unlock()
	default:
		if id != nil {
			f.send(map[string]any{"id": id, "error": map[string]any{"code": -32601, "message": "fake: no " + method}})
		}
	}
}

// request sends a server request and waits for its reply (nil when the turn
// was interrupted first).
func (f *fake) request(method string, params map[string]any, cancel chan struct{}) (json.RawMessage, string) {
	f.mu.Lock()
	id := strconv.Itoa(f.nextID)
	f.nextID++
	ch := make(chan json.RawMessage, 1)
	f.pending[id] = ch
	f.methods[id] = method
	f.mu.Unlock()
	f.send(map[string]any{"id": json.RawMessage(id), "method": method, "params": params})
	select {
	case res := <-ch:
		f.log(FakeRecord{Event: "reply " + method + " " + string(res)})
		return res, id
	case <-cancel:
		return nil, id
	}
}

func (f *fake) status(active bool, flags ...string) {
	st := map[string]any{"type": "idle"}
	if active {
		st = map[string]any{"type": "active", "activeFlags": append([]string{}, flags...)}
	}
	f.notify("thread/status/changed", map[string]any{"threadId": f.threadID, "status": st})
}

// runTurn plays the steps of a prompt, separated by ';': "exec CMD",
// "patch PATH", "network HOST", "unknown", "legacy", "garbage", "crash",
// "grandchild", "hang", "stall" (stop reading stdin: the line being read
// is the last).
func (f *fake) runTurn(turn, prompt string, cancel chan struct{}) {
	f.notify("turn/started", map[string]any{"threadId": f.threadID, "turn": map[string]any{"id": turn, "status": "inProgress", "items": []any{}}})
	f.status(true)
	ids := map[string]any{"threadId": f.threadID, "turnId": turn}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range ids {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	status := "completed"
	for n, step := range strings.Split(prompt, ";") {
		verb, arg, _ := strings.Cut(strings.TrimSpace(step), " ")
		item := fmt.Sprintf("call_%s_%d", turn, n)
		var res json.RawMessage
		var reqID string
		switch verb {
		case "exec", "network":
			f.status(true, "waitingOnApproval")
			f.notify("item/started", with(map[string]any{"item": map[string]any{"type": "commandExecution", "id": item, "command": arg, "cwd": "/w", "status": "inProgress", "commandActions": []any{}}}))
			p := with(map[string]any{"itemId": item, "kind": "command", "startedAtMs": 1, "command": "/bin/bash -lc '" + arg + "'", "cwd": "/w", "reason": "fake",
				"availableDecisions": []any{"accept", "acceptForSession", "decline", "cancel"}})
			if verb == "network" {
				p["command"] = "network-access http://" + arg + ":80"
				p["networkApprovalContext"] = map[string]any{"host": arg, "protocol": "http"}
				p["itemId"] = "network#http#" + arg + "#80"
			}
			res, reqID = f.request("item/commandExecution/requestApproval", p, cancel)
		case "patch":
			f.notify("item/started", with(map[string]any{"item": map[string]any{"type": "fileChange", "id": item, "status": "inProgress",
				"changes": []any{map[string]any{"path": arg, "kind": map[string]any{"type": "add"}, "diff": "hello\n"}}}}))
			f.status(true, "waitingOnApproval")
			res, reqID = f.request("item/fileChange/requestApproval", with(map[string]any{"itemId": item, "startedAtMs": 1, "reason": nil, "grantRoot": nil}), cancel)
		case "unknown":
			res, reqID = f.request("item/tool/call", with(map[string]any{"callId": item, "tool": "x", "arguments": map[string]any{}}), cancel)
		case "legacy":
			res, reqID = f.request("execCommandApproval", map[string]any{"conversationId": f.threadID, "callId": item, "command": []string{"rm", "x"}, "cwd": "/w", "parsedCmd": []any{}}, cancel)
		case "garbage":
			f.mu.Lock()
			f.out.Write([]byte("{not json\n"))
			f.out.Write([]byte(`{"id":999,"result":{}}` + "\n"))
			f.out.Write([]byte(`{"params":{}}` + "\n"))
			f.out.Write(append(append([]byte(`{"method":"huge","params":"`), strings.Repeat("x", 17<<20)...), '"', '}', '\n'))
			f.mu.Unlock()
			f.notify("some/unknown/notification", map[string]any{})
			continue
		case "crash":
			f.log(FakeRecord{Event: "crash"})
			os.Exit(3)
		case "grandchild":
			cmd := exec.Command("sleep", "300")
			if cmd.Start() == nil {
				os.WriteFile(filepath.Join(f.dir, "grandchild"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
			}
			continue
		case "hang":
			<-cancel
			res = nil
		case "stall":
			f.stalled.Do(func() { close(f.stall) })
			continue
		default:
			continue
		}
		if res == nil { // interrupted
			f.status(false)
			f.notify("turn/completed", map[string]any{"threadId": f.threadID, "turn": map[string]any{"id": turn, "status": "interrupted", "items": []any{}}})
			if reqID != "" {
				f.notify("serverRequest/resolved", map[string]any{"threadId": f.threadID, "requestId": json.RawMessage(reqID)})
			}
			return
		}
		f.notify("serverRequest/resolved", map[string]any{"threadId": f.threadID, "requestId": json.RawMessage(reqID)})
		f.status(true)
		itemStatus := "completed"
		if strings.Contains(string(res), "decline") || strings.Contains(string(res), "cancel") || strings.Contains(string(res), "error") || strings.Contains(string(res), "denied") {
			itemStatus = "declined"
		}
		if strings.Contains(string(res), "cancel") {
			status = "interrupted"
		}
		f.notify("item/completed", with(map[string]any{"item": map[string]any{"type": "commandExecution", "id": item, "status": itemStatus}}))
		if status == "interrupted" {
			break
		}
	}
	f.status(false)
	f.notify("turn/completed", map[string]any{"threadId": f.threadID, "turn": map[string]any{"id": turn, "status": status, "items": []any{}}})
}
