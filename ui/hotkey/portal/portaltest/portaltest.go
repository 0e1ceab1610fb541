// Package portaltest is a fake org.freedesktop.portal.GlobalShortcuts on a
// private session bus, for tests. It answers CreateSession, BindShortcuts
// and ListShortcuts through Request objects as the real portal does (each
// Response sent to the caller alone, and before the method's reply, so a
// client that does not watch the predicted request path loses it), and
// emits Activated, Deactivated and ShortcutsChanged when a test asks.
package portaltest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"

	"codexgate/ui/dbustest"
	"codexgate/ui/hotkey/portal"
)

// Options shape the fake.
type Options struct {
	// Version of the GlobalShortcuts interface; 0: the portal has none.
	Version uint32
	// KDE527 registers only the shortcuts given in CreateSession's
	// "shortcuts" option and ignores BindShortcuts' list, as
	// xdg-desktop-portal-kde 5.27 does. Like it, the fake keeps the keys in
	// a component named after the session token, which outlives the
	// session: a component that exists keeps its keys, and a key another
	// component holds is not given again. Otherwise the fake is a newer
	// frontend, which ignores that option.
	KDE527 bool
	// Refuse answers BindShortcuts with response 1, as when the person
	// cancels the dialog.
	Refuse bool
	// BindWithoutResults answers BindShortcuts with no "shortcuts", so the
	// client must ListShortcuts.
	BindWithoutResults bool
	// Assign maps a preferred trigger to what the compositor assigns and
	// describes; nil assigns the preferred trigger as it is, "" none.
	Assign func(preferred string) string
}

// Portal is the fake, owning org.freedesktop.portal.Desktop on its bus.
type Portal struct {
	conn *dbus.Conn
	opts Options

	mu         sync.Mutex // protects everything below
	sessions   map[dbus.ObjectPath]*session
	components map[string]map[string]string // KDE527: by session token, shortcut ID to key
	held       map[string]string            // KDE527: key to the component that holds it
	calls      []string
	last       *session
}

type session struct {
	owner     string
	path      dbus.ObjectPath
	shortcuts []portal.Shortcut // as bound, with trigger_description
	asked     []portal.Shortcut // as given to CreateSession's "shortcuts"
	bound     []portal.Shortcut // as given to BindShortcuts
	closed    bool
}

// Start runs the fake on the bus at address until the test ends.
func Start(t testing.TB, address string, opts Options) *Portal {
	t.Helper()
	p := &Portal{conn: dbustest.Connect(t, address), opts: opts, sessions: map[dbus.ObjectPath]*session{},
		components: map[string]map[string]string{}, held: map[string]string{}}
	if err := p.conn.Export(properties{p}, portal.ObjectPath, "org.freedesktop.DBus.Properties"); err != nil {
		t.Fatal(err)
	}
	if opts.Version > 0 {
		if err := p.conn.Export(shortcutsIface{p}, portal.ObjectPath, portal.Interface); err != nil {
			t.Fatal(err)
		}
	}
	if reply, err := p.conn.RequestName(portal.BusName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: %v %v", portal.BusName, reply, err)
	}
	return p
}

// Calls are the portal methods called so far, in order.
func (p *Portal) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

// Asked returns, for the newest session, the shortcuts given to
// CreateSession's "shortcuts" option and to BindShortcuts, by ID, each as
// its options; and whether that session is closed.
func (p *Portal) Asked() (create, bind map[string]map[string]string, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return nil, nil, false
	}
	return flatten(p.last.asked), flatten(p.last.bound), p.last.closed
}

func flatten(list []portal.Shortcut) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, s := range list {
		out[s.ID] = map[string]string{}
		for k, v := range s.Options {
			out[s.ID][k], _ = v.Value().(string)
		}
	}
	return out
}

// Activate emits Activated for shortcut id of the newest session.
func (p *Portal) Activate(t testing.TB, id string) { p.emitKey(t, "Activated", id) }

// Deactivate emits Deactivated for shortcut id of the newest session.
func (p *Portal) Deactivate(t testing.TB, id string) { p.emitKey(t, "Deactivated", id) }

func (p *Portal) emitKey(t testing.TB, member, id string) {
	t.Helper()
	p.mu.Lock()
	s := p.last
	p.mu.Unlock()
	if s == nil {
		t.Fatalf("%s %s: no session", member, id)
	}
	p.signal(t, s.owner, portal.ObjectPath, portal.Interface+"."+member, s.path, id, uint64(1), map[string]dbus.Variant{})
}

