// Package hotkeytest is a keyboard for tests of global hotkeys: it presses
// keys on a real X server through the XTEST extension, as a person would,
// turns the lock keys on and off, takes the focus from every window, and
// grabs keys as another program would.
package hotkeytest

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"codexgate/ui/hotkey/internal/keymap"
)

// Keysyms the tests press (keysymdef.h); letters and digits are their
// ASCII codes.
const (
	Ctrl     = 0xffe3 // Control_L
	Alt      = 0xffe9 // Alt_L
	Shift    = 0xffe1 // Shift_L
	CapsLock = 0xffe5
	NumLock  = keymap.KeysymNumLock
	Return   = 0xff0d
	Escape   = 0xff1b
)

// Keyboard is an X client of its own on $DISPLAY.
type Keyboard struct {
	t    testing.TB
	conn *xgb.Conn
	root xproto.Window
	km   keymap.Map
	down map[uint32]bool // keys pressed and not released yet
}

// New connects to $DISPLAY. When the test ends, keys still down are
// released, the locks turned off and the connection closed.
func New(t testing.TB) *Keyboard {
	t.Helper()
	if os.Getenv("DISPLAY") == "" {
		t.Fatal("no X display: run the tests under ./scripts/testenv")
	}
	conn, err := xgb.NewConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := xtest.Init(conn); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	km, err := keymap.Load(conn)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	k := &Keyboard{t: t, conn: conn, root: xproto.Setup(conn).DefaultScreen(conn).Root, km: km, down: map[uint32]bool{}}
	t.Cleanup(func() {
		for sym := range k.down {
			k.Key(false, sym)
		}
		k.SetLocks(false, false)
		conn.Close()
	})
	return k
}

// Root is the root window.
func (k *Keyboard) Root() xproto.Window { return k.root }

// NumLockMask is the modifier mask NumLock sets on this server.
func (k *Keyboard) NumLockMask() uint16 {
	k.t.Helper()
	if len(k.km.Locks) < 2 {
		k.t.Fatal("NumLock is mapped to no modifier")
	}
	return k.km.Locks[1]
}

// Code is the first keycode that makes sym.
func (k *Keyboard) Code(sym uint32) xproto.Keycode {
	k.t.Helper()
	codes := k.km.Codes[sym]
	if len(codes) == 0 {
		k.t.Fatalf("no keycode makes keysym %#x", sym)
	}
	return codes[0]
}

// Key presses or releases sym.
func (k *Keyboard) Key(press bool, sym uint32) {
	k.t.Helper()
	kind := byte(xproto.KeyRelease)
	if press {
		kind = xproto.KeyPress
	}
	if err := xtest.FakeInputChecked(k.conn, kind, byte(k.Code(sym)), 0, k.root, 0, 0, 0).Check(); err != nil {
		k.t.Fatal(err)
	}
	if press {
		k.down[sym] = true
	} else {
		delete(k.down, sym)
	}
}

// Tap presses syms in order and releases them in reverse.
func (k *Keyboard) Tap(syms ...uint32) {
	k.t.Helper()
	for _, s := range syms {
		k.Key(true, s)
	}
	k.Up(syms...)
}

// Up releases syms in reverse order. X11 auto-repeat is a release and a
// press of the same time (in ms): the next press waits out this one.
func (k *Keyboard) Up(syms ...uint32) {
	k.t.Helper()
	for _, s := range slices.Backward(syms) {
		k.Key(false, s)
	}
	time.Sleep(2 * time.Millisecond)
}

// Focus gives the input focus to w: the root window or
// xproto.InputFocusPointerRoot, so that no application window has it.
func (k *Keyboard) Focus(w xproto.Window) {
	k.t.Helper()
	if err := xproto.SetInputFocusChecked(k.conn, xproto.InputFocusPointerRoot, w, xproto.TimeCurrentTime).Check(); err != nil {
		k.t.Fatal(err)
	}
}

// SetLocks turns CapsLock and NumLock on or off.
func (k *Keyboard) SetLocks(caps, num bool) {
	k.t.Helper()
	state := func() uint16 {
		r, err := xproto.QueryPointer(k.conn, k.root).Reply()
		if err != nil {
			k.t.Fatal(err)
		}
		return r.Mask
	}
	for _, l := range []struct {
		sym  uint32
		mask uint16
		on   bool
	}{{CapsLock, xproto.ModMaskLock, caps}, {NumLock, k.NumLockMask(), num}} {
		if (state()&l.mask != 0) != l.on {
			k.Tap(l.sym)
		}
		if (state()&l.mask != 0) != l.on {
			k.t.Fatalf("lock %#x is not %v", l.sym, l.on)
		}
	}
}

// Grab grabs sym with exactly mods on the root window, as another program
// would, until Ungrab; it returns the server's error (xproto.AccessError
// when another client holds it).
func (k *Keyboard) Grab(mods uint16, sym uint32) error {
	return xproto.GrabKeyChecked(k.conn, false, k.root, mods, k.Code(sym), xproto.GrabModeAsync, xproto.GrabModeAsync).Check()
}

// Ungrab releases a Grab.
func (k *Keyboard) Ungrab(mods uint16, sym uint32) {
	k.t.Helper()
	if err := xproto.UngrabKeyChecked(k.conn, k.Code(sym), k.root, mods).Check(); err != nil {
		k.t.Fatal(err)
	}
}

// Free reports whether another program could grab sym with mods now: it
// grabs it and releases it at once.
func (k *Keyboard) Free(mods uint16, sym uint32) error {
	k.t.Helper()
	if err := k.Grab(mods, sym); err != nil {
		return err
	}
	k.Ungrab(mods, sym)
	return nil
}
