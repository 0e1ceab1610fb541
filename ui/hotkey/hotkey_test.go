package hotkey

// These tests run against a real X server (./scripts/testenv starts Xvfb)
// and press keys through the XTEST extension, with no window focused. They
// share the server's grabs and lock state, so none runs in parallel.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"codexgate/config/keys"
)

// Keysyms the tests press (keysymdef.h).
const (
	symCtrl   = 0xffe3 // Control_L
	symAlt    = 0xffe9 // Alt_L
	symShift  = 0xffe1 // Shift_L
	symCaps   = 0xffe5 // Caps_Lock
	symNum    = keysymNumLock
	symReturn = 0xff0d
	symEscape = 0xff1b
)

var testKeys = map[string]string{"allow": "ctrl+alt+y", "deny": "ctrl+alt+n"}

// wait bounds every wait for an event that must come.
const wait = 10 * time.Second

// display is a second X client: the keyboard of the tests, and another
// program that grabs keys.
type display struct {
	t    *testing.T
	conn *xgb.Conn
	g    *grabber // for its keyboard mapping
}

func newDisplay(t *testing.T) *display {
	t.Helper()
	if os.Getenv("DISPLAY") == "" {
		t.Fatal("no X display: run the tests under ./scripts/testenv")
	}
	conn, err := xgb.NewConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := xtest.Init(conn); err != nil {
		t.Fatal(err)
	}
	g, err := newGrabber(conn)
	if err != nil {
		t.Fatal(err)
	}
	d := &display{t: t, conn: conn, g: g}
	t.Cleanup(func() {
		d.setLocks(false, false)
		conn.Close()
	})
	return d
}

func (d *display) code(sym uint32) xproto.Keycode {
	d.t.Helper()
	codes := d.g.codes[sym]
	if len(codes) == 0 {
		d.t.Fatalf("no keycode makes keysym %#x", sym)
	}
	return codes[0]
}

func (d *display) key(press bool, sym uint32) {
	d.t.Helper()
	kind := byte(xproto.KeyRelease)
	if press {
		kind = xproto.KeyPress
	}
	if err := xtest.FakeInputChecked(d.conn, kind, byte(d.code(sym)), 0, d.g.root, 0, 0, 0).Check(); err != nil {
		d.t.Fatal(err)
	}
}

// tap presses syms in order and releases them in reverse.
func (d *display) tap(syms ...uint32) {
	d.t.Helper()
	for _, s := range syms {
		d.key(true, s)
	}
	d.up(syms...)
}

// up releases syms in reverse order. X11 auto-repeat is a release and a
// press of the same time (in ms): the next press waits out this one.
func (d *display) up(syms ...uint32) {
	d.t.Helper()
	for _, s := range slices.Backward(syms) {
		d.key(false, s)
	}
	time.Sleep(2 * time.Millisecond)
}

// focus gives the input focus to no window: the root window, or
// PointerRoot (the root, as the pointer is on no window).
func (d *display) focus(w xproto.Window) {
	d.t.Helper()
	if err := xproto.SetInputFocusChecked(d.conn, xproto.InputFocusPointerRoot, w, xproto.TimeCurrentTime).Check(); err != nil {
		d.t.Fatal(err)
	}
}

// setLocks turns CapsLock and NumLock on or off.
func (d *display) setLocks(caps, num bool) {
	d.t.Helper()
	state := func() uint16 {
		r, err := xproto.QueryPointer(d.conn, d.g.root).Reply()
		if err != nil {
			d.t.Fatal(err)
		}
		return r.Mask
	}
	numMask := d.g.locks[1]
	for _, l := range []struct {
		sym  uint32
		mask uint16
		on   bool
	}{{symCaps, xproto.ModMaskLock, caps}, {symNum, numMask, num}} {
		if (state()&l.mask != 0) != l.on {
			d.tap(l.sym)
		}
		if (state()&l.mask != 0) != l.on {
			d.t.Fatalf("lock %#x is not %v", l.sym, l.on)
		}
	}
}

// tryGrab grabs ctrl+alt+KEY with mods as another program would, and
// releases it at once; it returns the server's error.
func (d *display) tryGrab(sym uint32, mods uint16) error {
	code := d.code(sym)
	err := xproto.GrabKeyChecked(d.conn, false, d.g.root, keys.ModCtrl|keys.ModAlt|mods, code, xproto.GrabModeAsync, xproto.GrabModeAsync).Check()
	if err == nil {
		xproto.UngrabKeyChecked(d.conn, code, d.g.root, keys.ModCtrl|keys.ModAlt|mods).Check()
	}
	return err
}

// recorder is what a manager told.
type recorder struct {
	presses chan string
	fails   chan error
	log     *logBuffer
}

