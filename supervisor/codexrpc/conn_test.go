package codexrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// peer is the server side of a connection under test.
type peer struct {
	t    *testing.T
	in   chan []byte // lines the client wrote
	out  io.WriteCloser
	conn *Conn
	h    *handler
	done chan error
}

type handler struct {
	mu     sync.Mutex
	notes  []string
	reqs   chan *Request
	policy func(*Request)
}

func (h *handler) Notification(method string, _ json.RawMessage) {
	h.mu.Lock()
	h.notes = append(h.notes, method)
	h.mu.Unlock()
}

func (h *handler) Request(r *Request) {
	if h.policy != nil {
		h.policy(r)
		return
	}
	h.reqs <- r
}

func (h *handler) notifications() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.notes...)
}

func newPeer(t *testing.T) *peer {
	cr, pw := io.Pipe() // peer -> client
	pr, cw := io.Pipe() // client -> peer
	h := &handler{reqs: make(chan *Request, 10)}
	p := &peer{t: t, in: make(chan []byte, 100), out: pw, h: h, done: make(chan error, 1)}
	p.conn = New(cr, cw, h, slog.New(slog.DiscardHandler))
	go func() { p.done <- p.conn.Run() }()
	go func() {
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				close(p.in)
				return
			}
			p.in <- line
		}
	}()
	t.Cleanup(func() { pw.Close(); pr.Close() })
	return p
}

func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.out, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

func (p *peer) read() map[string]json.RawMessage {
	p.t.Helper()
	var line []byte
	select {
	case line = <-p.in:
	case <-time.After(5 * time.Second):
		p.t.Fatal("the client wrote nothing")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		p.t.Fatalf("client wrote %q: %v", line, err)
	}
	return m
}

func TestCallMatchesResponsesByID(t *testing.T) {
	p := newPeer(t)
	type result struct {
		got string
		err error
	}
	call := func(method string) chan result {
		done := make(chan result, 1)
		go func() {
			var out struct{ Echo string }
			err := p.conn.Call(context.Background(), method, map[string]string{"x": method}, &out)
			done <- result{out.Echo, err}
		}()
		return done
	}
	firstDone := call("first")
	first := p.read()
	secondDone := call("second")
	second := p.read()
	// Answer out of order; the second gets an error.
	p.send(`{"id":` + string(second["id"]) + `,"error":{"code":-32600,"message":"thread not found"}}`)
	p.send(`{"id":` + string(first["id"]) + `,"result":{"echo":"one"}}`)
	got := []result{<-secondDone, <-firstDone}
	var rpcErr *Error
	if got[0].err == nil || !errors.As(got[0].err, &rpcErr) || rpcErr.Code != -32600 || !strings.Contains(got[0].err.Error(), "second") {
		t.Errorf("second call: %v", got[0].err)
	}
	if got[1].err != nil || got[1].got != "one" {
		t.Errorf("first call: %+v", got[1])
	}
	if _, has := first["jsonrpc"]; has {
		t.Error("the client sent a jsonrpc member codex does not use")
	}
}

func TestCallTimesOutAndFailsWhenClosed(t *testing.T) {
	p := newPeer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := p.conn.Call(ctx, "slow", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "slow: no response") {
		t.Errorf("timeout: %v", err)
	}
	p.read()
	errs := make(chan error)
	go func() { errs <- p.conn.Call(context.Background(), "pending", nil, nil) }()
	p.read()
	p.out.Close()
	if err := <-errs; !errors.Is(err, ErrClosed) {
		t.Errorf("call pending at close: %v", err)
	}
	if err := <-p.done; !errors.Is(err, io.EOF) {
		t.Errorf("Run = %v", err)
	}
	if err := p.conn.Call(context.Background(), "after", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after close: %v", err)
	}
}

