// Package sessionbus finds the desktop session's D-Bus without ever
// starting one. A library left to itself would autolaunch a bus (and the
// bus a keyring daemon) that outlives Codexgate, where no session is. It
// also says who owns a name on the bus, so that signals are taken only
// from the service they claim to come from.
package sessionbus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
)

// ErrNoBus is why there is nothing on the session bus: there is none.
var ErrNoBus = errors.New("no session bus: DBUS_SESSION_BUS_ADDRESS is not set")

// Address is the running session bus: DBUS_SESSION_BUS_ADDRESS unless it
// only names a bus to start ("autolaunch:"), else the systemd user bus at
// $XDG_RUNTIME_DIR/bus when its socket is there; "" when there is none.
func Address() string {
	if addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); addr != "" {
		if strings.HasPrefix(addr, "autolaunch:") {
			return ""
		}
		return addr
	}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		path := filepath.Join(dir, "bus")
		if info, err := os.Stat(path); err == nil && info.Mode().Type() == os.ModeSocket {
			return "unix:path=" + path
		}
	}
	return ""
}

// Connect opens a private connection to the running session bus, or fails
// with ErrNoBus.
func Connect(opts ...dbus.ConnOption) (*dbus.Conn, error) {
	addr := Address()
	if addr == "" {
		return nil, ErrNoBus
	}
	conn, err := dbus.Connect(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to the session bus: %w", err)
	}
	return conn, nil
}

// ownerTimeout bounds the question of who owns a name.
const ownerTimeout = 5 * time.Second

// Owner is the unique name of the connection that owns name now. A signal
// sent straight to a connection reaches it whatever its match rules, so a
// signal is taken only from the owner of the service it claims to come from.
func Owner(ctx context.Context, conn *dbus.Conn, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ownerTimeout)
	defer cancel()
	var owner string
	if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetNameOwner", 0, name).Store(&owner); err != nil {
		return "", fmt.Errorf("find the owner of %s: %w", name, err)
	}
	return owner, nil
}
