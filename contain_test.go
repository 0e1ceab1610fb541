package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"codexgate/supervisor"
	"codexgate/supervisor/codextest"
)

// launch starts codexgate from dir with args (--headless unless
// a.desktop), for tests whose config start does not write.
func (a *testApp) launch(dir string, args ...string) {
	a.t.Helper()
	args = append([]string{"--socket", a.socket}, args...)
	if !a.desktop {
		args = append(args, "--headless")
	}
	a.cmd = exec.Command(binary, args...)
	a.cmd.Dir = dir
	a.cmd.Env = a.env
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(a.stop)
}

// codexIn are the codex processes whose working directory is dir.
func codexIn(dir string) []int {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if cwd == real && strings.TrimSpace(string(comm)) == "codex" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestContainmentRefusesWorkspaces: a worker whose workspace is $HOME, and
// one whose workspace holds the config, never start and say why, while a
// worker beside them runs a task.
func TestContainmentRefusesWorkspaces(t *testing.T) {
	a := newApp(t)
	home := codextest.TempDir(t)
	a.env = append(a.env, "HOME="+home)
	ws := filepath.Join(a.dir, "normal")
	codexHome := filepath.Join(a.dir, "normal-home")
	for _, d := range []string{ws, codexHome} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r := codextest.NewResponses(t, codextest.Exec("touch made.txt", false))
	args, _ := json.Marshal(r.Args())
	env, _ := json.Marshal(codextest.Env(codexHome))
	cfg := fmt.Sprintf("[[worker]]\nname = \"normal\"\ncwd = %q\nargs = %s\nenv = %s\n\n", ws, args, tomlInline(env)) +
		fmt.Sprintf("[[worker]]\nname = \"home\"\ncwd = %q\n\n", home+"/") +
		fmt.Sprintf("[[worker]]\nname = \"holds-config\"\ncwd = %q\n", a.dir)
	a.cfgPath = filepath.Join(a.dir, "config.toml")
	if err := os.WriteFile(a.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a.launch(ws, "--config", a.cfgPath)
	a.idle("normal")

	want := map[string]string{
		"home":         "refused: workspace is your home directory",
		"holds-config": "refused: workspace contains Codexgate's config file " + a.cfgPath,
	}
	st := a.statuses()
	for name, reason := range want {
		if s := st[name]; s.State != supervisor.StateFailed || s.PID != 0 || !strings.Contains(s.LastError, reason) {
			t.Errorf("worker %s: %+v, want failed with %q", name, s, reason)
		}
	}
	out := a.must("workers")
	// Each reason whole, with what to do at its end.
	for _, reason := range append(slices.Collect(maps.Values(want)), "Give the worker a project folder") {
		if !strings.Contains(out, reason) {
			t.Errorf("codexgate workers does not say %q:\n%s", reason, out)
		}
	}
	for _, dir := range []string{home, a.dir} {
		if pids := codexIn(dir); len(pids) > 0 {
			t.Errorf("codex runs in the refused workspace %s: %v", dir, pids)
		}
	}

	a.must("task", "normal", "make a file")
	a.waitFor("the normal worker's task", func() bool { return exists(filepath.Join(ws, "made.txt")) })
	if len(codexIn(ws)) == 0 {
		t.Error("no codex runs for the normal worker")
	}
}

// TestContainmentReloadRefusesCodexInWorkspace: a live reload that adds a
// worker whose codex is a script inside a workspace changes nothing, and
// the script never runs.
func TestContainmentReloadRefusesCodexInWorkspace(t *testing.T) {
	a := newApp(t)
	ws := a.start(workerDef{name: "keep"})
	keep := a.statuses()["keep"]
	ran := filepath.Join(a.dir, "script-ran")
	script := filepath.Join(ws["keep"], "codex.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(a.dir, "other")
	os.Mkdir(other, 0o700)

	// The attack: a worker appended whose codex the sandbox wrote.
	f, err := os.OpenFile(a.cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "[[worker]]\nname = \"evil\"\ncwd = %q\ncodex = %q\n", other, script)
	f.Close()
	a.waitFor("the config error", func() bool {
		out, _ := a.run("workers")
		return strings.Contains(out, "config not applied")
	})
	out, _ := a.run("workers")
	for _, w := range []string{"config.toml:", "worker[1].codex", "lies inside workspace " + ws["keep"], `of worker "keep"`} {
		if !strings.Contains(out, w) {
			t.Errorf("workers output lacks %q:\n%s", w, out)
		}
	}
	now := a.statuses()
	if _, ok := now["evil"]; ok || now["keep"].PID != keep.PID {
		t.Errorf("a refused reload touched the workers: %+v", now)
	}

	// The script in the new worker's own workspace: that worker is refused.
	good, _ := os.ReadFile(a.cfgPath)
	good = good[:strings.Index(string(good), "[[worker]]\nname = \"evil\"")]
	own := filepath.Join(other, "codex.sh")
	if err := os.WriteFile(own, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	saveByRename(t, a.cfgPath, string(good)+fmt.Sprintf("[[worker]]\nname = \"evil\"\ncwd = %q\ncodex = %q\n", other, own))
	a.waitFor("evil refused", func() bool {
		return strings.Contains(a.statuses()["evil"].LastError, "contains the codex binary it runs")
	})
	if st := a.statuses()["evil"]; st.State != supervisor.StateFailed || st.PID != 0 {
		t.Errorf("evil = %+v", st)
	}
	if exists(ran) {
		t.Error("the script ran")
	}
	if a.statuses()["keep"].PID != keep.PID {
		t.Error("an unchanged worker was restarted")
	}
}

// TestContainmentFirstRunFromHome: started the first time from $HOME,
// codexgate writes a config whose only worker is a commented example, and
// says how to add a project folder.
func TestContainmentFirstRunFromHome(t *testing.T) {
	a, home := firstRunApp(t)
	a.launch(home)
	a.checkFirstRun(home)
}

// firstRunApp is an app with a home of its own and no config: the config
// and state go where they would for a person, under that home.
func firstRunApp(t *testing.T) (*testApp, string) {
	a := newApp(t)
	home := codextest.TempDir(t)
	a.env = nil
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME":
			continue
		}
		a.env = append(a.env, kv)
	}
	a.env = append(a.env, "HOME="+home)
	return a, home
}

// checkFirstRun checks that the app runs with no worker, a config with a
// commented example, and a log that says how to add a project folder.
func (a *testApp) checkFirstRun(home string) {
	t := a.t
	var ws []supervisor.Status
	a.waitFor("the app", func() bool { return a.try(&ws, "workers", "--json") == nil })
	if len(ws) != 0 {
		t.Errorf("first run from $HOME made workers: %+v", ws)
	}
	a.cfgPath = filepath.Join(home, ".config", "codexgate", "config.toml")
	cfg, err := os.ReadFile(a.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(cfg), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "[[worker]]") {
			t.Errorf("the first config has a worker:\n%s", cfg)
		}
	}
	if !strings.Contains(string(cfg), "# [[worker]]") || !strings.Contains(string(cfg), "To add a project folder") {
		t.Errorf("the first config has no example worker:\n%s", cfg)
	}
	if log := a.log.String(); !strings.Contains(log, "To add a project folder") || !strings.Contains(log, "it is your home directory") {
		t.Errorf("the log does not say how to add a project folder:\n%s", log)
	}
}

// TestContainmentDesktopNotifies: with the desktop, a first run from $HOME
// and a refused worker each raise a notification that says why.
func TestContainmentDesktopNotifies(t *testing.T) {
	if os.Getenv("DISPLAY") == "" || os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		t.Fatal("no desktop session: run the tests with `make test`, which starts one")
	}
	monitor := exec.Command("dbus-monitor", "--session", "type='method_call',interface='org.freedesktop.Notifications',member='Notify'")
	notes := &syncBuffer{}
	monitor.Stdout = notes
	if err := monitor.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { monitor.Process.Kill(); monitor.Wait() }()

	a, home := firstRunApp(t)
	a.desktop = true
	a.launch(home)
	a.checkFirstRun(home)
	a.waitFor("the first-run notification", func() bool {
		return strings.Contains(notes.String(), "add a project folder") && strings.Contains(notes.String(), "uncomment the example")
	})

	src, _ := os.ReadFile(a.cfgPath)
	saveByRename(t, a.cfgPath, string(src)+fmt.Sprintf("\n[[worker]]\nname = \"home\"\ncwd = %q\n", home))
	a.waitFor("the refusal notification", func() bool {
		return strings.Contains(notes.String(), "worker home not started") && strings.Contains(notes.String(), "workspace is your home directory")
	})
	if st := a.statuses()["home"]; st.State != supervisor.StateFailed || !strings.Contains(st.LastError, "is your home directory") {
		t.Errorf("home = %+v", st)
	}
	// One notification for the refusal, not a second one for its failed state.
	src, _ = os.ReadFile(a.cfgPath)
	saveByRename(t, a.cfgPath, string(src)+"\n[cards]\nshow_byte = 1\n")
	a.waitFor("the config error notification", func() bool { return strings.Contains(notes.String(), "config not applied") })
	if strings.Contains(notes.String(), "worker home failed") {
		t.Errorf("the refused worker was notified twice:\n%s", notes)
	}
}
