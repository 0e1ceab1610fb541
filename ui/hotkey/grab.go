package hotkey

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"codexgate/config/keys"
	"codexgate/ui/hotkey/internal/keymap"
)

// modBits are the eight modifier bits of an event's state; the bits above
// them are pointer buttons.
const modBits = 0xff

// errHeld is a key that another X client grabbed first (BadAccess).
var errHeld = errors.New("another program holds this key")

// binding is one grabbed key: a keycode and the exact modifiers, without
// the lock masks, grabbed with each of locks added.
type binding struct {
	name  string
	sym   uint32
	code  xproto.Keycode
	mods  uint16
	locks []uint16
}

// grabber grabs keys on the root window of one X connection. It is used by
// one goroutine only.
type grabber struct {
	conn *xgb.Conn
	root xproto.Window

	km   keymap.Map
	lock uint16 // the OR of km.Locks

	held []binding
	// released is the time of the last release of each grabbed keycode:
	// X11 auto-repeat sends a release and a press of the same time.
	released map[xproto.Keycode]xproto.Timestamp
}

func newGrabber(conn *xgb.Conn) (*grabber, error) {
	g := &grabber{conn: conn, root: xproto.Setup(conn).DefaultScreen(conn).Root, released: map[xproto.Keycode]xproto.Timestamp{}}
	if err := g.loadMapping(); err != nil {
		return nil, err
	}
	return g, nil
}

// loadMapping reads the keyboard and modifier mappings.
func (g *grabber) loadMapping() error {
	km, err := keymap.Load(g.conn)
	if err != nil {
		return err
	}
	g.km, g.lock = km, 0
	for _, m := range km.Locks {
		g.lock |= m
	}
	return nil
}

// remap reloads the mappings after the server said they changed. It
// reports whether the held keys are other keycodes or lock masks now: an X
// server also says so when a key press comes from another keyboard, with
// the same mapping.
func (g *grabber) remap() (changed bool, err error) {
	old := g.km
	if err := g.loadMapping(); err != nil {
		return false, err
	}
	changed = !slices.Equal(old.Locks, g.km.Locks) || slices.ContainsFunc(g.held, func(b binding) bool {
		return !slices.Equal(old.Codes[b.sym], g.km.Codes[b.sym])
	})
	return changed, nil
}

// lockCombos is every combination of the lock masks that are not part of
// mods, the empty one first.
func (g *grabber) lockCombos(mods uint16) []uint16 {
	combos := []uint16{0}
	for _, l := range g.km.Locks {
		if l&mods != 0 {
			continue
		}
		for _, c := range combos {
			combos = append(combos, c|l)
		}
	}
	return combos
}

// grab grabs each key, by name, on every keycode that makes its keysym and
// with every combination of lock masks. A key that cannot be grabbed whole
// is not grabbed at all; its error is returned by name.
func (g *grabber) grab(combos map[string]keys.Combo) map[string]error {
	errs := map[string]error{}
	for _, name := range slices.Sorted(maps.Keys(combos)) {
		c := combos[name]
		codes := g.km.Codes[c.Keysym]
		if len(codes) == 0 {
			errs[name] = fmt.Errorf("no key of this keyboard makes keysym %#x", c.Keysym)
			continue
		}
		// All the grabs are sent, then all are checked: one round trip.
		var binds []binding
		var cookies []xproto.GrabKeyCookie
		for _, code := range codes {
			b := binding{name: name, sym: c.Keysym, code: code, mods: c.Mods, locks: g.lockCombos(c.Mods)}
			binds = append(binds, b)
			for _, l := range b.locks {
				cookies = append(cookies, xproto.GrabKeyChecked(g.conn, false, g.root, c.Mods|l, code, xproto.GrabModeAsync, xproto.GrabModeAsync))
			}
		}
		var err error
		for _, cookie := range cookies {
			if e := cookie.Check(); e != nil && err == nil {
				err = e
			}
		}
		if err != nil {
			g.ungrab(binds)
			if _, ok := err.(xproto.AccessError); ok {
				err = errHeld
			}
			errs[name] = err
			continue
		}
		g.held = append(g.held, binds...)
	}
	return errs
}

// ungrabAll releases every held key, and the keyboard if a held key is
// down now.
func (g *grabber) ungrabAll() error {
	err := g.ungrab(g.held)
	g.held = nil
	clear(g.released)
	if e := xproto.UngrabKeyboardChecked(g.conn, xproto.TimeCurrentTime).Check(); e != nil && err == nil {
		err = e
	}
	return err
}

func (g *grabber) ungrab(binds []binding) error {
	var cookies []xproto.UngrabKeyCookie
	for _, b := range binds {
		for _, l := range b.locks {
			cookies = append(cookies, xproto.UngrabKeyChecked(g.conn, b.code, g.root, b.mods|l))
		}
	}
	var err error
	for _, cookie := range cookies {
		if e := cookie.Check(); e != nil && err == nil {
			err = fmt.Errorf("ungrab: %w", e)
		}
	}
	return err
}

// press is the name of the held key that ev is a new press of: its
// keycode and its modifiers exactly, the lock masks aside. An auto-repeat
// is not a new press.
func (g *grabber) press(ev xproto.KeyPressEvent) (name string, repeat bool) {
	b, ok := g.match(ev.Detail, ev.State)
	if !ok {
		return "", false
	}
	if t, ok := g.released[ev.Detail]; ok && t == ev.Time {
		return b.name, true
	}
	return b.name, false
}

// release notes the time a held keycode went up.
func (g *grabber) release(ev xproto.KeyReleaseEvent) {
	if slices.ContainsFunc(g.held, func(b binding) bool { return b.code == ev.Detail }) {
		g.released[ev.Detail] = ev.Time
	}
}

func (g *grabber) match(code xproto.Keycode, state uint16) (binding, bool) {
	mods := state & modBits &^ g.lock
	for _, b := range g.held {
		if b.code == code && b.mods == mods {
			return b, true
		}
	}
	return binding{}, false
}
