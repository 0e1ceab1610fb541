package hotkey

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"codexgate/config/keys"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		mods []uint32
		key  uint16
		err  string
	}{
		{"ctrl+alt+y", []uint32{keys.ModCtrl, keys.ModAlt}, 'y', ""},
		{"Ctrl+Shift+F5", []uint32{keys.ModCtrl, keys.ModShift}, 0xffc2, ""},
		{"super+1", []uint32{keys.ModSuper}, '1', ""},
		{"y", nil, 0, "needs a modifier"},
		{"hyper+y", nil, 0, "unknown modifier"},
		{"ctrl+enter", nil, 0, "unknown key"},
		{"ctrl+f13", nil, 0, "unknown key"},
	} {
		c, err := keys.Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || c.Key != tc.key || len(c.Mods) != len(tc.mods) {
			t.Errorf("Parse(%q) = %+v, %v", tc.in, c, err)
		}
	}
}

// helperScript writes a stand-in for codexgate-hotkey.
func helperScript(t *testing.T, body string) string {
	path := filepath.Join(t.TempDir(), "helper")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

type record struct {
	mu      sync.Mutex
	presses []string
	fails   []error
}

func (r *record) press(name string) { r.mu.Lock(); r.presses = append(r.presses, name); r.mu.Unlock() }
func (r *record) fail(err error)    { r.mu.Lock(); r.fails = append(r.fails, err); r.mu.Unlock() }
func (r *record) counts() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.presses), len(r.fails)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestManagerHoldsKeysOnlyWhileWanted(t *testing.T) {
	t.Parallel()
	// Three presses: two of them auto-repeats of one held key.
	helper := helperScript(t, `echo "$@" > "$(dirname "$0")/args"; echo ready; echo down allow; echo down allow; sleep 0.7; echo down allow; read line`)
	r := &record{}
	m := New(helper, map[string]string{"allow": "ctrl+alt+y", "deny": "ctrl+alt+n"}, r.press, r.fail, slog.New(slog.DiscardHandler))
	m.Want(true)
	if !m.Registered() {
		t.Fatal("not registered while wanted")
	}
	waitFor(t, func() bool { p, _ := r.counts(); return p == 2 })
	args, _ := os.ReadFile(filepath.Join(filepath.Dir(helper), "args"))
	if strings.TrimSpace(string(args)) != "allow=ctrl+alt+y deny=ctrl+alt+n" {
		t.Errorf("helper args %q", args)
	}
	m.Want(false)
	if m.Registered() {
		t.Error("still registered when no card is open")
	}
	if _, fails := r.counts(); fails != 0 {
		t.Errorf("a stop was reported as a failure")
	}
}

func TestManagerReportsAFailureOnce(t *testing.T) {
	t.Parallel()
	helper := helperScript(t, `echo "X Error of failed request: BadAccess (attempt to access private resource denied)" >&2; exit 1`)
	r := &record{}
	m := New(helper, map[string]string{"allow": "ctrl+alt+y"}, r.press, r.fail, slog.New(slog.DiscardHandler))
	for range 3 {
		m.Want(true)
		m.Want(false)
	}
	waitFor(t, func() bool { _, f := r.counts(); return f == 1 })
	time.Sleep(100 * time.Millisecond)
	if _, fails := r.counts(); fails != 1 || !strings.Contains(r.fails[0].Error(), "BadAccess") {
		t.Errorf("failures %v", r.fails)
	}
	// New keys are tried again.
	m.SetKeys(map[string]string{"allow": "ctrl+alt+u"})
	m.Want(true)
	waitFor(t, func() bool { _, f := r.counts(); return f == 2 })
}
