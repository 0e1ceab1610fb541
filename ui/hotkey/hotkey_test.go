package hotkey

// These tests run against a real X server (./scripts/testenv starts Xvfb)
// and press keys through the XTEST extension, with no window focused. They
// share the server's grabs and lock state, so none runs in parallel.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"codexgate/config/keys"
	kb "codexgate/ui/hotkey/hotkeytest"
)

var testKeys = map[string]string{"allow": "ctrl+alt+y", "deny": "ctrl+alt+n"}

// wait bounds every wait for an event that must come.
const wait = 10 * time.Second

const ctrlAlt = keys.ModCtrl | keys.ModAlt

// recorder is what a manager told.
type recorder struct {
	presses chan string
	fails   chan error
	log     *logBuffer
}

func newManager(t *testing.T, keyset map[string]string) (*Manager, *recorder) {
	t.Helper()
	r := &recorder{presses: make(chan string, 100), fails: make(chan error, 100), log: &logBuffer{}}
	// The callbacks never block the manager, even when a failing test
	// stops reading.
	m := New(keyset, func(name string) {
		select {
		case r.presses <- name:
		default:
		}
	}, func(err error) {
		select {
		case r.fails <- err:
		default:
		}
	},
		slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(m.Close)
	return m, r
}

// expect waits for these presses, in this order, and then finds no other.
func (r *recorder) expect(t *testing.T, names ...string) {
	t.Helper()
	for _, want := range names {
		select {
		case got := <-r.presses:
			if got != want {
				t.Fatalf("pressed %q, want %q (presses %v)", got, want, names)
			}
		case <-time.After(wait):
			t.Fatalf("no press of %q\n%s", want, r.log)
		}
	}
	select {
	case got := <-r.presses:
		t.Fatalf("an extra press of %q", got)
	default:
	}
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLog waits until the log holds n lines containing s.
func waitLog(t *testing.T, l *logBuffer, s string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for strings.Count(l.String(), s) < n {
		select {
		case <-ctx.Done():
			t.Fatalf("the log has fewer than %d of %q:\n%s", n, s, l)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestOnlyTheComboFires presses each case's keys, then Ctrl+Alt+Y as a
// marker: X delivers events in order, so a case that fired nothing is one
// whose first press seen is the marker's.
func TestOnlyTheComboFires(t *testing.T) {
	d := kb.New(t)
	m, r := newManager(t, testKeys)
	m.Want(true)
	if err := d.Free(ctrlAlt, 'y'); err == nil {
		t.Fatal("another program could grab ctrl+alt+y while the manager holds it")
	}
	for _, focus := range []struct {
		name string
		w    xproto.Window
	}{{"focus on the root", d.Root()}, {"focus PointerRoot", xproto.InputFocusPointerRoot}} {
		d.Focus(focus.w)
		for _, tc := range []struct {
			name      string
			caps, num bool
			keys      []uint32
			fires     string
		}{
			{"letter a", false, false, []uint32{'a'}, ""},
			{"letter y", false, false, []uint32{'y'}, ""},
			{"ctrl alone", false, false, []uint32{kb.Ctrl}, ""},
			{"alt alone", false, false, []uint32{kb.Alt}, ""},
			{"ctrl+alt alone", false, false, []uint32{kb.Ctrl, kb.Alt}, ""},
			{"shift alone", false, false, []uint32{kb.Shift}, ""},
			{"return", false, false, []uint32{kb.Return}, ""},
			{"escape", false, false, []uint32{kb.Escape}, ""},
			{"ctrl+y", false, false, []uint32{kb.Ctrl, 'y'}, ""},
			{"alt+y", false, false, []uint32{kb.Alt, 'y'}, ""},
			{"ctrl+alt+x", false, false, []uint32{kb.Ctrl, kb.Alt, 'x'}, ""},
			{"ctrl+shift+y", false, false, []uint32{kb.Ctrl, kb.Shift, 'y'}, ""},
			{"ctrl+alt+shift+y", false, false, []uint32{kb.Ctrl, kb.Alt, kb.Shift, 'y'}, ""},
			{"letter a with numlock", false, true, []uint32{'a'}, ""},
			{"ctrl+y with capslock and numlock", true, true, []uint32{kb.Ctrl, 'y'}, ""},
			{"ctrl+alt+y", false, false, []uint32{kb.Ctrl, kb.Alt, 'y'}, "allow"},
			{"alt+ctrl+y", false, false, []uint32{kb.Alt, kb.Ctrl, 'y'}, "allow"},
			{"ctrl+alt+n", false, false, []uint32{kb.Ctrl, kb.Alt, 'n'}, "deny"},
			{"ctrl+alt+y with numlock", false, true, []uint32{kb.Ctrl, kb.Alt, 'y'}, "allow"},
			{"ctrl+alt+y with capslock", true, false, []uint32{kb.Ctrl, kb.Alt, 'y'}, "allow"},
			{"ctrl+alt+y with capslock and numlock", true, true, []uint32{kb.Ctrl, kb.Alt, 'y'}, "allow"},
			{"ctrl+alt+n with capslock and numlock", true, true, []uint32{kb.Ctrl, kb.Alt, 'n'}, "deny"},
		} {
			t.Run(focus.name+"/"+tc.name, func(t *testing.T) {
				d.SetLocks(tc.caps, tc.num)
				d.Tap(tc.keys...)
				d.SetLocks(false, false)
				d.Tap(kb.Ctrl, kb.Alt, 'y')
				want := []string{"allow"}
				if tc.fires != "" {
					want = []string{tc.fires, "allow"}
				}
				r.expect(t, want...)
			})
		}
	}
	select {
	case err := <-r.fails:
		t.Errorf("onFail: %v", err)
	default:
	}
}

// TestAutoRepeatFiresOnce holds the combo until the server repeats it.
func TestAutoRepeatFiresOnce(t *testing.T) {
	d := kb.New(t)
	d.Focus(xproto.InputFocusPointerRoot)
	m, r := newManager(t, testKeys)
	m.Want(true)
	d.Key(true, kb.Ctrl)
	d.Key(true, kb.Alt)
	d.Key(true, 'y')
	r.expect(t, "allow")
	waitLog(t, r.log, "auto-repeat ignored", 3)
	d.Up(kb.Ctrl, kb.Alt, 'y')
	d.Tap(kb.Ctrl, kb.Alt, 'y')
	r.expect(t, "allow")
}

// TestKeysAreHeldOnlyWhileWanted: another program can grab the keys, with
// any lock, whenever no card is open.
func TestKeysAreHeldOnlyWhileWanted(t *testing.T) {
	d := kb.New(t)
	m, r := newManager(t, testKeys)
	numMask := d.NumLockMask()
	free := func(want bool) {
		t.Helper()
		for _, sym := range []uint32{'y', 'n'} {
			for _, mods := range []uint16{0, numMask, xproto.ModMaskLock | numMask} {
				if err := d.Free(ctrlAlt|mods, sym); (err == nil) != want {
					t.Errorf("another program grabs %c with mods %#x: %v; want free %v", sym, mods, err, want)
				}
			}
		}
	}
	free(true)
	for range 2 {
		m.Want(true)
		free(false)
		m.Want(false)
		free(true)
	}
	m.Want(true)
	m.SetKeys(map[string]string{"allow": "ctrl+alt+u"})
	free(true)
	if err := d.Free(ctrlAlt, 'u'); err == nil {
		t.Error("the new key is not held")
	}
	m.Close()
	if err := d.Free(ctrlAlt, 'u'); err != nil {
		t.Errorf("the key is held after Close: %v", err)
	}
	m.Want(true) // after Close: nothing, and no hang
	if len(r.fails) != 0 {
		t.Errorf("onFail: %v", <-r.fails)
	}
}

// TestKeyHeldByAnotherProgram: onFail says so once; the other key works.
func TestKeyHeldByAnotherProgram(t *testing.T) {
	d := kb.New(t)
	d.Focus(xproto.InputFocusPointerRoot)
	if err := d.Grab(ctrlAlt, 'y'); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Ungrab(ctrlAlt, 'y') })
	m, r := newManager(t, testKeys)
	for range 3 {
		m.Want(true)
		m.Want(false)
	}
	m.Want(true)
	if len(r.fails) != 1 {
		t.Fatalf("%d failures reported, want 1", len(r.fails))
	}
	err := <-r.fails
	for _, s := range []string{"allow", "ctrl+alt+y", "another program holds this key"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the failure %q does not say %q", err, s)
		}
	}
	// None of the key is held, not even with a lock on.
	if err := d.Free(ctrlAlt|d.NumLockMask(), 'y'); err != nil {
		t.Errorf("ctrl+alt+y with numlock is held: %v", err)
	}
	d.Tap(kb.Ctrl, kb.Alt, 'n')
	r.expect(t, "deny")
	if !strings.Contains(r.log.String(), "global hotkeys registered") || !strings.Contains(r.log.String(), "deny=ctrl+alt+n") {
		t.Errorf("log:\n%s", r.log)
	}
	// New keys are tried, and reported, again.
	m.SetKeys(map[string]string{"allow": "ctrl+alt+y", "deny": "ctrl+alt+m"})
	if len(r.fails) != 1 {
		t.Errorf("%d failures reported for the new keys, want 1", len(r.fails))
	}
}

func TestNoDisplay(t *testing.T) {
	for _, tc := range []struct{ display, says string }{
		{"", "DISPLAY is not set"},
		{":4242", `connect to the X display`},
	} {
		t.Run(fmt.Sprintf("DISPLAY=%q", tc.display), func(t *testing.T) {
			t.Setenv("DISPLAY", tc.display)
			m, r := newManager(t, testKeys)
			m.Want(true)
			m.SetKeys(map[string]string{"allow": "ctrl+alt+u"})
			m.Want(false)
			m.Want(true)
			m.Close()
			m.Close()
			if !strings.Contains(r.log.String(), "global hotkeys are not available") || !strings.Contains(r.log.String(), tc.says) {
				t.Errorf("the log does not say why:\n%s", r.log)
			}
			if len(r.fails) != 0 || len(r.presses) != 0 {
				t.Errorf("fails %d, presses %d", len(r.fails), len(r.presses))
			}
		})
	}
}

// TestLockMasks: the lock masks come from the server's modifier mapping.
func TestLockMasks(t *testing.T) {
	conn, err := xgb.NewConn()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	g, err := newGrabber(conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.km.Locks) < 2 || g.km.Locks[0] != xproto.ModMaskLock || g.km.Locks[1] != xproto.ModMask2 {
		t.Fatalf("locks %#x, want Lock and Mod2 (NumLock on Xvfb's keyboard) first", g.km.Locks)
	}
	if g.lock&^(xproto.ModMaskLock|xproto.ModMask2|xproto.ModMask3|xproto.ModMask5) != 0 {
		t.Errorf("lock masks %#x", g.lock)
	}
	got := g.lockCombos(ctrlAlt)
	if len(got) != 1<<len(g.km.Locks) || got[0] != 0 {
		t.Errorf("lock combinations %#x", got)
	}
}
