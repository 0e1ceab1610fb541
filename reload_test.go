package main

import (
	"os"
	"strings"
	"testing"

	"codexgate/proc"
	"codexgate/supervisor"
)

// saveByRename writes the config as editors do: a new file renamed over it.
func saveByRename(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".swp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (a *testApp) statuses() map[string]supervisor.Status {
	var ws []supervisor.Status
	if a.try(&ws, "workers", "--json") != nil {
		return nil
	}
	out := map[string]supervisor.Status{}
	for _, w := range ws {
		out[w.Name] = w
	}
	return out
}

func TestLiveConfigReload(t *testing.T) {
	a := newApp(t)
	a.start(workerDef{name: "keep"}, workerDef{name: "extra"})
	extra := a.blocks["extra"]
	keep := a.statuses()["keep"]

	// Removing a worker stops it, and no process of it is left.
	gone := a.statuses()["extra"].PID
	saveByRename(t, a.cfgPath, a.blocks["keep"])
	a.waitFor("extra to stop", func() bool { _, ok := a.statuses()["extra"]; return !ok })
	a.waitFor("the removed worker's codex to end", func() bool { return !alive(gone) })

	// Appending a worker starts it; the others are not touched.
	f, err := os.OpenFile(a.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(strings.ReplaceAll(extra, `name = "extra"`, `name = "added"`))
	f.Close()
	a.waitFor("added to be idle", func() bool { return a.statuses()["added"].State == supervisor.StateIdle })

	// An invalid edit changes nothing and says where it is wrong.
	good, _ := os.ReadFile(a.cfgPath)
	saveByRename(t, a.cfgPath, string(good)+"[[worker]]\nname = \"keep\"\ncwd = \"/no/such/dir\"\n")
	a.waitFor("the config error", func() bool {
		out, _ := a.run("workers")
		return strings.Contains(out, "config not applied")
	})
	out, _ := a.run("workers")
	for _, want := range []string{"config.toml:", "worker[2].name", "already the name", "worker[2].cwd", "does not exist"} {
		if !strings.Contains(out, want) {
			t.Errorf("workers output lacks %q:\n%s", want, out)
		}
	}
	now := a.statuses()
	if len(now) != 2 || now["keep"].PID != keep.PID || now["added"].State != supervisor.StateIdle {
		t.Errorf("an invalid config touched the workers: %+v", now)
	}

	// Fixing it applies, and the error is gone.
	saveByRename(t, a.cfgPath, string(good))
	a.waitFor("the error to clear", func() bool {
		out, _ := a.run("workers")
		return !strings.Contains(out, "config not applied")
	})
	if a.statuses()["keep"].PID != keep.PID {
		t.Error("an unchanged worker was restarted")
	}
}

// alive reports whether pid runs (a zombie has ended).
func alive(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != "Z"
}
