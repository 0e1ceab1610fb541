package portal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"

	"codexgate/config/keys"
	"codexgate/sessionbus"
)

// The portal's names, from the xdg-desktop-portal documentation.
const (
	BusName       = "org.freedesktop.portal.Desktop"
	ObjectPath    = dbus.ObjectPath("/org/freedesktop/portal/desktop")
	Interface     = "org.freedesktop.portal.GlobalShortcuts"
	RequestIface  = "org.freedesktop.portal.Request"
	SessionIface  = "org.freedesktop.portal.Session"
	requestPrefix = "/org/freedesktop/portal/desktop/request/"
	sessionPrefix = "/org/freedesktop/portal/desktop/session/"
	closeTimeout  = 5 * time.Second
	// repeatGap drops activations that follow one another this closely, as
	// X11 auto-repeat does for a held key: one press answers at most one
	// card, whatever the compositor sends while a key is held.
	repeatGap       = 500 * time.Millisecond
	responseSuccess = 0
	responseRefused = 1
)

// Descriptions are what the compositor shows for each shortcut.
var Descriptions = map[string]string{
	"allow": "Codexgate: allow the oldest card",
	"deny":  "Codexgate: deny the oldest card",
}

// clock tells the time for the repeat filter; tests replace it.
var clock = time.Now

// SessionToken names every session, and is the same each time: with no
// app ID (an application outside a sandbox), xdg-desktop-portal-kde 5.27
// names the shortcuts' KGlobalAccel component after it. A component keeps
// its keys after its session closes, so a new token each start would leave
// the keys with the old component and bind nothing; a stable one finds the
// same component again, with the keys the person gave it. A connection has
// one session at a time, so the token is unique where it has to be.
const SessionToken = "codexgate"

// ErrUnavailable means the session bus has no portal with GlobalShortcuts.
var ErrUnavailable = errors.New("the desktop portal offers no GlobalShortcuts")

// ErrRefused means the person (or the compositor) refused the binding.
var ErrRefused = errors.New("the desktop refused to bind the shortcuts")

// Shortcut is one shortcut as the portal sends it: a(sa{sv}).
type Shortcut struct {
	ID      string
	Options map[string]dbus.Variant
}

// Version returns the version of the portal's GlobalShortcuts interface,
// or ErrUnavailable. A portal that is not running yet is started by the bus.
func Version(ctx context.Context, conn *dbus.Conn) (uint32, error) {
	var v dbus.Variant
	err := conn.Object(BusName, ObjectPath).CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, Interface, "version").Store(&v)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	version, ok := v.Value().(uint32)
	if !ok || version == 0 {
		return 0, fmt.Errorf("%w: version is %v", ErrUnavailable, v)
	}
	return version, nil
}

// Trigger turns a configured key ("ctrl+alt+y") into the portal's trigger
// syntax, the XDG shortcuts specification's ("CTRL+ALT+y"): upper-case
// modifiers, then an XKB keysym name.
func Trigger(spec string) (string, error) {
	if _, err := keys.Parse(spec); err != nil {
		return "", err
	}
	parts := strings.Split(strings.ToLower(strings.TrimSpace(spec)), "+")
	var out []string
	for _, p := range parts[:len(parts)-1] {
		switch strings.TrimSpace(p) {
		case "ctrl", "control":
			out = append(out, "CTRL")
		case "alt":
			out = append(out, "ALT")
		case "shift":
			out = append(out, "SHIFT")
		case "super", "win":
			out = append(out, "LOGO")
		}
	}
	key := strings.TrimSpace(parts[len(parts)-1])
	if len(key) > 1 { // F1-F12; letters and digits are their own keysym names
		key = strings.ToUpper(key)
	}
	return strings.Join(append(out, key), "+"), nil
}

// Shortcuts is a bound GlobalShortcuts session.
type Shortcuts struct {
	conn    *dbus.Conn
	sender  string // the connection's unique name as request paths spell it
	owner   string // the portal's unique name; used by the listen goroutine
	onPress func(name string)
	onFail  func(error)
	log     *slog.Logger
	signals chan *dbus.Signal
	rebind  chan map[string]string // 1-buffered: the newest keys
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu       sync.Mutex // protects everything below
	want     bool
	keys     map[string]string
	session  dbus.ObjectPath
	triggers map[string]string
	pending  map[dbus.ObjectPath]chan response
	last     map[string]time.Time // the latest activation of each shortcut
	closed   bool
}

