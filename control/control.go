// Package control is the Unix socket through which the command line talks to
// the running app: one JSON request and one JSON response per connection.
// The server answers only processes of the same user that do not descend
// from a codex worker (nor from codexgate itself, which adopts the orphans
// of its workers), so an agent cannot approve its own requests.
package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"codexgate/approvals"
	"codexgate/proc"
	"codexgate/supervisor"
)

// Request is what a client asks.
type Request struct {
	Op       string            `json:"op"` // workers, task, interrupt, restart, relogin, cards, show, answer, panel
	Worker   string            `json:"worker,omitempty"`
	Prompt   string            `json:"prompt,omitempty"`
	Card     string            `json:"card,omitempty"`
	Decision string            `json:"decision,omitempty"`
	Revision int               `json:"revision,omitempty"`
	Values   map[string]string `json:"values,omitempty"`
}

// WorkersReply is the answer to "workers".
type WorkersReply struct {
	Workers     []supervisor.Status `json:"workers"`
	ConfigError string              `json:"configError,omitempty"`
	// Stderr is each worker's last stderr lines, by name (kept apart from
	// Status, which stays comparable).
	Stderr map[string][]string `json:"stderr,omitempty"`
	// Turns is each worker's current or last turn, by name; a worker that
	// has run none has no entry.
	Turns map[string]TurnState `json:"turns,omitempty"`
}

// TurnState is a worker's current or last turn, as "workers" tells it.
type TurnState struct {
	ID     string `json:"id"`
	Status string `json:"status"` // working, completed, failed, interrupted
	// LastMessage is the agent's last message, escaped and capped.
	LastMessage string `json:"lastMessage"`
	Error       string `json:"error,omitempty"`
	// Tokens is what the turn used; 0 when codex reported nothing.
	Tokens int64 `json:"tokens,omitempty"`
}

// lastMessageBytes caps the last message "workers" carries.
const lastMessageBytes = 1024

// TurnStateOf is the reply's part for a worker's activity; false when the
// worker has run no turn.
func TurnStateOf(a supervisor.Activity) (TurnState, bool) {
	t, ok := a.Last()
	if !ok {
		return TurnState{}, false
	}
	// The history keeps its texts escaped: capping them keeps them so.
	msg, _ := approvals.Cap(t.LastMessage(), lastMessageBytes)
	errMsg, _ := approvals.Cap(t.Error, lastMessageBytes)
	return TurnState{ID: t.ID, Status: t.Status, LastMessage: msg, Error: errMsg, Tokens: t.Tokens}, true
}

// ReloginResult is one worker's part in "relogin".
type ReloginResult struct {
	Name      string           `json:"name"`
	State     supervisor.State `json:"state"`
	Restarted bool             `json:"restarted"`
	// Error is why the worker was not restarted, or why it is not ready.
	Error string `json:"error,omitempty"`
}

// ShowReply is the answer to "show": a card and its whole text, every
// byte, escaped. Serving it records that the card, at that revision, was
// shown in full on the command line.
type ShowReply struct {
	Card approvals.Card `json:"card"`
	Text string         `json:"text"`
}

// Response carries a result or an error.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// maxRequest caps a request line; prompts are the only long field.
const maxRequest = 1 << 20

// DefaultPath is $XDG_RUNTIME_DIR/codexgate/control.sock, or CODEXGATE_SOCKET.
func DefaultPath() (string, error) {
	if p := os.Getenv("CODEXGATE_SOCKET"); p != "" {
		return p, nil
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		return "", errors.New("XDG_RUNTIME_DIR is not set: pass --socket PATH or set CODEXGATE_SOCKET")
	}
	return filepath.Join(dir, "codexgate", "control.sock"), nil
}

// Handler answers one request.
type Handler func(ctx context.Context, req Request) (any, error)

// Server serves the control socket, the way net/http serves: one goroutine
// per connection, each tracked so that shutdown closes it and waits for it,
// and recovered so that a panic in a handler is an error reply and a log
// line, never the end of the app.
type Server struct {
	ln     *net.UnixListener
	handle Handler
	// Excluded are the pids whose descendants are refused: the workers' codex
	// processes, read at every connection.
	Excluded func() []int
	// Refused is told of every refused peer, for the audit log.
	Refused func(why string)
	Log     *slog.Logger

	self int // the pid whose descendants are refused as codexgate's own; tests change it

	mu    sync.Mutex // protects conns
	conns map[*net.UnixConn]struct{}
	wg    sync.WaitGroup // one per connection goroutine
}

// connTimeout bounds a whole exchange: a task or a relogin can take a while.
const connTimeout = 2 * time.Minute