func TestServerRequestsAreAnsweredExactlyOnce(t *testing.T) {
	p := newPeer(t)
	p.send(`{"id":0,"method":"item/commandExecution/requestApproval","params":{"itemId":"a"}}`)
	p.send(`{"id":"s-1","method":"other","params":{}}`)
	r0, r1 := <-p.h.reqs, <-p.h.reqs
	if r0.Key() != "0" || r1.Key() != `"s-1"` || len(p.conn.Open()) != 2 {
		t.Fatalf("requests %q %q, open %d", r0.Key(), r1.Key(), len(p.conn.Open()))
	}
	if err := r1.ReplyError(CodeMethodNotFound, "no"); err != nil {
		t.Fatal(err)
	}
	if m := p.read(); string(m["id"]) != `"s-1"` || !strings.Contains(string(m["error"]), "-32601") {
		t.Errorf("error reply = %v", m)
	}
	if err := r0.Reply(map[string]string{"decision": "decline"}); err != nil {
		t.Fatal(err)
	}
	if m := p.read(); string(m["id"]) != "0" || string(m["result"]) != `{"decision":"decline"}` {
		t.Errorf("reply = %v", m)
	}
	if err := r0.Reply(map[string]string{"decision": "accept"}); !errors.Is(err, ErrAlreadyReplied) {
		t.Errorf("second reply: %v", err)
	}
	if len(p.conn.Open()) != 0 {
		t.Error("answered requests are still open")
	}
	// A request whose id is already open is skipped, not a second handle on it.
	p.send(`{"id":5,"method":"m","params":{}}`)
	r5 := <-p.h.reqs
	p.send(`{"id":5,"method":"m","params":{}}`)
	p.send(`{"method":"sync"}`)
	waitFor(t, func() bool { return len(p.h.notifications()) == 1 })
	if len(p.h.reqs) != 0 {
		t.Error("a duplicate id was handed on")
	}
	p.out.Close()
	<-p.done
	if err := r5.Reply(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("reply after close: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBadInputIsSkipped(t *testing.T) {
	p := newPeer(t)
	for _, line := range []string{
		`{not json`,
		`[1,2,3]`,
		`{}`,
		`{"params":{}}`,
		`{"id":77,"result":{}}`,       // a response to nothing
		`{"id":{"x":1},"method":"m"}`, // an id that is no RequestId
		`{"id":1.5,"method":"m"}`,
		`"string"`,
		``,
		`{"method":"huge","params":"` + strings.Repeat("x", MaxLineBytes) + `"}`,
	} {
		p.send(line)
	}
	p.send(`{"method":"after","params":{}}`)
	waitFor(t, func() bool { return len(p.h.notifications()) > 0 })
	if got := p.h.notifications(); len(got) != 1 || got[0] != "after" {
		t.Errorf("notifications = %q", got)
	}
	if len(p.h.reqs) != 0 {
		t.Error("a malformed request was handed on")
	}
}

func TestNotifyOmitsIDAndParams(t *testing.T) {
	p := newPeer(t)
	p.conn.Notify("initialized", nil)
	if m := p.read(); len(m) != 1 || string(m["method"]) != `"initialized"` {
		t.Errorf("notification = %v", m)
	}
}

// FuzzDispatch feeds arbitrary lines to the read loop: it must never panic,
// and whatever it hands on as a request has a valid id.
func FuzzDispatch(f *testing.F) {
	for _, s := range []string{
		`{"id":0,"method":"item/commandExecution/requestApproval","params":{"command":"rm"}}`,
		`{"method":"item/started","params":{"item":{"type":"fileChange"}},"emittedAtMs":1}`,
		`{"id":3,"result":{"thread":{"id":"t"}}}`,
		`{"id":"x","error":{"code":1,"message":"m"}}`,
		`{"id":null,"method":"m"}`,
		"{\"id\":1e400,\"method\":\"m\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := &handler{policy: func(r *Request) {
			if !validID(r.ID) {
				t.Errorf("request with invalid id %q handed on", r.ID)
			}
			r.ReplyError(CodeDenied, "fuzz")
		}}
		in := strings.NewReader(string(data) + "\n")
		c := New(in, io.Discard, h, slog.New(slog.DiscardHandler))
		c.Run()
	})
}

func TestAServerThatStopsReadingEndsTheConnection(t *testing.T) {
	inR, inW, err := os.Pipe() // the server's stdin, which it never reads
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer inW.Close()
	outR, outW := io.Pipe()
	h := &handler{reqs: make(chan *Request, 1)}
	c := New(outR, inW, h, slog.New(slog.DiscardHandler))
	c.WriteTimeout = 100 * time.Millisecond
	go c.Run()
	defer outW.Close()
	outW.Write([]byte(`{"id":1,"method":"item/commandExecution/requestApproval","params":{}}` + "\n"))
	req := <-h.reqs
	// More than the pipe holds: the write misses its deadline.
	err = c.Notify("big", strings.Repeat("x", 1<<20))
	if !errors.Is(err, ErrWriteTimeout) || !errors.Is(c.Err(), ErrWriteTimeout) {
		t.Fatalf("write to a server that reads nothing: %v (conn: %v)", err, c.Err())
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the connection did not end")
	}
	if err := req.Reply(map[string]string{"decision": "accept"}); !errors.Is(err, ErrClosed) {
		t.Errorf("reply after the timeout: %v, want ErrClosed", err)
	}
	if err := c.Call(context.Background(), "x", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after the timeout: %v, want ErrClosed", err)
	}
}