func newManager(t *testing.T, keyset map[string]string) (*Manager, *recorder) {
	t.Helper()
	r := &recorder{presses: make(chan string, 100), fails: make(chan error, 100), log: &logBuffer{}}
	m := New(keyset, func(name string) { r.presses <- name }, func(err error) { r.fails <- err },
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
	d := newDisplay(t)
	m, r := newManager(t, testKeys)
	m.Want(true)
	if err := d.tryGrab('y', 0); err == nil {
		t.Fatal("another program could grab ctrl+alt+y while the manager holds it")
	}
	for _, focus := range []struct {
		name string
		w    xproto.Window
	}{{"focus on the root", d.g.root}, {"focus PointerRoot", xproto.InputFocusPointerRoot}} {
		d.focus(focus.w)
		for _, tc := range []struct {
			name      string
			caps, num bool
			keys      []uint32
			fires     string
		}{
			{"letter a", false, false, []uint32{'a'}, ""},
			{"letter y", false, false, []uint32{'y'}, ""},
			{"ctrl alone", false, false, []uint32{symCtrl}, ""},
			{"alt alone", false, false, []uint32{symAlt}, ""},
			{"ctrl+alt alone", false, false, []uint32{symCtrl, symAlt}, ""},
			{"shift alone", false, false, []uint32{symShift}, ""},
			{"return", false, false, []uint32{symReturn}, ""},
			{"escape", false, false, []uint32{symEscape}, ""},
			{"ctrl+y", false, false, []uint32{symCtrl, 'y'}, ""},
			{"alt+y", false, false, []uint32{symAlt, 'y'}, ""},
			{"ctrl+alt+x", false, false, []uint32{symCtrl, symAlt, 'x'}, ""},
			{"ctrl+shift+y", false, false, []uint32{symCtrl, symShift, 'y'}, ""},
			{"ctrl+alt+shift+y", false, false, []uint32{symCtrl, symAlt, symShift, 'y'}, ""},
			{"letter a with numlock", false, true, []uint32{'a'}, ""},
			{"ctrl+y with capslock and numlock", true, true, []uint32{symCtrl, 'y'}, ""},
			{"ctrl+alt+y", false, false, []uint32{symCtrl, symAlt, 'y'}, "allow"},
			{"alt+ctrl+y", false, false, []uint32{symAlt, symCtrl, 'y'}, "allow"},
			{"ctrl+alt+n", false, false, []uint32{symCtrl, symAlt, 'n'}, "deny"},
			{"ctrl+alt+y with numlock", false, true, []uint32{symCtrl, symAlt, 'y'}, "allow"},
			{"ctrl+alt+y with capslock", true, false, []uint32{symCtrl, symAlt, 'y'}, "allow"},
			{"ctrl+alt+y with capslock and numlock", true, true, []uint32{symCtrl, symAlt, 'y'}, "allow"},
			{"ctrl+alt+n with capslock and numlock", true, true, []uint32{symCtrl, symAlt, 'n'}, "deny"},
		} {
			t.Run(focus.name+"/"+tc.name, func(t *testing.T) {
				d.setLocks(tc.caps, tc.num)
				d.tap(tc.keys...)
				d.setLocks(false, false)
				d.tap(symCtrl, symAlt, 'y')
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
	d := newDisplay(t)
	d.focus(xproto.InputFocusPointerRoot)
	m, r := newManager(t, testKeys)
	m.Want(true)
	d.key(true, symCtrl)
	d.key(true, symAlt)
	d.key(true, 'y')
	r.expect(t, "allow")
	waitLog(t, r.log, "auto-repeat ignored", 3)
	d.up(symCtrl, symAlt, 'y')
	d.tap(symCtrl, symAlt, 'y')
	r.expect(t, "allow")
}

// TestKeysAreHeldOnlyWhileWanted: another program can grab the keys, with
// any lock, whenever no card is open.
func TestKeysAreHeldOnlyWhileWanted(t *testing.T) {
	d := newDisplay(t)
	m, r := newManager(t, testKeys)
	numMask := d.g.locks[1]
	free := func(want bool) {
		t.Helper()
		for _, sym := range []uint32{'y', 'n'} {
			for _, mods := range []uint16{0, numMask, xproto.ModMaskLock | numMask} {
				if err := d.tryGrab(sym, mods); (err == nil) != want {
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
	if err := d.tryGrab('u', 0); err == nil {
		t.Error("the new key is not held")
	}
	m.Close()
	if err := d.tryGrab('u', 0); err != nil {
		t.Errorf("the key is held after Close: %v", err)
	}
	m.Want(true) // after Close: nothing, and no hang
	if len(r.fails) != 0 {
		t.Errorf("onFail: %v", <-r.fails)
	}
}

// TestKeyHeldByAnotherProgram: onFail says so once; the other key works.
func TestKeyHeldByAnotherProgram(t *testing.T) {
	d := newDisplay(t)
	d.focus(xproto.InputFocusPointerRoot)
	code := d.code('y')
	if err := xproto.GrabKeyChecked(d.conn, false, d.g.root, keys.ModCtrl|keys.ModAlt, code, xproto.GrabModeAsync, xproto.GrabModeAsync).Check(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xproto.UngrabKeyChecked(d.conn, code, d.g.root, keys.ModCtrl|keys.ModAlt).Check() })
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
	if err := d.tryGrab('y', d.g.locks[1]); err != nil {
		t.Errorf("ctrl+alt+y with numlock is held: %v", err)
	}
	d.tap(symCtrl, symAlt, 'n')
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
	d := newDisplay(t)
	if len(d.g.locks) < 2 || d.g.locks[0] != xproto.ModMaskLock || d.g.locks[1] != xproto.ModMask2 {
		t.Fatalf("locks %#x, want Lock and Mod2 (NumLock on Xvfb's keyboard) first", d.g.locks)
	}
	got := d.g.lockCombos(keys.ModCtrl | keys.ModAlt)
	if len(got) != 1<<len(d.g.locks) || got[0] != 0 {
		t.Errorf("lock combinations %#x", got)
	}
}
