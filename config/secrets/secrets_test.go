package secrets

import (
	"errors"
	"strings"
	"testing"
)

func TestNoSessionBusMeansNoKeyring(t *testing.T) {
	for name, addr := range map[string]string{"unset": "", "autolaunch": "autolaunch:"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("DBUS_SESSION_BUS_ADDRESS", addr)
			t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // no bus socket in it
			_, err := Get("openai-api-key")
			if !errors.Is(err, ErrNoKeyring) || !strings.Contains(err.Error(), "no session bus") {
				t.Errorf("Get without a session bus: %v", err)
			}
			if err := Set("x", "y"); !errors.Is(err, ErrNoKeyring) {
				t.Errorf("Set without a session bus: %v", err)
			}
		})
	}
}
