package sessionbus

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
)

func TestAddress(t *testing.T) {
	withSocket := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(withSocket, "bus"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name, env, runtime, want string
	}{
		{"none", "", t.TempDir(), ""},
		{"only one to start", "autolaunch:", t.TempDir(), ""},
		{"only one to start, with options", "autolaunch:scope=*user", withSocket, ""},
		{"named", "unix:path=/run/user/1/bus", "", "unix:path=/run/user/1/bus"},
		{"the user bus", "", withSocket, "unix:path=" + filepath.Join(withSocket, "bus")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DBUS_SESSION_BUS_ADDRESS", tc.env)
			t.Setenv("XDG_RUNTIME_DIR", tc.runtime)
			if got := Address(); got != tc.want {
				t.Errorf("Address() = %q, want %q", got, tc.want)
			}
			if tc.want == "" {
				if _, err := Connect(); !errors.Is(err, ErrNoBus) {
					t.Errorf("Connect() = %v, want ErrNoBus", err)
				}
			}
		})
	}
}
