package codexrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The framing is hand-written rather than taken from a JSON-RPC library
// because codex speaks a dialect the common ones reject: it omits the
// "jsonrpc" member, its lines can be megabytes long (resume results, diffs),
// and a server request must be answered exactly once even when the person
// answering is minutes away, which the reader must never wait for.

// MaxLineBytes caps one incoming message. A longer line is skipped whole.
const MaxLineBytes = 16 << 20

// DefaultCallTimeout bounds a client request that has no deadline of its own.
const DefaultCallTimeout = 60 * time.Second

// DefaultWriteTimeout bounds one write to a server that can take deadlines.
const DefaultWriteTimeout = 10 * time.Second

// JSON-RPC error codes the client sends.
const (
	CodeMethodNotFound = -32601
	CodeInternal       = -32603
	// CodeDenied is the code of the error reply that stands for "no" when a
	// request cannot be answered any other way; codex treats every error reply
	// to an approval request as a denial.
	CodeDenied = -32000
)

var (
	// ErrClosed is returned once the connection has ended.
	ErrClosed = errors.New("connection closed")
	// ErrAlreadyReplied is returned by a second reply to one server request.
	ErrAlreadyReplied = errors.New("request already answered")
	// ErrWriteTimeout ends a connection whose server did not take a message
	// within the write timeout: a server that stops reading its input.
	ErrWriteTimeout = errors.New("the server did not read its input in time")
	errOversized    = errors.New("message too large")
)

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// message is every shape on the wire; which fields are set tells them apart.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Handler receives what the server sends. Both methods are called from the
// read loop, one message at a time, and must return promptly: a request is
// answered later through Request.Reply, never by blocking here.
type Handler interface {
	Notification(method string, params json.RawMessage)
	Request(req *Request)
}

// Request is one server-to-client request. It is answered exactly once.
type Request struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage

	conn    *Conn
	replied atomic.Bool
}

// Key is the request id as text, unique among the open requests of one connection.
func (r *Request) Key() string { return string(r.ID) }

// Reply sends result as the one answer to r.
func (r *Request) Reply(result any) error {
	raw, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("encode reply to %s: %w", r.Method, err)
	}
	return r.send(message{ID: r.ID, Result: raw})
}

// ReplyError answers r with a JSON-RPC error.
func (r *Request) ReplyError(code int, msg string) error {
	return r.send(message{ID: r.ID, Error: &Error{Code: code, Message: msg}})
}

func (r *Request) send(m message) error {
	c := r.conn
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if !r.replied.CompareAndSwap(false, true) {
		c.mu.Unlock()
		return ErrAlreadyReplied
	}
	delete(c.open, r.Key())
	c.mu.Unlock()
	return c.write(m)
}

// deadlineWriter is a writer whose writes can be bounded, such as a pipe.
type deadlineWriter interface {
	io.Writer
	SetWriteDeadline(time.Time) error
}

// Conn is one JSON-RPC connection to a codex app-server: newline-delimited
// JSON in both directions, one reader (Run) and one writer lock.
type Conn struct {
	r       *bufio.Reader
	w       io.Writer
	handler Handler
	log     *slog.Logger

	// WriteTimeout bounds each write when w can take deadlines (0: the
	// default). A write that misses it ends the connection, since part of
	// a line may have gone out. Set it before the first write.
	WriteTimeout time.Duration

	wmu sync.Mutex // serialises writes to w

	nextID atomic.Int64

	mu      sync.Mutex // protects pending, open, closed, err
	pending map[int64]chan message
	open    map[string]*Request
	closed  bool
	err     error // why the connection ended, when a write ended it
	done    chan struct{}

	lineBuf []byte
}

// New returns a connection that reads from r and writes to w. Run must be
// called to read.
func New(r io.Reader, w io.Writer, h Handler, log *slog.Logger) *Conn {
	return &Conn{
		r:       bufio.NewReaderSize(r, 64<<10),
		w:       w,
		handler: h,
		log:     log,
		pending: make(map[int64]chan message),
		open:    make(map[string]*Request),
		done:    make(chan struct{}),
	}
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why a write ended the connection, or nil.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Open returns the server requests not yet answered.
func (c *Conn) Open() []*Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	reqs := make([]*Request, 0, len(c.open))
	for _, r := range c.open {
		reqs = append(reqs, r)
	}
	return reqs
}

