package portal_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"codexgate/ui/dbustest"
	"codexgate/ui/hotkey/portal"
	"codexgate/ui/hotkey/portal/portaltest"
)

var defaultKeys = map[string]string{"allow": "ctrl+alt+y", "deny": "ctrl+alt+n"}

func TestTrigger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, want string }{
		{"ctrl+alt+y", "CTRL+ALT+y"},
		{"Ctrl+Alt+N", "CTRL+ALT+n"},
		{"control+shift+1", "CTRL+SHIFT+1"},
		{"super+f12", "LOGO+F12"},
		{"win+alt+a", "LOGO+ALT+a"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := portal.Trigger(tc.spec)
			if err != nil || got != tc.want {
				t.Errorf("Trigger(%q) = %q, %v; want %q", tc.spec, got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"y", "ctrl+alt+", "hyper+y", "ctrl+f13"} {
		if got, err := portal.Trigger(bad); err == nil {
			t.Errorf("Trigger(%q) = %q, want an error", bad, got)
		}
	}
}

// client is a Shortcuts under test with what it reported.
type client struct {
	*portal.Shortcuts
	presses chan string
	fails   chan error
}

func open(t *testing.T, address string, keys map[string]string) *client {
	t.Helper()
	c := &client{presses: make(chan string, 8), fails: make(chan error, 8)}
	s, err := portal.Open(context.Background(), dbustest.Connect(t, address), keys,
		func(name string) { c.presses <- name }, func(err error) { c.fails <- err },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(s.Close)
	c.Shortcuts = s
	return c
}

// triggers waits until the client holds want.
func (c *client) triggers(t *testing.T, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !maps.Equal(c.Triggers(), want) {
		select {
		case err := <-c.fails:
			t.Fatalf("binding failed: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("triggers are %v, want %v", c.Triggers(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *client) press(t *testing.T) string {
	t.Helper()
	select {
	case name := <-c.presses:
		return name
	case <-time.After(10 * time.Second):
		t.Fatal("no press passed on")
		return ""
	}
}

func (c *client) fail(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.fails:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no failure reported")
		return nil
	}
}

func TestVersion(t *testing.T) {
	address := dbustest.Bus(t)
	conn := dbustest.Connect(t, address)
	if _, err := portal.Version(context.Background(), conn); !errors.Is(err, portal.ErrUnavailable) {
		t.Errorf("no portal on the bus: %v, want ErrUnavailable", err)
	}
	portaltest.Start(t, address, portaltest.Options{})
	if _, err := portal.Version(context.Background(), conn); !errors.Is(err, portal.ErrUnavailable) {
		t.Errorf("a portal without GlobalShortcuts: %v, want ErrUnavailable", err)
	}
	if _, err := portal.Open(context.Background(), dbustest.Connect(t, address), defaultKeys, nil, nil, slog.Default()); !errors.Is(err, portal.ErrUnavailable) {
		t.Errorf("Open on a portal without GlobalShortcuts: %v, want ErrUnavailable", err)
	}

	other := dbustest.Bus(t)
	portaltest.Start(t, other, portaltest.Options{Version: 2})
	if v, err := portal.Version(context.Background(), dbustest.Connect(t, other)); err != nil || v != 2 {
		t.Errorf("Version = %d, %v; want 2", v, err)
	}
}

// TestBind binds once, in both calls, on a KDE 5.27 backend and on a newer
// frontend; the one that binds what BindShortcuts gets without saying what
// is then asked with ListShortcuts.
func TestBind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  portaltest.Options
		calls []string
	}{
		{"kde 5.27", portaltest.Options{Version: 1, KDE527: true}, []string{"CreateSession", "BindShortcuts"}},
		{"frontend 1.18", portaltest.Options{Version: 1}, []string{"CreateSession", "BindShortcuts"}},
		{"no results", portaltest.Options{Version: 1, BindWithoutResults: true}, []string{"CreateSession", "BindShortcuts", "ListShortcuts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			address := dbustest.Bus(t)
			fake := portaltest.Start(t, address, tc.opts)
			c := open(t, address, defaultKeys)
			c.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
			if got := fake.Calls(); !slices.Equal(got, tc.calls) {
				t.Errorf("calls %v, want %v", got, tc.calls)
			}
			want := map[string]map[string]string{
				"allow": {"description": "Codexgate: allow the oldest card", "preferred_trigger": "CTRL+ALT+y"},
				"deny":  {"description": "Codexgate: deny the oldest card", "preferred_trigger": "CTRL+ALT+n"},
			}
			create, bind, _ := fake.Asked()
			for call, got := range map[string]map[string]map[string]string{"CreateSession": create, "BindShortcuts": bind} {
				if !maps.EqualFunc(got, want, maps.Equal) {
					t.Errorf("%s got shortcuts %v, want %v", call, got, want)
				}
			}
		})
	}
}

// TestActivated passes on an activation only while wanted, and never
// rebinds for it.
func TestActivated(t *testing.T) {
	advance := portal.SetClock(t)
	address := dbustest.Bus(t)
	fake := portaltest.Start(t, address, portaltest.Options{Version: 1, KDE527: true})
	c := open(t, address, defaultKeys)
	c.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
	// Signals come in order: a change seen means the activation before it
	// was handled.
	handled := func(trigger string) {
		fake.Change(t, "allow", trigger)
		c.triggers(t, map[string]string{"allow": trigger, "deny": "CTRL+ALT+n"})
		advance(time.Second)
	}

	fake.Activate(t, "allow") // no card open: ignored
	fake.Deactivate(t, "allow")
	handled("Ctrl+Alt+Y")
	c.Want(true)
	fake.Activate(t, "deny")
	fake.Deactivate(t, "deny")
	if got := c.press(t); got != "deny" {
		t.Errorf("press %q, want deny", got)
	}
	advance(time.Second)
	c.Want(false)
	fake.Activate(t, "deny")
	handled("Ctrl+Alt+A")
	c.Want(true)
	fake.Activate(t, "allow")
	if got := c.press(t); got != "allow" {
		t.Errorf("press %q, want allow (deny came while not wanted)", got)
	}
	if got := fake.Calls(); !slices.Equal(got, []string{"CreateSession", "BindShortcuts"}) {
		t.Errorf("calls %v: bound more than once", got)
	}
}

// TestRefused reports a binding the person refused, once, and holds no
// triggers.
func TestRefused(t *testing.T) {
	address := dbustest.Bus(t)
	portaltest.Start(t, address, portaltest.Options{Version: 1, Refuse: true})
	c := open(t, address, defaultKeys)
	if err := c.fail(t); !errors.Is(err, portal.ErrRefused) {
		t.Errorf("failure %v, want ErrRefused", err)
	}
	if got := c.Triggers(); len(got) != 0 {
		t.Errorf("triggers %v after a refusal", got)
	}
}

// TestAssignedElsewhere keeps what the compositor assigned, not what was
// preferred, and says so when it assigned nothing.
func TestAssignedElsewhere(t *testing.T) {
	address := dbustest.Bus(t)
	portaltest.Start(t, address, portaltest.Options{Version: 1, Assign: func(preferred string) string {
		if preferred == "CTRL+ALT+y" {
			return "Meta+Shift+Y"
		}
		return ""
	}})
	c := open(t, address, defaultKeys)
	c.triggers(t, map[string]string{"allow": "Meta+Shift+Y"})

	none := dbustest.Bus(t)
	portaltest.Start(t, none, portaltest.Options{Version: 1, Assign: func(string) string { return "" }})
	if err := open(t, none, defaultKeys).fail(t); err == nil {
		t.Error("no failure when no shortcut got a key")
	}
}

func TestShortcutsChanged(t *testing.T) {
	address := dbustest.Bus(t)
	fake := portaltest.Start(t, address, portaltest.Options{Version: 1})
	c := open(t, address, defaultKeys)
	c.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
	fake.Change(t, "deny", "Ctrl+Shift+D")
	c.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "Ctrl+Shift+D"})
	fake.Change(t, "allow", "")
	c.triggers(t, map[string]string{"deny": "Ctrl+Shift+D"})
}

// TestSetKeys binds new keys in a new session and closes the old one; the
// same keys, and Close, bind nothing more.
func TestSetKeys(t *testing.T) {
	address := dbustest.Bus(t)
	fake := portaltest.Start(t, address, portaltest.Options{Version: 1})
	c := open(t, address, defaultKeys)
	c.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
	c.SetKeys(maps.Clone(defaultKeys))
	c.SetKeys(map[string]string{"deny": "super+f9"})
	c.triggers(t, map[string]string{"deny": "LOGO+F9"})
	want := []string{"CreateSession", "BindShortcuts", "Session.Close", "CreateSession", "BindShortcuts"}
	if got := fake.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	c.Close()
	if _, _, closed := fake.Asked(); !closed {
		t.Error("Close left the session open")
	}
}

// TestSessionClosed reports a session the portal ended and passes nothing
// on after it.
func TestSessionClosed(t *testing.T) {
	address := dbustest.Bus(t)
	fake := portaltest.Start(t, address, portaltest.Options{Version: 1})
	c := open(t, address, defaultKeys)
	c.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
	c.Want(true)
	fake.CloseSession(t)
	if err := c.fail(t); err == nil {
		t.Error("no failure for a closed session")
	}
	if got := c.Triggers(); len(got) != 0 {
		t.Errorf("triggers %v after the session closed", got)
	}
	fake.Activate(t, "deny") // the closed session's
	c.SetKeys(map[string]string{"allow": "ctrl+alt+a"})
	c.triggers(t, map[string]string{"allow": "CTRL+ALT+a"})
	fake.Activate(t, "allow")
	if got := c.press(t); got != "allow" {
		t.Errorf("press %q, want allow (deny came from a closed session)", got)
	}
}

// TestRestartKeepsTheKeys opens the shortcuts again after a close, as a
// restarted app does: KDE 5.27 keeps the keys with the first session's
// component, so the second must find the same one. The keys it holds win
// over new preferred ones, and Triggers says so.
func TestRestartKeepsTheKeys(t *testing.T) {
	address := dbustest.Bus(t)
	fake := portaltest.Start(t, address, portaltest.Options{Version: 1, KDE527: true})
	first := open(t, address, defaultKeys)
	first.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
	first.Close()

	again := open(t, address, defaultKeys)
	again.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
	again.Want(true)
	fake.Activate(t, "deny")
	if got := again.press(t); got != "deny" {
		t.Errorf("press %q, want deny", got)
	}
	again.Close()

	changed := open(t, address, map[string]string{"allow": "ctrl+alt+a", "deny": "ctrl+alt+d"})
	changed.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
}

// TestRepeat passes on one activation of a held key, as X11 grabs do.
func TestRepeat(t *testing.T) {
	advance := portal.SetClock(t)
	address := dbustest.Bus(t)
	fake := portaltest.Start(t, address, portaltest.Options{Version: 1})
	c := open(t, address, defaultKeys)
	c.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
	c.Want(true)
	fake.Activate(t, "deny")
	fake.Activate(t, "deny") // repeated while held
	fake.Activate(t, "allow")
	if got := []string{c.press(t), c.press(t)}; !slices.Equal(got, []string{"deny", "allow"}) {
		t.Errorf("presses %v, want deny, allow", got)
	}
	advance(time.Second)
	fake.Activate(t, "deny")
	if got := c.press(t); got != "deny" {
		t.Errorf("press %q after the key was let go, want deny", got)
	}
}

// TestForgedActivationIsIgnored: any client of the session bus can send a
// signal straight to Codexgate's connection, whatever its match rules, and
// the session's path is known from the connection's name. Only the portal's
// own activations count.
func TestForgedActivationIsIgnored(t *testing.T) {
	portal.SetClock(t)
	address := dbustest.Bus(t)
	fake := portaltest.Start(t, address, portaltest.Options{Version: 1, KDE527: true})
	conn := dbustest.Connect(t, address)
	c := &client{presses: make(chan string, 8), fails: make(chan error, 8)}
	s, err := portal.Open(context.Background(), conn, defaultKeys,
		func(name string) { c.presses <- name }, func(err error) { c.fails <- err },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c.Shortcuts = s
	c.triggers(t, map[string]string{"allow": "CTRL+ALT+y", "deny": "CTRL+ALT+n"})
	c.Want(true)

	forger := dbustest.Connect(t, address)
	name := conn.Names()[0]
	session := dbus.ObjectPath("/org/freedesktop/portal/desktop/session/" + strings.ReplaceAll(name[1:], ".", "_") + "/" + portal.SessionToken)
	msg := &dbus.Message{Type: dbus.TypeSignal, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldPath:        dbus.MakeVariant(portal.ObjectPath),
		dbus.FieldInterface:   dbus.MakeVariant(portal.Interface),
		dbus.FieldMember:      dbus.MakeVariant("Activated"),
		dbus.FieldDestination: dbus.MakeVariant(name),
		dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(session, "allow", uint64(1), map[string]dbus.Variant{})),
	}, Body: []any{session, "allow", uint64(1), map[string]dbus.Variant{}}}
	if err := forger.Send(msg, nil).Err; err != nil {
		t.Fatal(err)
	}
	// A round trip through the bus: the forged signal is routed before the
	// portal's own below.
	if err := forger.BusObject().Call("org.freedesktop.DBus.GetId", 0).Err; err != nil {
		t.Fatal(err)
	}
	fake.Activate(t, "deny")
	if got := c.press(t); got != "deny" {
		t.Errorf("press %q: a forged activation was passed on", got)
	}
}