type response struct {
	code    uint32
	results map[string]dbus.Variant
}

// Open binds keys (name to "ctrl+alt+y") through the portal on conn, which
// it takes over: Close closes it (after an error the caller keeps it). It
// fails with ErrUnavailable when the portal offers no GlobalShortcuts. The
// binding goes on in the background, since the desktop may ask the person
// first; its failure goes to onFail, once per set of keys. onPress gets the
// name of an activated shortcut while Want(true).
func Open(ctx context.Context, conn *dbus.Conn, keyset map[string]string, onPress func(name string), onFail func(error), log *slog.Logger) (*Shortcuts, error) {
	version, err := Version(ctx, conn)
	if err != nil {
		return nil, err
	}
	names := conn.Names()
	if len(names) == 0 {
		return nil, errors.New("the session bus gave no unique name")
	}
	s := &Shortcuts{
		conn:     conn,
		sender:   strings.ReplaceAll(strings.TrimPrefix(names[0], ":"), ".", "_"),
		onPress:  onPress,
		onFail:   onFail,
		log:      log,
		signals:  make(chan *dbus.Signal, 16),
		rebind:   make(chan map[string]string, 1),
		keys:     keyset,
		triggers: map[string]string{},
		pending:  map[dbus.ObjectPath]chan response{},
		last:     map[string]time.Time{},
	}
	s.owner, _ = sessionbus.Owner(ctx, conn, BusName) // "" is found again at the first signal
	// The portal sends its signals to this connection only; the match rules
	// are for buses that route them by rule all the same.
	for _, m := range [][]dbus.MatchOption{
		{dbus.WithMatchInterface(RequestIface), dbus.WithMatchMember("Response"), dbus.WithMatchPathNamespace(dbus.ObjectPath(requestPrefix + s.sender))},
		{dbus.WithMatchInterface(SessionIface), dbus.WithMatchMember("Closed"), dbus.WithMatchPathNamespace(dbus.ObjectPath(sessionPrefix + s.sender))},
		{dbus.WithMatchInterface(Interface), dbus.WithMatchObjectPath(ObjectPath)},
	} {
		if err := conn.AddMatchSignalContext(ctx, m...); err != nil {
			return nil, fmt.Errorf("watch the portal's signals: %w", err)
		}
	}
	conn.Signal(s.signals)
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(2)
	go s.listen(runCtx)
	go s.bindLoop(runCtx, keyset)
	log.Info("global hotkeys through the desktop portal", "version", version)
	return s, nil
}

// Want passes activations on (on) or ignores them (off). The binding stays.
func (s *Shortcuts) Want(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want = on
}

// SetKeys binds new keys in a new session; the same keys change nothing.
func (s *Shortcuts) SetKeys(keyset map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || maps.Equal(keyset, s.keys) {
		return
	}
	s.keys = keyset
	select {
	case <-s.rebind:
	default:
	}
	s.rebind <- keyset
}

// Triggers returns the keys the compositor assigned, by name, as it
// describes them ("Ctrl+Alt+Y"); a shortcut with no key is left out.
func (s *Shortcuts) Triggers() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.triggers)
}

// Close ends the session, which releases the shortcuts, and the connection.
func (s *Shortcuts) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.conn.RemoveSignal(s.signals)
	s.conn.Close()
}

// bindLoop binds keys, then again each time they change, until ctx ends.
func (s *Shortcuts) bindLoop(ctx context.Context, keyset map[string]string) {
	defer s.wg.Done()
	for {
		if err := s.bind(ctx, keyset); err != nil && ctx.Err() == nil {
			s.log.Warn("global hotkeys are not bound", "err", err)
			s.onFail(err)
		}
		select {
		case <-ctx.Done():
			s.closeSession()
			return
		case keyset = <-s.rebind:
			s.closeSession()
		}
	}
}

