package control

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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
