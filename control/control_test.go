package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSocketIsPrivateAndRefusesDescendants(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "control.sock")
	srv, err := Listen(path, func(context.Context, Request) (any, error) { return "answered", nil })
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan string, 10)
	srv.Refused = func(why string) { refused <- why }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx)

	for p, want := range map[string]os.FileMode{filepath.Dir(path): 0o700 | os.ModeDir, path: 0o600 | os.ModeSocket} {
		info, err := os.Stat(p)
		if err != nil || info.Mode() != want {
			t.Errorf("%s: mode %v, want %v (%v)", p, info.Mode(), want, err)
		}
	}
	// This test process is the server's own process, as an orphan adopted
	// by codexgate would be a descendant of it: refused, and recorded.
	_, err = Call(path, Request{Op: "answer", Decision: "allow"}, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "descends from codexgate itself") || len(refused) != 1 {
		t.Errorf("call from a descendant: %v (%d refusals recorded)", err, len(refused))
	}
	if _, err := Listen(path, nil); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("a second listener on a live socket: %v", err)
	}
	cancel()
	time.Sleep(50 * time.Millisecond)
	// A socket left by a crash, which nobody answers, is replaced.
	os.WriteFile(path, nil, 0o600)
	if srv2, err := Listen(path, nil); err != nil {
		t.Errorf("listen after the first closed: %v", err)
	} else {
		srv2.ln.Close()
	}
}

// serveForTest serves h on a fresh socket, admitting this test process as a
// peer (it is the server's own process, which checkPeer refuses).
func serveForTest(t *testing.T, h Handler) (string, *Server, context.CancelFunc, chan error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "control.sock")
	srv, err := Listen(path, h)
	if err != nil {
		t.Fatal(err)
	}
	srv.self = -1
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	return path, srv, cancel, done
}

func TestAPanickingHandlerIsAnErrorReply(t *testing.T) {
	before := runtime.NumGoroutine()
	path, _, cancel, done := serveForTest(t, func(_ context.Context, req Request) (any, error) {
		if req.Op == "boom" {
			var m map[string]int
			m["x"] = 1 // a nil map: panics
		}
		return "fine", nil
	})
	if _, err := Call(path, Request{Op: "boom"}, 5*time.Second); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Errorf("panicking handler: %v", err)
	}
	if res, err := Call(path, Request{Op: "workers"}, 5*time.Second); err != nil || string(res) != `"fine"` {
		t.Errorf("after a panic: %s, %v", res, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	waitGoroutines(t, before)
}

func TestShutdownClosesOpenConnections(t *testing.T) {
	before := runtime.NumGoroutine()
	entered := make(chan struct{})
	path, _, cancel, done := serveForTest(t, func(ctx context.Context, _ Request) (any, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	idle, err := net.Dial("unix", path) // connects and never sends
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	called := make(chan error, 1)
	go func() {
		_, err := Call(path, Request{Op: "task"}, time.Minute)
		called <- err
	}()
	<-entered
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if err := <-called; err == nil {
		t.Error("a call cut by shutdown succeeded")
	}
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("idle connection after shutdown: %v, want EOF", err)
	}
	idle.Close()
	waitGoroutines(t, before)
}

// waitGoroutines fails when more goroutines run than before, once those
// that are ending have ended.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The peer is judged as it connects, not when its request arrives: a
// client may hold its connection open for minutes before it writes, long
// enough for the process that connected to exit and its pid to be reused
// by a process that does not descend from a worker.
func TestThePeerIsCheckedWhenItConnects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.sock")
	srv, err := Listen(path, func(context.Context, Request) (any, error) { return "answered", nil })
	if err != nil {
		t.Fatal(err)
	}
	srv.self = -1
	checked := make(chan struct{}, 1)
	worker := os.Getpid() // the peer's pid descends from a worker while it connects
	srv.Excluded = func() []int {
		excluded := []int{worker}
		checked <- struct{}{}
		return excluded
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	select {
	case <-checked:
	case <-time.After(5 * time.Second):
		t.Fatal("the peer was not checked before it sent its request")
	}
	worker = -1 // its pid now names another process
	conn.Write([]byte(`{"op":"answer","decision":"allow"}` + "\n"))
	var resp Response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil || !strings.Contains(resp.Error, "descends from worker") {
		t.Errorf("reply %+v (%v)", resp, err)
	}
}

// Running out of file descriptors (a local program holding connections
// open) is a pause, not the end of the control socket.
func TestAcceptErrorsDoNotEndTheServer(t *testing.T) {
	path, _, cancel, done := serveForTest(t, func(context.Context, Request) (any, error) { return "answered", nil })
	defer func() { cancel(); <-done }()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	open, _ := os.ReadDir("/proc/self/fd")
	low := lim
	low.Cur = uint64(len(open) + 16)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for range 64 {
		c, err := net.Dial("unix", path)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	// Let the server meet the limit while every descriptor is taken.
	select {
	case err := <-done:
		done <- err
	case <-time.After(200 * time.Millisecond):
	}
	for _, c := range conns {
		c.Close()
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if _, err := Call(path, Request{Op: "cards"}, 5*time.Second); err != nil {
		t.Errorf("after the descriptors ran out: %v", err)
	}
}