// bind creates a session and binds keyset in it.
func (s *Shortcuts) bind(ctx context.Context, keyset map[string]string) error {
	shortcuts, err := shortcutList(keyset)
	if err != nil || len(shortcuts) == 0 {
		return err
	}
	// xdg-desktop-portal-kde 5.27 registers only the shortcuts given to
	// CreateSession, under this key of its own, and its BindShortcuts
	// returns what the session already has; newer frontends drop the key
	// and bind what BindShortcuts gets. Both get the list.
	res, err := s.request(ctx, "CreateSession", func(handle string) []any {
		return []any{map[string]dbus.Variant{
			"handle_token":         dbus.MakeVariant(handle),
			"session_handle_token": dbus.MakeVariant(SessionToken),
			"shortcuts":            dbus.MakeVariant(shortcuts),
		}}
	})
	if err != nil {
		return fmt.Errorf("create a shortcut session: %w", err)
	}
	session := dbus.ObjectPath(sessionPrefix + s.sender + "/" + SessionToken)
	// The documentation says s; older portals sent o.
	switch h := res["session_handle"].Value().(type) {
	case string:
		session = dbus.ObjectPath(h)
	case dbus.ObjectPath:
		session = h
	}
	s.mu.Lock()
	s.session = session
	s.mu.Unlock()

	res, err = s.request(ctx, "BindShortcuts", func(handle string) []any {
		return []any{session, shortcuts, "", map[string]dbus.Variant{"handle_token": dbus.MakeVariant(handle)}}
	})
	if err != nil {
		return fmt.Errorf("bind the shortcuts: %w", err)
	}
	bound, ok := res["shortcuts"]
	if !ok {
		res, err = s.request(ctx, "ListShortcuts", func(handle string) []any {
			return []any{session, map[string]dbus.Variant{"handle_token": dbus.MakeVariant(handle)}}
		})
		if err != nil {
			return fmt.Errorf("list the bound shortcuts: %w", err)
		}
		bound = res["shortcuts"]
	}
	var list []Shortcut
	if err := bound.Store(&list); err != nil {
		return fmt.Errorf("the portal's shortcuts: %w", err)
	}
	if n := s.setTriggers(list, "global hotkeys bound"); n == 0 {
		return errors.New("the desktop assigned no key to any shortcut: set them in its shortcut settings")
	}
	return nil
}

// shortcutList is what is asked of the portal for keyset, in a stable order.
func shortcutList(keyset map[string]string) ([]Shortcut, error) {
	var list []Shortcut
	for _, name := range slices.Sorted(maps.Keys(keyset)) {
		if keyset[name] == "" {
			continue
		}
		trigger, err := Trigger(keyset[name])
		if err != nil {
			return nil, fmt.Errorf("hotkey %s: %w", name, err)
		}
		description := Descriptions[name]
		if description == "" {
			description = "Codexgate: " + name
		}
		list = append(list, Shortcut{ID: name, Options: map[string]dbus.Variant{
			"description":       dbus.MakeVariant(description),
			"preferred_trigger": dbus.MakeVariant(trigger),
		}})
	}
	return list, nil
}

// setTriggers keeps and logs the keys the compositor assigned, and returns
// how many shortcuts have one.
func (s *Shortcuts) setTriggers(list []Shortcut, msg string) int {
	triggers := map[string]string{}
	for _, sc := range list {
		if t, _ := sc.Options["trigger_description"].Value().(string); t != "" {
			triggers[sc.ID] = t
		}
	}
	s.mu.Lock()
	s.triggers = triggers
	s.mu.Unlock()
	var attrs []any
	for _, name := range slices.Sorted(maps.Keys(triggers)) {
		attrs = append(attrs, name, triggers[name])
	}
	s.log.Info(msg, attrs...)
	return len(triggers)
}

