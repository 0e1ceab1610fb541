// Package keymap reads which keycodes of an X server make which keysyms, and
// which modifier masks its lock keys set.
package keymap

import (
	"fmt"
	"slices"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// Keysyms of the lock keys (keysymdef.h).
const (
	KeysymNumLock    = 0xff7f
	KeysymScrollLock = 0xff14
)

// Map is a server's keyboard as its mappings say.
type Map struct {
	Codes map[uint32][]xproto.Keycode // the keycodes that make each keysym, in any column
	// Locks are the masks of CapsLock (the Lock modifier, always first),
	// then of NumLock and ScrollLock: whichever of Mod1-Mod5 holds their
	// keycodes, where one does.
	Locks []uint16
}

// Load reads the keyboard and modifier mappings.
func Load(conn *xgb.Conn) (Map, error) {
	setup := xproto.Setup(conn)
	first, last := setup.MinKeycode, setup.MaxKeycode
	km, err := xproto.GetKeyboardMapping(conn, first, byte(last-first+1)).Reply()
	if err != nil {
		return Map{}, fmt.Errorf("read the keyboard mapping: %w", err)
	}
	mm, err := xproto.GetModifierMapping(conn).Reply()
	if err != nil {
		return Map{}, fmt.Errorf("read the modifier mapping: %w", err)
	}
	m := Map{Codes: map[uint32][]xproto.Keycode{}, Locks: []uint16{xproto.ModMaskLock}}
	if per := int(km.KeysymsPerKeycode); per > 0 {
		for i, sym := range km.Keysyms {
			code := xproto.Keycode(int(first) + i/per)
			if sym != 0 && !slices.Contains(m.Codes[uint32(sym)], code) {
				m.Codes[uint32(sym)] = append(m.Codes[uint32(sym)], code)
			}
		}
	}
	for _, sym := range []uint32{KeysymNumLock, KeysymScrollLock} {
		if mask := modifierOf(mm, m.Codes[sym]); mask != 0 && !slices.Contains(m.Locks, mask) {
			m.Locks = append(m.Locks, mask)
		}
	}
	return m, nil
}

// modifierOf is the mask of the modifier that one of codes is mapped to.
func modifierOf(mm *xproto.GetModifierMappingReply, codes []xproto.Keycode) uint16 {
	per := int(mm.KeycodesPerModifier)
	for mod := range 8 {
		for _, code := range mm.Keycodes[mod*per : (mod+1)*per] {
			if code != 0 && slices.Contains(codes, code) {
				return 1 << mod
			}
		}
	}
	return 0
}
