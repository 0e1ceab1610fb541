// Package hotkey holds Codexgate's global hotkeys while cards are open.
// Choose picks who holds them: the desktop portal's GlobalShortcuts on
// Wayland (package portal), else X11 grabs. The X11 Manager grabs exactly
// the configured keys on the root window (with every combination of
// CapsLock, NumLock and ScrollLock) and acts only on a press of such a key
// with exactly its modifiers, never on any other key, and never on an
// auto-repeat.
package hotkey

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"codexgate/config/keys"
)

// Manager grabs the configured keys while wanted. One goroutine owns the X
// connection; the methods hand it the wanted state and wait until it holds.
type Manager struct {
	onPress func(name string)
	onFail  func(error)
	log     *slog.Logger

	kick chan chan struct{} // asks the loop to apply the wanted state; it closes the channel sent when done
	done chan struct{}      // closed when the loop has ended

	mu      sync.Mutex // protects the wanted state below
	keys    map[string]string
	want    bool
	closing bool
}

// New returns a manager of keys (name to "ctrl+alt+y"; "" is off). onPress
// gets the name of a pressed key, onFail why a key could not be grabbed or
// the hotkeys were lost, once per key and set of keys. Both run on the
// manager's goroutine and must not call the manager. Without an X display
// there are no hotkeys, only a log line.
func New(keyset map[string]string, onPress func(name string), onFail func(error), log *slog.Logger) *Manager {
	m := &Manager{
		onPress: onPress, onFail: onFail, log: log,
		keys: maps.Clone(keyset),
		kick: make(chan chan struct{}),
		done: make(chan struct{}),
	}
	xgbLog.Do(func() { xgb.Logger = slog.NewLogLogger(log.Handler(), slog.LevelDebug) })
	go m.run()
	return m
}

// xgbLog sends the X library's own messages (such as a missing
// Xauthority) to the first manager's log.
var xgbLog sync.Once

// Want grabs the keys (on) or releases them (off), and returns when that is
// done.
func (m *Manager) Want(on bool) {
	m.mu.Lock()
	changed := m.want != on
	m.want = on
	m.mu.Unlock()
	if changed {
		m.apply()
	}
}

// SetKeys changes the keys; held keys are released and the new ones grabbed.
func (m *Manager) SetKeys(keyset map[string]string) {
	m.mu.Lock()
	changed := !maps.Equal(keyset, m.keys)
	m.keys = maps.Clone(keyset)
	m.mu.Unlock()
	if changed {
		m.apply()
	}
}

// Close releases the keys and the display, and returns when both are.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closing = true
	m.mu.Unlock()
	m.apply()
	<-m.done
}

// apply has the loop catch up with the wanted state.
func (m *Manager) apply() {
	applied := make(chan struct{})
	select {
	case m.kick <- applied:
	case <-m.done:
		return
	}
	select {
	case <-applied:
	case <-m.done:
	}
}

// wanted is a copy of the wanted state.
func (m *Manager) wanted() (keyset map[string]string, want, closing bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.keys), m.want, m.closing
}

// loop is the state of the goroutine that owns the X connection.
type loop struct {
	*Manager
	conn     *xgb.Conn
	g        *grabber // nil without a display
	keys     map[string]string
	held     bool            // the keys in keys were grabbed (as far as they could be)
	reported map[string]bool // "name=spec" whose failure onFail was told, for these keys
}

type xEvent struct {
	ev  xgb.Event
	err xgb.Error
}

func (m *Manager) run() {
	defer close(m.done)
	l := &loop{Manager: m, reported: map[string]bool{}}
	var events chan xEvent
	if err := l.connect(); err != nil {
		m.log.Warn("global hotkeys are not available", "err", err)
	} else {
		events = make(chan xEvent)
		go func() {
			defer close(events)
			for {
				ev, err := l.conn.WaitForEvent()
				if ev == nil && err == nil {
					return // the connection is closed
				}
				events <- xEvent{ev, err}
			}
		}()
	}
	for {
		select {
		case applied := <-m.kick:
			keyset, want, closing := m.wanted()
			l.sync(keyset, want && !closing)
			close(applied)
			if closing {
				if events != nil {
					l.conn.Close()
					for range events { // until the reader has seen the close
					}
				}
				return
			}
		case e, ok := <-events:
			if !ok {
				events = nil
				l.lost()
				continue
			}
			l.event(e)
		}
	}
}