// request calls a portal method that answers through a Request object and
// waits for its Response. args gets the handle_token. The Request's path
// is predicted from the token and watched before the call, so a Response
// sent before the call returns is not lost.
func (s *Shortcuts) request(ctx context.Context, method string, args func(handle string) []any) (map[string]dbus.Variant, error) {
	handle := token()
	path := dbus.ObjectPath(requestPrefix + s.sender + "/" + handle)
	ch := make(chan response, 1)
	s.mu.Lock()
	s.pending[path] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, path)
		s.mu.Unlock()
	}()
	var got dbus.ObjectPath
	if err := s.conn.Object(BusName, ObjectPath).CallWithContext(ctx, Interface+"."+method, 0, args(handle)...).Store(&got); err != nil {
		return nil, err
	}
	if got != path { // portals before 0.9 chose the path themselves
		s.mu.Lock()
		delete(s.pending, path)
		path = got
		s.pending[path] = ch
		s.mu.Unlock()
	}
	select {
	case <-ctx.Done():
		s.conn.Object(BusName, path).Call(RequestIface+".Close", dbus.FlagNoReplyExpected)
		return nil, ctx.Err()
	case r := <-ch:
		switch r.code {
		case responseSuccess:
			return r.results, nil
		case responseRefused:
			return nil, ErrRefused
		default:
			return nil, fmt.Errorf("the portal ended the request (response %d)", r.code)
		}
	}
}

// listen reads the connection's signals until ctx ends.
func (s *Shortcuts) listen(ctx context.Context) {
	defer s.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case sig, ok := <-s.signals:
			if !ok {
				return
			}
			s.handle(sig)
		}
	}
}

// fromPortal checks the sender: a signal sent straight to this connection
// reaches it whatever the match rules, and any client of the bus could send
// one that looks like a press of the allow key. A portal that restarted has
// a new unique name, so a mismatch is checked once more against the owner.
func (s *Shortcuts) fromPortal(sig *dbus.Signal) bool {
	if sig.Sender != "" && sig.Sender == s.owner {
		return true
	}
	owner, err := sessionbus.Owner(context.Background(), s.conn, BusName)
	if err != nil {
		return false
	}
	s.owner = owner
	return sig.Sender == owner
}

func (s *Shortcuts) handle(sig *dbus.Signal) {
	switch sig.Name {
	case RequestIface + ".Response", Interface + ".Activated", Interface + ".ShortcutsChanged", SessionIface + ".Closed":
	default:
		return // the connection's other signals
	}
	if !s.fromPortal(sig) {
		s.log.Warn("ignored a portal signal that the portal did not send", "sender", sig.Sender, "name", sig.Name)
		return
	}
	switch sig.Name {
	case RequestIface + ".Response":
		var r response
		if dbus.Store(sig.Body, &r.code, &r.results) != nil {
			return
		}
		s.mu.Lock()
		ch := s.pending[sig.Path]
		s.mu.Unlock()
		if ch != nil {
			select {
			case ch <- r:
			default: // a second Response to one request: the first counts
			}
		}
	case Interface + ".Activated":
		var session dbus.ObjectPath
		var id string
		if len(sig.Body) < 2 || dbus.Store(sig.Body[:2], &session, &id) != nil {
			return
		}
		s.mu.Lock()
		now := clock()
		repeat := now.Sub(s.last[id]) < repeatGap
		s.last[id] = now
		pass := s.want && session == s.session && session != "" && !repeat
		s.mu.Unlock()
		if !pass {
			s.log.Debug("global hotkey ignored", "shortcut", id)
			return
		}
		s.onPress(id)
	case Interface + ".ShortcutsChanged":
		var session dbus.ObjectPath
		var list []Shortcut
		if dbus.Store(sig.Body, &session, &list) != nil {
			return
		}
		s.mu.Lock()
		ours := session == s.session
		s.mu.Unlock()
		if ours {
			s.setTriggers(list, "global hotkeys changed by the desktop")
		}
	case SessionIface + ".Closed":
		s.mu.Lock()
		ours := sig.Path == s.session
		if ours {
			s.session, s.triggers = "", map[string]string{}
		}
		s.mu.Unlock()
		if ours {
			err := errors.New("the desktop portal closed the shortcut session")
			s.log.Warn("global hotkeys lost", "err", err)
			s.onFail(err)
		}
	}
}

// closeSession ends the current session, if any.
func (s *Shortcuts) closeSession() {
	s.mu.Lock()
	session := s.session
	s.session, s.triggers = "", map[string]string{}
	s.mu.Unlock()
	if session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := s.conn.Object(BusName, session).CallWithContext(ctx, SessionIface+".Close", 0).Err; err != nil {
		s.log.Warn("close the shortcut session", "err", err)
		return
	}
	s.log.Info("global hotkeys released")
}

// token is a fresh handle token: letters, digits and underscores only.
func token() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "codexgate_" + hex.EncodeToString(b)
}
