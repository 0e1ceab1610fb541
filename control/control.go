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
	"syscall"
	"time"

	"codexgate/approvals"
	"codexgate/proc"
	"codexgate/supervisor"
)

// Request is what a client asks.
type Request struct {
	Op       string            `json:"op"` // workers, task, interrupt, cards, show, answer, panel, relogin
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

// Server serves the control socket.
type Server struct {
	ln     *net.UnixListener
	handle Handler
	// Excluded are the pids whose descendants are refused: the workers' codex
	// processes, read at every connection.
	Excluded func() []int
	// Refused is told of every refused peer, for the audit log.
	Refused func(why string)
	Log     *slog.Logger
}

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
	return &Server{ln: ln, handle: h, Log: slog.Default(), Excluded: func() []int { return nil }, Refused: func(string) {}}, nil
}

// Serve accepts connections until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go s.serve(ctx, conn)
	}
}

func (s *Server) serve(ctx context.Context, conn *net.UnixConn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	var resp Response
	if err := s.checkPeer(conn); err != nil {
		s.Log.Warn("refused a control connection", "err", err)
		s.Refused(err.Error())
		resp.Error = "refused: " + err.Error()
	} else if result, err := s.dispatch(ctx, conn); err != nil {
		resp.Error = err.Error()
	} else if resp.Result, err = json.Marshal(result); err != nil {
		resp.Error = err.Error()
	}
	json.NewEncoder(conn).Encode(resp)
}

func (s *Server) dispatch(ctx context.Context, conn io.Reader) (any, error) {
	line, err := bufio.NewReader(io.LimitReader(conn, maxRequest)).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, fmt.Errorf("bad request: %w", err)
	}
	return s.handle(ctx, req)
}

// checkPeer admits only the same user, and no descendant of a worker or of
// codexgate itself.
func (s *Server) checkPeer(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("peer credentials: %w", credErr)
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("peer pid %d is user %d, not %d", cred.Pid, cred.Uid, os.Getuid())
	}
	excluded := append(s.Excluded(), os.Getpid())
	chain, err := proc.Ancestors(int(cred.Pid))
	if err != nil {
		return fmt.Errorf("peer pid %d: %w", cred.Pid, err)
	}
	for _, pid := range chain {
		for _, ex := range excluded {
			if pid == ex {
				if ex == os.Getpid() {
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
	// A refused peer gets its answer before the server has read the
	// request, and the socket closed: the send then fails, but the reason
	// is there to read.
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