// Listen creates the socket at path: its directory 0700, the socket 0600.
// A stale socket left by a crash is replaced; a live one is an error.
func Listen(path string, h Handler) (*Server, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("socket directory %s belongs to another user", dir)
	}
	if info.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("protect socket directory: %w", err)
		}
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("codexgate is already running (socket %s answers)", path)
	}
	os.Remove(path)
	// The umask makes the socket 0600 from the start, not just after a chmod.
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	return &Server{
		ln: ln, handle: h, Log: slog.Default(), Excluded: func() []int { return nil }, Refused: func(string) {},
		self: os.Getpid(), conns: make(map[*net.UnixConn]struct{}),
	}, nil
}

// Serve accepts connections until ctx ends. It then closes the listener and
// every open connection, and returns once their goroutines have ended.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	}()
	var err error
	var pause time.Duration
	for {
		conn, aerr := s.ln.AcceptUnix()
		if aerr != nil && ctx.Err() == nil && passing(aerr) {
			// Out of descriptors or memory, or a peer gone before it was
			// accepted: wait and go on, as net/http does. Connections held
			// open by a local program must not end the socket for good.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.Log.Warn("control socket: accept", "err", aerr, "retry_in", pause)
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("accept: %w", aerr)
			}
			break
		}
		if !s.track(ctx, conn) {
			conn.Close()
			break
		}
		go s.serve(ctx, conn)
	}
	cancel()
	<-stopped
	s.wg.Wait()
	return err
}

// passing reports whether an accept error is one that goes away.
func passing(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// track adds conn to the open connections, unless shutdown has begun.
func (s *Server) track(ctx context.Context, conn *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	s.conns[conn] = struct{}{}
	s.wg.Add(1)
	return true
}

// refusedTimeout is how long a refused peer may take to send its request
// and read why it was refused.
const refusedTimeout = 2 * time.Second

func (s *Server) serve(ctx context.Context, conn *net.UnixConn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	conn.SetDeadline(time.Now().Add(connTimeout))
	// The peer is judged as soon as it connects: its credentials are those
	// of the process that connected, whose pid could name another process
	// once it has exited, and a client chooses when it writes.
	peerErr := s.checkPeer(conn)
	if peerErr != nil {
		// Refused: it has a moment to send, not the time of a request.
		conn.SetDeadline(time.Now().Add(refusedTimeout))
	}
	// The request is read all the same, a refused peer's too: a client
	// whose request was never read would see a broken pipe, not the reason.
	req, readErr := readRequest(conn)
	var resp Response
	if err := peerErr; err != nil {
		s.Log.Warn("refused a control connection", "err", err)
		s.Refused(err.Error())
		resp.Error = "refused: " + err.Error()
	} else if readErr != nil {
		resp.Error = readErr.Error()
	} else if result, err := s.call(ctx, req); err != nil {
		resp.Error = err.Error()
	} else if resp.Result, err = json.Marshal(result); err != nil {
		resp.Error = err.Error()
	}
	if err := json.NewEncoder(conn).Encode(resp); err != nil && ctx.Err() == nil {
		s.Log.Debug("control reply not delivered", "op", req.Op, "err", err)
	}
}

// call runs the handler; a panic in it becomes an error reply.
func (s *Server) call(ctx context.Context, req Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.Log.Error("control request panicked", "op", req.Op, "panic", p, "stack", string(debug.Stack()))
			result, err = nil, fmt.Errorf("internal error in %q: %v", req.Op, p)
		}
	}()
	return s.handle(ctx, req)
}

func readRequest(conn io.Reader) (Request, error) {
	var req Request
	line, err := bufio.NewReader(io.LimitReader(conn, maxRequest)).ReadBytes('\n')
	if err != nil {
		return req, fmt.Errorf("read request: %w", err)
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return req, fmt.Errorf("bad request: %w", err)
	}
	return req, nil
}

// checkPeer admits only the same user, and no descendant of a worker or of
// codexgate itself.
func (s *Server) checkPeer(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return fmt.Errorf("peer credentials: %w", credErr)
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("peer pid %d is user %d, not %d", cred.Pid, cred.Uid, os.Getuid())
	}
	excluded := append(s.Excluded(), s.self)
	chain, err := proc.Ancestors(int(cred.Pid))
	if err != nil {
		return fmt.Errorf("peer pid %d: %w", cred.Pid, err)
	}
	for _, pid := range chain {
		for _, ex := range excluded {
			if pid == ex {
				if ex == s.self {
					return fmt.Errorf("peer pid %d descends from codexgate itself", cred.Pid)
				}
				return fmt.Errorf("peer pid %d descends from worker process %d", cred.Pid, ex)
			}
		}
	}
	return nil
}

// Call sends req to the socket at path and returns the result.
func Call(path string, req Request, timeout time.Duration) (json.RawMessage, error) {
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("codexgate is not running (no socket at %s): %w", path, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	// A server that refuses still answers with why; its reply is read
	// even when the request could not all be sent.
	sendErr := json.NewEncoder(conn).Encode(req)
	var resp Response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		if sendErr != nil {
			return nil, fmt.Errorf("send request: %w", sendErr)
		}
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.Error != "" {
		return nil, errors.New(resp.Error)
	}
	return resp.Result, nil
}