// Run reads and dispatches messages until the reader ends. It closes the
// connection before it returns: later calls and replies fail with ErrClosed.
func (c *Conn) Run() error {
	for {
		line, err := c.readLine()
		if errors.Is(err, errOversized) {
			c.log.Warn("skipped an oversized message", "limit", MaxLineBytes)
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.EOF
			}
			c.close()
			return err
		}
		c.dispatch(line)
	}
}

func (c *Conn) readLine() ([]byte, error) {
	chunk, err := c.r.ReadSlice('\n')
	if err == nil {
		return chunk, nil // the common case: the line fits the buffer, no copy
	}
	c.lineBuf = c.lineBuf[:0]
	oversized := false
	for {
		if !oversized {
			if len(c.lineBuf)+len(chunk) > MaxLineBytes {
				oversized = true
				c.lineBuf = c.lineBuf[:0]
			} else {
				c.lineBuf = append(c.lineBuf, chunk...)
			}
		}
		switch {
		case err == nil && oversized:
			return nil, errOversized
		case err == nil:
			return c.lineBuf, nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err // a partial last line is dropped with the stream
		}
		chunk, err = c.r.ReadSlice('\n')
	}
}

func (c *Conn) dispatch(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		c.log.Warn("skipped a malformed message", "err", err, "bytes", len(line))
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && hasID:
		if !validID(m.ID) {
			c.log.Warn("skipped a request with an invalid id", "method", m.Method)
			return
		}
		req := &Request{ID: m.ID, Method: m.Method, Params: m.Params, conn: c}
		c.mu.Lock()
		if _, dup := c.open[req.Key()]; dup {
			c.mu.Unlock()
			c.log.Warn("skipped a request that reuses an open id", "method", m.Method, "id", req.Key())
			return
		}
		c.open[req.Key()] = req
		c.mu.Unlock()
		c.handler.Request(req)
	case m.Method != "":
		c.handler.Notification(m.Method, m.Params)
	case hasID:
		c.deliver(m)
	default:
		c.log.Warn("skipped a message of unknown shape", "bytes", len(line))
	}
}

// validID accepts the RequestId of the schema: a string or an integer.
func validID(id json.RawMessage) bool {
	if id[0] == '"' {
		var s string
		return json.Unmarshal(id, &s) == nil
	}
	_, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil
}

func (c *Conn) deliver(m message) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if err != nil || !ok {
		c.log.Warn("skipped a response to no pending request", "id", string(m.ID))
		return
	}
	ch <- m
}

func (c *Conn) close() { c.fail(nil) }

// fail ends the connection; err, when not nil, is kept as the reason.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.err = err
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	clear(c.open)
	close(c.done)
}

// Call sends a request and waits for its response, decoding the result into
// result (which may be nil). Without a deadline on ctx it waits at most
// DefaultCallTimeout.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCallTimeout)
		defer cancel()
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode %s params: %w", method, err)
	}
	id := c.nextID.Add(1)
	ch := make(chan message, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ErrClosed)
	}
	c.pending[id] = ch
	c.mu.Unlock()

	if err := c.write(message{ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: raw}); err != nil {
		c.forget(id)
		return fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: %w", method, ErrClosed)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %w", method, m.Error)
		}
		if result == nil {
			return nil
		}
		if err := json.Unmarshal(m.Result, result); err != nil {
			return fmt.Errorf("decode %s result: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("%s: no response: %w", method, ctx.Err())
	}
}

func (c *Conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	m := message{Method: method}
	if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("encode %s params: %w", method, err)
		}
		m.Params = raw
	}
	return c.write(m)
}

func (c *Conn) write(m message) error {
	line, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	line = append(line, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return ErrClosed // an earlier write failed: the stream may hold part of a line
	default:
	}
	if dw, ok := c.w.(deadlineWriter); ok {
		timeout := c.WriteTimeout
		if timeout <= 0 {
			timeout = DefaultWriteTimeout
		}
		if err := dw.SetWriteDeadline(time.Now().Add(timeout)); err == nil {
			defer dw.SetWriteDeadline(time.Time{})
		}
	}
	if _, err := c.w.Write(line); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = ErrWriteTimeout
		}
		c.fail(err)
		return fmt.Errorf("write: %w", err)
	}
	return nil
}