// connect opens the display named by $DISPLAY.
func (l *loop) connect() error {
	display := os.Getenv("DISPLAY")
	if display == "" {
		return errors.New("DISPLAY is not set: there is no X11 display (global hotkeys need X11)")
	}
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		return fmt.Errorf("connect to the X display %q: %w", display, err)
	}
	g, err := newGrabber(conn)
	if err != nil {
		conn.Close()
		return fmt.Errorf("X display %q: %w", display, err)
	}
	l.conn, l.g = conn, g
	return nil
}

// sync grabs or releases the keys to match want.
func (l *loop) sync(keyset map[string]string, want bool) {
	if !maps.Equal(keyset, l.keys) {
		l.release()
		l.keys = keyset
		clear(l.reported)
	}
	switch {
	case want && !l.held:
		l.grab()
	case !want && l.held:
		l.release()
	}
}

func (l *loop) grab() {
	if l.g == nil {
		return
	}
	l.held = true
	combos := map[string]keys.Combo{}
	for name, spec := range l.keys {
		if spec == "" {
			continue
		}
		c, err := keys.Parse(spec)
		if err != nil {
			l.fail(name, spec, err)
			continue
		}
		combos[name] = c
	}
	errs := l.g.grab(combos)
	var grabbed []string
	for _, name := range slices.Sorted(maps.Keys(combos)) {
		if err := errs[name]; err != nil {
			l.fail(name, l.keys[name], err)
			continue
		}
		grabbed = append(grabbed, name+"="+l.keys[name])
	}
	if len(grabbed) > 0 {
		l.log.Info("global hotkeys registered", "keys", strings.Join(grabbed, " "))
	}
}

// fail says once, for these keys, that one could not be grabbed.
func (l *loop) fail(name, spec string, err error) {
	err = fmt.Errorf("the %s hotkey %s: %w", name, spec, err)
	if l.reported[name+"="+spec] {
		l.log.Debug("global hotkey not grabbed", "err", err)
		return
	}
	l.reported[name+"="+spec] = true
	l.log.Warn("global hotkey not grabbed", "err", err)
	l.onFail(err)
}

func (l *loop) release() {
	if !l.held {
		return
	}
	l.held = false
	if l.g == nil {
		return
	}
	if err := l.g.ungrabAll(); err != nil {
		l.log.Warn("global hotkeys", "err", err)
	}
	l.log.Info("global hotkeys released")
}

// lost is the end of the X connection that Close did not ask for.
func (l *loop) lost() {
	l.g, l.held = nil, false
	err := errors.New("the connection to the X display was lost: global hotkeys are off until Codexgate restarts")
	l.log.Warn("global hotkeys lost", "err", err)
	l.onFail(err)
}

func (l *loop) event(e xEvent) {
	if e.err != nil {
		l.log.Warn("global hotkeys: X error", "err", e.err)
		return
	}
	if l.g == nil {
		return
	}
	switch ev := e.ev.(type) {
	case xproto.KeyPressEvent:
		name, repeat := l.g.press(ev)
		switch {
		case name == "":
		case repeat:
			l.log.Debug("global hotkey auto-repeat ignored", "key", name)
		default:
			l.log.Info("global hotkey pressed", "key", name)
			l.onPress(name)
		}
	case xproto.KeyReleaseEvent:
		l.g.release(ev)
	case xproto.MappingNotifyEvent:
		if ev.Request == xproto.MappingPointer {
			return
		}
		changed, err := l.g.remap()
		if err != nil {
			l.log.Warn("global hotkeys: keyboard mapping", "err", err)
			return
		}
		if changed && l.held {
			// The same keys are other keycodes now.
			l.release()
			l.grab()
		}
	}
}
