package hotkey

import (
	"errors"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"codexgate/ui/dbustest"
	"codexgate/ui/hotkey/portal"
	"codexgate/ui/hotkey/portal/portaltest"
)

// fakeX11 stands for the X11 grabs.
type fakeX11 struct{ noKeys }

// TestChoose picks the portal only on Wayland and only when it offers
// GlobalShortcuts, X11 grabs where there is a display, and otherwise
// nobody, said once.
func TestChoose(t *testing.T) {
	keyset := map[string]string{"allow": "ctrl+alt+y", "deny": "ctrl+alt+n"}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		portal bool
		keys   map[string]string
		want   string
		fails  int
	}{
		{"wayland with the portal", map[string]string{"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, true, keyset, "portal", 0},
		{"wayland session type with the portal", map[string]string{"XDG_SESSION_TYPE": "wayland"}, true, keyset, "portal", 0},
		{"wayland without the portal, with XWayland", map[string]string{"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, false, keyset, "x11", 0},
		{"wayland without the portal or a display", map[string]string{"WAYLAND_DISPLAY": "wayland-0"}, false, keyset, "none", 1},
		{"x11 with a portal", map[string]string{"DISPLAY": ":0", "XDG_SESSION_TYPE": "x11"}, true, keyset, "x11", 0},
		{"nothing", map[string]string{}, false, keyset, "none", 1},
		{"nothing, and every key off", map[string]string{}, false, map[string]string{"allow": "", "deny": ""}, "none", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			address := dbustest.Bus(t)
			if tc.portal {
				portaltest.Start(t, address, portaltest.Options{Version: 1})
			}
			var fails []error
			k := choose(func(k string) string { return tc.env[k] },
				func() (*dbus.Conn, error) { return dbus.Connect(address) },
				func() Keys { return fakeX11{} },
				tc.keys, func(string) {}, func(err error) { fails = append(fails, err) },
				slog.New(slog.NewTextHandler(io.Discard, nil)))
			defer k.Close()
			got := map[string]bool{"portal": false, "x11": false, "none": false}
			switch k.(type) {
			case *portal.Shortcuts:
				got["portal"] = true
			case fakeX11:
				got["x11"] = true
			case noKeys:
				got["none"] = true
			default:
				t.Fatalf("chose %T", k)
			}
			if !got[tc.want] {
				t.Errorf("chose %T, want %s", k, tc.want)
			}
			if len(fails) != tc.fails || tc.fails > 0 && !errors.Is(fails[0], ErrNone) {
				t.Errorf("failures %v, want %d ErrNone", fails, tc.fails)
			}
		})
	}
}

// TestChoosePortalTriggers shows the keys the compositor assigned.
func TestChoosePortalTriggers(t *testing.T) {
	address := dbustest.Bus(t)
	portaltest.Start(t, address, portaltest.Options{Version: 1, KDE527: true, Assign: func(p string) string { return "assigned " + p }})
	k := choose(func(k string) string { return map[string]string{"WAYLAND_DISPLAY": "wayland-0"}[k] },
		func() (*dbus.Conn, error) { return dbus.Connect(address) },
		func() Keys { t.Fatal("X11 chosen with a portal"); return nil },
		map[string]string{"deny": "ctrl+alt+n"}, func(string) {}, func(err error) { t.Errorf("failure: %v", err) },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer k.Close()
	want := map[string]string{"deny": "assigned CTRL+ALT+n"}
	deadline := time.Now().Add(10 * time.Second)
	for !maps.Equal(k.Triggers(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("triggers %v, want %v", k.Triggers(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
