package keys

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Combo
		err  string
	}{
		{"ctrl+alt+y", Combo{ModCtrl | ModAlt, 'y'}, ""},
		{" Alt + Ctrl + Y ", Combo{ModCtrl | ModAlt, 'y'}, ""},
		{"control+shift+F5", Combo{ModCtrl | ModShift, 0xffc2}, ""},
		{"ctrl+f1", Combo{ModCtrl, 0xffbe}, ""},
		{"ctrl+f12", Combo{ModCtrl, 0xffc9}, ""},
		{"super+1", Combo{ModSuper, '1'}, ""},
		{"win+0", Combo{ModSuper, '0'}, ""},
		{"y", Combo{}, "needs a modifier"},
		{"", Combo{}, "needs a modifier"},
		{"ctrl+", Combo{}, "unknown key"},
		{"hyper+y", Combo{}, "unknown modifier"},
		{"ctrl+ctrl+y", Combo{}, "twice"},
		{"ctrl+control+y", Combo{}, "twice"},
		{"ctrl+enter", Combo{}, "unknown key"},
		{"ctrl+f13", Combo{}, "unknown key"},
		{"ctrl+f01", Combo{}, "unknown key"},
		{"ctrl+f", Combo{ModCtrl, 'f'}, ""},
		{"ctrl+é", Combo{}, "unknown key"},
	} {
		c, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || c != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, c, err, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"ctrl+alt+y", "super+f12", "y", "ctrl++", "+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			return
		}
		if c.Mods == 0 || c.Mods&^(ModShift|ModCtrl|ModAlt|ModSuper) != 0 || c.Keysym == 0 {
			t.Errorf("Parse(%q) = %+v", s, c)
		}
	})
}
