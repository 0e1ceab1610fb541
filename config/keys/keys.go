// Package keys parses hotkeys written as "ctrl+alt+y" into an X11 modifier
// mask and a keysym. It talks to no display, so the app can check a config
// anywhere.
package keys

import (
	"fmt"
	"strconv"
	"strings"
)

// X11 core modifier masks (X.h).
const (
	ModShift uint16 = 1 << 0
	ModCtrl  uint16 = 1 << 2
	ModAlt   uint16 = 1 << 3 // Mod1
	ModSuper uint16 = 1 << 6 // Mod4
)

// Combo is a set of modifiers and one key.
type Combo struct {
	Mods   uint16 // an OR of the Mod masks
	Keysym uint32 // an X11 keysym
}

var modifiers = map[string]uint16{
	"ctrl": ModCtrl, "control": ModCtrl,
	"shift": ModShift,
	"alt":   ModAlt,
	"super": ModSuper, "win": ModSuper,
}

// keysymF1 is XK_F1; F2 to F12 follow it.
const keysymF1 = 0xffbe

// Parse reads "ctrl+alt+y": at least one modifier, each at most once, then
// one letter, digit, or F1-F12.
func Parse(s string) (Combo, error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(s)), "+")
	if len(parts) < 2 {
		return Combo{}, fmt.Errorf("%q: a global hotkey needs a modifier and a key, such as ctrl+alt+y", s)
	}
	var c Combo
	for _, p := range parts[:len(parts)-1] {
		p = strings.TrimSpace(p)
		m, ok := modifiers[p]
		if !ok {
			return Combo{}, fmt.Errorf("%q: unknown modifier %q (ctrl, shift, alt, super)", s, p)
		}
		if c.Mods&m != 0 {
			return Combo{}, fmt.Errorf("%q: modifier %q twice", s, p)
		}
		c.Mods |= m
	}
	key := strings.TrimSpace(parts[len(parts)-1])
	switch {
	case len(key) == 1 && (key[0] >= 'a' && key[0] <= 'z' || key[0] >= '0' && key[0] <= '9'):
		c.Keysym = uint32(key[0]) // the keysyms of lowercase letters and digits are their ASCII codes
	case len(key) >= 2 && key[0] == 'f':
		n, err := strconv.Atoi(key[1:])
		if err != nil || n < 1 || n > 12 || strconv.Itoa(n) != key[1:] {
			return Combo{}, fmt.Errorf("%q: unknown key %q (a letter, a digit or F1-F12)", s, key)
		}
		c.Keysym = uint32(keysymF1 + n - 1)
	default:
		return Combo{}, fmt.Errorf("%q: unknown key %q (a letter, a digit or F1-F12)", s, key)
	}
	return c, nil
}
