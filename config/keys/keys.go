// Package keys parses hotkeys written as "ctrl+alt+y" into X11 modifier
// masks and keysyms. It does not import the hotkey library, whose init
// panics without a display, so the app can check a config anywhere.
package keys

import (
	"fmt"
	"strings"
)

// X11 modifier masks (X.h), as golang.design/x/hotkey takes them.
const (
	ModShift uint32 = 1 << 0
	ModCtrl  uint32 = 1 << 2
	ModAlt   uint32 = 1 << 3 // Mod1
	ModNum   uint32 = 1 << 4 // Mod2: NumLock on most keyboards
	ModSuper uint32 = 1 << 6 // Mod4
)

// Combo is modifiers and one key.
type Combo struct {
	Mods []uint32
	Key  uint16 // an X11 keysym
}

var modifiers = map[string]uint32{
	"ctrl": ModCtrl, "control": ModCtrl,
	"shift": ModShift,
	"alt":   ModAlt,
	"super": ModSuper, "win": ModSuper,
}

// Parse reads "ctrl+alt+y": at least one modifier, then one letter, digit,
// or F1-F12.
func Parse(s string) (Combo, error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(s)), "+")
	if len(parts) < 2 {
		return Combo{}, fmt.Errorf("%q: a global hotkey needs a modifier and a key, such as ctrl+alt+y", s)
	}
	var c Combo
	for _, p := range parts[:len(parts)-1] {
		m, ok := modifiers[strings.TrimSpace(p)]
		if !ok {
			return Combo{}, fmt.Errorf("%q: unknown modifier %q (ctrl, shift, alt, super)", s, p)
		}
		c.Mods = append(c.Mods, m)
	}
	key := strings.TrimSpace(parts[len(parts)-1])
	switch {
	case len(key) == 1 && (key[0] >= 'a' && key[0] <= 'z' || key[0] >= '0' && key[0] <= '9'):
		c.Key = uint16(key[0]) // keysyms of lowercase letters and digits are their ASCII codes
	case len(key) >= 2 && key[0] == 'f':
		var n int
		if _, err := fmt.Sscanf(key[1:], "%d", &n); err != nil || n < 1 || n > 12 || fmt.Sprint(n) != key[1:] {
			return Combo{}, fmt.Errorf("%q: unknown key %q", s, key)
		}
		c.Key = uint16(0xffbe + n - 1) // XK_F1
	default:
		return Combo{}, fmt.Errorf("%q: unknown key %q (a letter, a digit or F1-F12)", s, key)
	}
	return c, nil
}