// Change reassigns a shortcut of the newest session, as the person does in
// the desktop's settings, and emits ShortcutsChanged.
func (p *Portal) Change(t testing.TB, id, trigger string) {
	t.Helper()
	p.mu.Lock()
	s := p.last
	var list []portal.Shortcut
	if s != nil {
		for i, sc := range s.shortcuts {
			if sc.ID == id {
				opts := maps.Clone(sc.Options)
				opts["trigger_description"] = dbus.MakeVariant(trigger)
				s.shortcuts[i].Options = opts
			}
		}
		list = append(list, s.shortcuts...)
	}
	p.mu.Unlock()
	if s == nil {
		t.Fatalf("change %s: no session", id)
	}
	p.signal(t, s.owner, portal.ObjectPath, portal.Interface+".ShortcutsChanged", s.path, list)
}

// signal sends a signal to one connection, as the portal does.
func (p *Portal) signal(t testing.TB, dest string, path dbus.ObjectPath, name string, body ...any) {
	t.Helper()
	if err := p.send(dest, path, name, body...); err != nil {
		t.Fatalf("emit %s: %v", name, err)
	}
}

func (p *Portal) send(dest string, path dbus.ObjectPath, name string, body ...any) error {
	i := strings.LastIndex(name, ".")
	msg := &dbus.Message{Type: dbus.TypeSignal, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldPath:        dbus.MakeVariant(path),
		dbus.FieldInterface:   dbus.MakeVariant(name[:i]),
		dbus.FieldMember:      dbus.MakeVariant(name[i+1:]),
		dbus.FieldDestination: dbus.MakeVariant(dest),
		dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(body...)),
	}, Body: body}
	return p.conn.Send(msg, nil).Err
}

// respond answers a request with a Response sent to its caller.
func (p *Portal) respond(sender dbus.Sender, token string, code uint32, results map[string]dbus.Variant) (dbus.ObjectPath, *dbus.Error) {
	path := requestPath(sender, token)
	if err := p.send(string(sender), path, portal.RequestIface+".Response", code, results); err != nil {
		return "", dbus.MakeFailedError(err)
	}
	return path, nil
}

func requestPath(sender dbus.Sender, token string) dbus.ObjectPath {
	return dbus.ObjectPath("/org/freedesktop/portal/desktop/request/" + escape(sender) + "/" + token)
}

func escape(sender dbus.Sender) string {
	return strings.ReplaceAll(strings.TrimPrefix(string(sender), ":"), ".", "_")
}

func (p *Portal) assign(list []portal.Shortcut) []portal.Shortcut {
	var out []portal.Shortcut
	for _, sc := range list {
		preferred, _ := sc.Options["preferred_trigger"].Value().(string)
		trigger := preferred
		if p.opts.Assign != nil {
			trigger = p.opts.Assign(preferred)
		}
		desc, _ := sc.Options["description"].Value().(string)
		out = append(out, portal.Shortcut{ID: sc.ID, Options: map[string]dbus.Variant{
			"description":         dbus.MakeVariant(desc),
			"trigger_description": dbus.MakeVariant(trigger),
		}})
	}
	return out
}

// component gives list the keys of the component token, made from list's
// keys when new, as KGlobalAccel does under xdg-desktop-portal-kde 5.27.
func (p *Portal) component(token string, list []portal.Shortcut) []portal.Shortcut {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys, ok := p.components[token]
	if !ok {
		keys = map[string]string{}
		for _, sc := range list {
			key, _ := sc.Options["trigger_description"].Value().(string)
			if holder, taken := p.held[key]; key == "" || taken && holder != token {
				continue
			}
			p.held[key] = token
			keys[sc.ID] = key
		}
		p.components[token] = keys
	}
	var out []portal.Shortcut
	for _, sc := range list {
		opts := maps.Clone(sc.Options)
		opts["trigger_description"] = dbus.MakeVariant(keys[sc.ID])
		out = append(out, portal.Shortcut{ID: sc.ID, Options: opts})
	}
	return out
}

