package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"codexgate/sessionbus"

	"github.com/godbus/dbus/v5"
)

// The freedesktop notification server, as the Desktop Notifications
// Specification names it.
const (
	busName      = "org.freedesktop.Notifications"
	busPath      = dbus.ObjectPath("/org/freedesktop/Notifications")
	busInterface = "org.freedesktop.Notifications"
	callTimeout  = 5 * time.Second
)

var errNoBus = errors.New("no session bus")

// note is one notification as a server is asked to show it. Its texts
// are escaped for markup just before they are sent.
type note struct {
	replaces uint32
	title    string
	body     string
	actions  []string // key, label, key, label...
	// sticky notifications stay until taken back: a card's stays as long
	// as the card is open.
	sticky bool
}

// server shows notifications: the session bus's notification server, or a
// fallback without ids or actions.
type server interface {
	// show returns the notification's id, 0 when it cannot be taken back.
	show(ctx context.Context, n note) (uint32, error)
	takeBack(ctx context.Context, id uint32) error
	// can reports a capability of the server ("actions", "body", "body-markup").
	can(capability string) bool
	// showsWholeBody reports whether the server is known to show a body of
	// wholeRows rows whole, now: most collapse a long body to a line or two
	// until it is expanded, or cut it, and say nothing of it.
	showsWholeBody(ctx context.Context) bool
	// signals are ActionInvoked and NotificationClosed, from the server
	// only; nil when there are none. The channel closes with the connection.
	signals() <-chan *dbus.Signal
	// from reports whether sig was sent by the notification server, and
	// whether the server changed since the notifications known were shown.
	from(ctx context.Context, sig *dbus.Signal) (ok, changed bool)
	close()
}

// bus is a private connection to the notification server: the notifier's
// own, so that its signals reach only the notifier and it closes with it.
type bus struct {
	conn  *dbus.Conn
	obj   dbus.BusObject
	caps  map[string]bool
	name  string // the server's name, from GetServerInformation
	owner string // the unique name of the server
	sigs  chan *dbus.Signal
}

// dialBus connects to the session bus at address and asks its notification
// server for its capabilities; it fails when there is no bus or no server.
// It never starts a bus: an empty address is no bus.
func dialBus(ctx context.Context, address string) (*bus, error) {
	if address == "" {
		return nil, errNoBus
	}
	conn, err := dbus.Connect(address, dbus.WithSignalHandler(dbus.NewSequentialSignalHandler()))
	if err != nil {
		return nil, fmt.Errorf("connect to the session bus: %w", err)
	}
	b := &bus{conn: conn, obj: conn.Object(busName, busPath), caps: map[string]bool{}, sigs: make(chan *dbus.Signal, 64)}
	var caps []string
	if err := b.call(ctx, "GetCapabilities").Store(&caps); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ask the notification server for its capabilities: %w", err)
	}
	for _, c := range caps {
		b.caps[c] = true
	}
	var vendor, version, spec string
	if err := b.call(ctx, "GetServerInformation").Store(&b.name, &vendor, &version, &spec); err != nil {
		b.name = "" // a server that does not say which it is shows nothing whole
	}
	if err := b.resolveOwner(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	if err := conn.AddMatchSignalContext(ctx, dbus.WithMatchSender(busName), dbus.WithMatchObjectPath(busPath), dbus.WithMatchInterface(busInterface)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("listen to the notification server: %w", err)
	}
	conn.Signal(b.sigs)
	return b, nil
}

func (b *bus) call(ctx context.Context, method string, args ...any) *dbus.Call {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return b.obj.CallWithContext(ctx, busInterface+"."+method, 0, args...)
}

func (b *bus) resolveOwner(ctx context.Context) error {
	owner, err := sessionbus.Owner(ctx, b.conn, busName)
	if err != nil {
		return fmt.Errorf("find the notification server: %w", err)
	}
	b.owner = owner
	return nil
}

func (b *bus) show(ctx context.Context, n note) (uint32, error) {
	expire := int32(-1) // the server's default
	if n.sticky {
		expire = 0 // never
	}
	actions := n.actions
	if actions == nil {
		actions = []string{}
	}
	hints := map[string]dbus.Variant{"urgency": dbus.MakeVariant(byte(1))}
	var id uint32
	err := b.call(ctx, "Notify", "Codexgate", n.replaces, "", n.title, n.body, actions, hints, expire).Store(&id)
	if err != nil {
		return 0, fmt.Errorf("notify: %w", err)
	}
	return id, nil
}

func (b *bus) takeBack(ctx context.Context, id uint32) error {
	if err := b.call(ctx, "CloseNotification", id).Err; err != nil {
		return fmt.Errorf("close notification %d: %w", id, err)
	}
	return nil
}

func (b *bus) can(capability string) bool { return b.caps[capability] }

// wholeBodyServers show a body of wholeRows rows of wholeColumns whole, at
// their default size: dunst (300 by 300 pixels). GNOME Shell and KDE Plasma
// collapse a banner's body to a line or two.
var wholeBodyServers = map[string]bool{"dunst": true}

// showsWholeBody asks dunst, too, whether it is paused (do not disturb):
// then it shows nothing until resumed.
func (b *bus) showsWholeBody(ctx context.Context) bool {
	if !wholeBodyServers[b.name] {
		return false
	}
	var paused bool
	err := b.obj.CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, dunstInterface, "paused").Store(&paused)
	return err == nil && !paused
}

// dunstInterface is dunst's own, beside the standard one.
const dunstInterface = "org.dunstproject.cmd0"

func (b *bus) signals() <-chan *dbus.Signal { return b.sigs }

// from checks the sender: a signal sent straight to this connection
// reaches it whatever the match rules, and any client of the bus could
// send one that looks like a click on Allow. A server that restarted has
// a new unique name, so a mismatch is checked against the current owner.
// When the name passed to another client (the server restarted, or quit or
// was killed and any client took the name), the ids of the notifications
// shown so far were the old server's: changed is set, and the signal, which
// may name one of them, does not count.
func (b *bus) from(ctx context.Context, sig *dbus.Signal) (ok, changed bool) {
	if sig.Path != busPath {
		return false, false
	}
	if sig.Sender == b.owner {
		return true, false
	}
	old := b.owner
	if err := b.resolveOwner(ctx); err != nil {
		return false, false
	}
	return false, b.owner != old
}

func (b *bus) close() { b.conn.Close() }

// fallback is a server that can only show text (beeep elsewhere than on a
// session bus's notification server).
type fallback struct{ send Sender }

func (f fallback) show(_ context.Context, n note) (uint32, error) {
	if f.send == nil {
		return 0, nil
	}
	return 0, f.send(n.title, n.body)
}

func (fallback) takeBack(context.Context, uint32) error { return nil }

// can: the fallback may reach a server that parses markup, so texts are
// escaped; it shows nothing that could be answered, nor the whole card.
func (fallback) can(capability string) bool { return capability == "body-markup" }

func (fallback) showsWholeBody(context.Context) bool { return false }

func (fallback) signals() <-chan *dbus.Signal { return nil }

func (fallback) from(context.Context, *dbus.Signal) (ok, changed bool) { return false, false }

func (fallback) close() {}
