package notify

import (
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

// call is one method call the fake server received.
type call struct {
	method   string
	id       uint32 // the notification's id: returned by Notify, or closed
	replaces uint32
	title    string
	body     string
	actions  []string
	expire   int32
}

// fakeServer is an org.freedesktop.Notifications server with the given
// capabilities that records what it is asked.
type fakeServer struct {
	t    *testing.T
	conn *dbus.Conn
	caps []string
	name string // as GetServerInformation says
	// props holds dunst's "paused".
	props *prop.Properties

	mu    sync.Mutex // protects calls, next, beforeReplace
	calls []call
	next  uint32
	// beforeReplace, when set, runs once when a Notify replaces a
	// notification, before it is answered: what the person did while the
	// server was busy (a context menu open, say) reaches the client first.
	beforeReplace func(id uint32)
}

func startServer(t *testing.T, address, name string, caps ...string) *fakeServer {
	t.Helper()
	conn, err := dbus.Connect(address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fakeServer{t: t, conn: conn, caps: caps, name: name}
	if err := conn.Export(f, busPath, busInterface); err != nil {
		t.Fatal(err)
	}
	// dunst's own interface: whether it is paused (do not disturb).
	f.props, err = prop.Export(conn, busPath, prop.Map{dunstInterface: {"paused": {Value: false, Writable: true, Emit: prop.EmitFalse}}})
	if err != nil {
		t.Fatal(err)
	}
	if reply, err := conn.RequestName(busName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("request %s: %v %v", busName, reply, err)
	}
	return f
}

func (f *fakeServer) GetCapabilities() ([]string, *dbus.Error) { return f.caps, nil }

// pause pauses the server, or resumes it, as `dunstctl set-paused` does.
func (f *fakeServer) pause(paused bool) { f.props.SetMust(dunstInterface, "paused", paused) }

func (f *fakeServer) GetServerInformation() (string, string, string, string, *dbus.Error) {
	return f.name, "codexgate", "1", "1.2", nil
}

func (f *fakeServer) Notify(app string, replaces uint32, icon, title, body string, actions []string, hints map[string]dbus.Variant, expire int32) (uint32, *dbus.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := replaces
	if id == 0 {
		f.next++
		id = f.next
	}
	f.calls = append(f.calls, call{method: "Notify", id: id, replaces: replaces, title: title, body: body, actions: actions, expire: expire})
	if before := f.beforeReplace; before != nil && replaces != 0 {
		f.beforeReplace = nil
		before(replaces)
	}
	return id, nil
}

func (f *fakeServer) CloseNotification(id uint32) *dbus.Error {
	f.mu.Lock()
	f.calls = append(f.calls, call{method: "CloseNotification", id: id})
	f.mu.Unlock()
	f.closed(id, 3)
	return nil
}

// invoke is a person choosing an action; like most servers, it then
// closes the notification.
func (f *fakeServer) invoke(id uint32, key string) {
	f.t.Helper()
	if err := f.conn.Emit(busPath, busInterface+".ActionInvoked", id, key); err != nil {
		f.t.Fatal(err)
	}
	f.closed(id, 2)
}

// closed announces a closed notification. It may come after the test
// ended and closed the connection; then nobody listens any more.
func (f *fakeServer) closed(id, reason uint32) {
	_ = f.conn.Emit(busPath, busInterface+".NotificationClosed", id, reason)
}

// wait returns the calls once there are n.
func (f *fakeServer) wait(n int) []call {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		calls := append([]call(nil), f.calls...)
		f.mu.Unlock()
		if len(calls) >= n {
			return calls
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%d calls, want %d: %+v", len(calls), n, calls)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
