package hotkey

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"

	"codexgate/sessionbus"
	"codexgate/ui/hotkey/portal"
)

// portalTimeout bounds the look for the portal at start; the bus may have
// to start it.
const portalTimeout = 10 * time.Second

// ErrNone means this session offers no way to hold global keys.
var ErrNone = errors.New("no X display and no GlobalShortcuts desktop portal")

// Keys are the global hotkeys as the desktop drives them, whoever holds
// them. onPress gets "allow" or "deny" for a press while Want(true);
// Triggers are the keys that answer, by name, as the holder describes them.
type Keys interface {
	Want(on bool)
	SetKeys(keyset map[string]string)
	Triggers() map[string]string
	Close()
}

// Choose picks who holds keyset: on Wayland, the desktop portal's
// GlobalShortcuts, bound once now; without it, X11 grabs where there is an
// X display (on Wayland that is XWayland, which sees keys only while one of
// its windows has the focus); otherwise nobody, which is reported once
// through onFail.
func Choose(keyset map[string]string, onPress func(name string), onFail func(error), log *slog.Logger) Keys {
	return choose(os.Getenv, func() (*dbus.Conn, error) { return sessionbus.Connect() }, func() Keys {
		return &x11Keys{Manager: New(keyset, onPress, onFail, log), keys: keyset}
	}, keyset, onPress, onFail, log)
}

func choose(env func(string) string, bus func() (*dbus.Conn, error), x11 func() Keys, keyset map[string]string, onPress func(string), onFail func(error), log *slog.Logger) Keys {
	wayland := env("WAYLAND_DISPLAY") != "" || env("XDG_SESSION_TYPE") == "wayland"
	if wayland {
		s, err := openPortal(bus, keyset, onPress, onFail, log)
		if err == nil {
			return s
		}
		log.Info("no global hotkeys through the desktop portal", "err", err)
	}
	if env("DISPLAY") != "" {
		if wayland {
			log.Warn("global hotkeys through XWayland: they work only while an X11 window has the focus")
		}
		return x11()
	}
	if len(activeKeys(keyset)) > 0 {
		log.Warn("no global hotkeys are available: bind `codexgate answer allow` and `codexgate answer deny` in the desktop's keyboard shortcut settings", "err", ErrNone)
		onFail(ErrNone)
	}
	return noKeys{}
}

func openPortal(bus func() (*dbus.Conn, error), keyset map[string]string, onPress func(string), onFail func(error), log *slog.Logger) (Keys, error) {
	conn, err := bus()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), portalTimeout)
	defer cancel()
	s, err := portal.Open(ctx, conn, keyset, onPress, onFail, log)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

// activeKeys are the keys that are not turned off.
func activeKeys(keyset map[string]string) map[string]string {
	out := maps.Clone(keyset)
	maps.DeleteFunc(out, func(_, spec string) bool { return spec == "" })
	return out
}

// x11Keys are X11 grabs, which hold exactly the configured keys.
type x11Keys struct {
	*Manager
	mu   sync.Mutex // protects keys
	keys map[string]string
}

func (x *x11Keys) SetKeys(keyset map[string]string) {
	x.mu.Lock()
	x.keys = keyset
	x.mu.Unlock()
	x.Manager.SetKeys(keyset)
}

func (x *x11Keys) Triggers() map[string]string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return activeKeys(x.keys)
}

// noKeys hold nothing.
type noKeys struct{}

func (noKeys) Want(bool)                   {}
func (noKeys) SetKeys(map[string]string)   {}
func (noKeys) Triggers() map[string]string { return map[string]string{} }
func (noKeys) Close()                      {}