func (p *Portal) session(sender dbus.Sender, path dbus.ObjectPath) (*session, *dbus.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sessions[path]
	if s == nil || s.closed || s.owner != string(sender) {
		return nil, dbus.MakeFailedError(fmt.Errorf("no session %s", path))
	}
	return s, nil
}

func option(opts map[string]dbus.Variant, key string) string {
	v, _ := opts[key].Value().(string)
	return v
}

type properties struct{ p *Portal }

func (pr properties) Get(iface, name string) (dbus.Variant, *dbus.Error) {
	if iface != portal.Interface || pr.p.opts.Version == 0 || name != "version" {
		return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{"no such property " + iface + "." + name})
	}
	return dbus.MakeVariant(pr.p.opts.Version), nil
}

type shortcutsIface struct{ p *Portal }

func (si shortcutsIface) CreateSession(sender dbus.Sender, opts map[string]dbus.Variant) (dbus.ObjectPath, *dbus.Error) {
	p := si.p
	s := &session{owner: string(sender), path: dbus.ObjectPath("/org/freedesktop/portal/desktop/session/" + escape(sender) + "/" + option(opts, "session_handle_token"))}
	if v, ok := opts["shortcuts"]; ok {
		if err := v.Store(&s.asked); err != nil {
			return "", dbus.MakeFailedError(fmt.Errorf("shortcuts: %w", err))
		}
	}
	if p.opts.KDE527 {
		s.shortcuts = p.component(option(opts, "session_handle_token"), p.assign(s.asked))
	}
	if err := p.conn.Export(sessionIface{p, s}, s.path, portal.SessionIface); err != nil {
		return "", dbus.MakeFailedError(err)
	}
	p.mu.Lock()
	p.sessions[s.path] = s
	p.last = s
	p.calls = append(p.calls, "CreateSession")
	p.mu.Unlock()
	return p.respond(sender, option(opts, "handle_token"), 0, map[string]dbus.Variant{"session_handle": dbus.MakeVariant(string(s.path))})
}

func (si shortcutsIface) BindShortcuts(sender dbus.Sender, path dbus.ObjectPath, list []portal.Shortcut, parent string, opts map[string]dbus.Variant) (dbus.ObjectPath, *dbus.Error) {
	p := si.p
	s, derr := p.session(sender, path)
	if derr != nil {
		return "", derr
	}
	p.mu.Lock()
	p.calls = append(p.calls, "BindShortcuts")
	s.bound = list
	if p.opts.Refuse {
		p.mu.Unlock()
		return p.respond(sender, option(opts, "handle_token"), 1, map[string]dbus.Variant{})
	}
	if !p.opts.KDE527 {
		s.shortcuts = p.assign(list)
	}
	results := map[string]dbus.Variant{"shortcuts": dbus.MakeVariant(slices.Clone(s.shortcuts))}
	if p.opts.BindWithoutResults {
		results = map[string]dbus.Variant{}
	}
	p.mu.Unlock()
	return p.respond(sender, option(opts, "handle_token"), 0, results)
}

func (si shortcutsIface) ListShortcuts(sender dbus.Sender, path dbus.ObjectPath, opts map[string]dbus.Variant) (dbus.ObjectPath, *dbus.Error) {
	p := si.p
	s, derr := p.session(sender, path)
	if derr != nil {
		return "", derr
	}
	p.mu.Lock()
	p.calls = append(p.calls, "ListShortcuts")
	list := append([]portal.Shortcut{}, s.shortcuts...)
	p.mu.Unlock()
	return p.respond(sender, option(opts, "handle_token"), 0, map[string]dbus.Variant{"shortcuts": dbus.MakeVariant(list)})
}

type sessionIface struct {
	p *Portal
	s *session
}

func (si sessionIface) Close(sender dbus.Sender) *dbus.Error {
	p := si.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if string(sender) != si.s.owner {
		return dbus.MakeFailedError(fmt.Errorf("not your session"))
	}
	si.s.closed = true
	p.calls = append(p.calls, "Session.Close")
	return nil
}

// CloseSession ends the newest session from the portal's side and emits
// Closed, as when the portal goes away.
func (p *Portal) CloseSession(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	s := p.last
	if s != nil {
		s.closed = true
	}
	p.mu.Unlock()
	if s == nil {
		t.Fatal("close: no session")
	}
	p.signal(t, s.owner, s.path, portal.SessionIface+".Closed", map[string]dbus.Variant{})
}
