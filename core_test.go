package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codexgate/supervisor"
)

func TestMissingCodexHomeShowsCodexsError(t *testing.T) {
	a := newApp(t)
	a.start(workerDef{name: "ok"})
	ws := filepath.Join(a.dir, "broken")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(a.dir, "no-such-home")
	saveByRename(t, a.cfgPath, a.blocks["ok"]+fmt.Sprintf("[[worker]]\nname = \"broken\"\ncwd = %q\nenv = {CODEX_HOME = %q}\n", ws, home))
	want := fmt.Sprintf("Error: CODEX_HOME points to %q, but that path does not exist", home)
	a.waitFor("the broken worker to fail", func() bool {
		st, ok := a.statuses()["broken"]
		return ok && st.State == supervisor.StateFailed
	})
	st := a.statuses()["broken"]
	if !strings.HasPrefix(st.LastError, want) || st.PID != 0 {
		t.Errorf("broken worker: %+v\nwant its last error to start with %q", st, want)
	}
	if out := a.must("workers"); !strings.Contains(out, want) {
		t.Errorf("workers shows:\n%s", out)
	}
	if out := a.must("logs", "broken"); !strings.Contains(out, want) || strings.Contains(out, "<unknown>") {
		t.Errorf("logs broken:\n%s", out)
	}
	if out := a.must("workers", "--json"); !strings.Contains(out, `"stderr": [`) {
		t.Errorf("workers --json has no stderr:\n%s", out)
	}
	// Restart from the command line tries again, and fails the same way.
	a.must("restart", "broken")
	a.waitFor("the broken worker to start again", func() bool { return a.statuses()["broken"].State != supervisor.StateFailed })
	a.waitFor("the broken worker to fail again", func() bool { return a.statuses()["broken"].State == supervisor.StateFailed })
	if st := a.statuses()["ok"]; st.State != supervisor.StateIdle {
		t.Errorf("the other worker: %+v", st)
	}
}

func TestKillStormLeavesTheAppRunning(t *testing.T) {
	a := newApp(t)
	a.start(workerDef{name: "w"})
	// Three tasks go out just before each kill: 18 calls in flight across
	// six crashes. A task may fail while w restarts; the app must not.
	var wg sync.WaitGroup
	for range 6 {
		var pid int
		a.waitFor("w to run", func() bool {
			st := a.statuses()["w"]
			pid = st.PID
			return pid != 0 && st.State != supervisor.StateStarting
		})
		for range 3 {
			wg.Go(func() { a.run("task", "w", "say hello") })
		}
		time.Sleep(20 * time.Millisecond)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		a.waitFor("w to be restarted", func() bool { return a.statuses()["w"].PID != pid })
	}
	wg.Wait()
	a.idle("w")
	if a.cmd.ProcessState != nil || syscall.Kill(a.cmd.Process.Pid, 0) != nil {
		t.Fatalf("codexgate died\n%s", a.log)
	}
	if strings.Contains(a.log.String(), "panic") {
		t.Errorf("a panic:\n%s", a.log)
	}
	if out := a.must("task", "w", "say hello"); strings.TrimSpace(out) == "" {
		t.Error("no turn after the storm")
	}
}

// busDaemons are the session bus and keyring daemons whose environment
// holds marker: those a run with that marker started.
func busDaemons(marker string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		name := strings.TrimSpace(string(comm))
		if !strings.HasPrefix(name, "dbus-") && !strings.HasPrefix(name, "gnome-keyring") {
			continue
		}
		if environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); strings.Contains(string(environ), marker) {
			out = append(out, fmt.Sprintf("%s (%d)", name, pid))
		}
	}
	return out
}

func TestHeadlessWithoutABusStartsNoDaemons(t *testing.T) {
	a := newApp(t)
	runtime := filepath.Join(a.dir, "runtime")
	os.MkdirAll(runtime, 0o700)
	env := a.env[:0:0]
	for _, kv := range a.env {
		if !strings.HasPrefix(kv, "DBUS_SESSION_BUS_ADDRESS=") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(kv, "DISPLAY=") {
			env = append(env, kv)
		}
	}
	a.env = append(env, "XDG_RUNTIME_DIR="+runtime)
	a.start(workerDef{name: "w"}) // each start looks for an API key in the keyring
	a.must("restart", "w")
	a.idle("w")
	if out, err := a.run("secret", "list"); err == nil || !strings.Contains(out, "no session bus") {
		t.Errorf("secret list without a bus: %v %q", err, out)
	}
	a.stop()
	if left := busDaemons(a.dir); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
