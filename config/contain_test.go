package config

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"codexgate/supervisor/codextest"
)

// layout is a home, Codexgate's own files and a codex binary under a test
// directory outside /tmp (which every sandbox can write, so any path under
// it would be refused).
type layout struct {
	base, home, proj, other, cfg, codex string
	guard                               *Guard
}

func newLayout(t *testing.T) *layout {
	t.Helper()
	b := codextest.TempDir(t)
	l := &layout{
		base:  b,
		home:  filepath.Join(b, "home"),
		proj:  filepath.Join(b, "home", "proj"),
		other: filepath.Join(b, "other"),
		cfg:   filepath.Join(b, "home", ".config", "codexgate", "config.toml"),
		codex: filepath.Join(b, "codex", "codex"),
	}
	for _, d := range []string{l.proj, l.other, filepath.Dir(l.cfg), filepath.Join(b, "state", "codexgate"), filepath.Join(b, "run"), filepath.Join(b, "bin"), filepath.Dir(l.codex), filepath.Join(l.home, "bin"), filepath.Join(l.home, ".codex")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{l.codex, filepath.Join(b, "bin", "codexgate"), filepath.Join(l.home, "bin", "codex")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"homelink": l.home,                            // another name for the home
		"binlink":  filepath.Join(b, "bin"),           // another name for the binary's folder
		"other/in": l.proj,                            // other/in/.. is the home, physically
		"projlink": l.proj,                            // a harmless link
		"other/cx": l.codex,                           // a link to codex, inside other
		"runlink":  filepath.Join(b, "run", "nosuch"), // a link to what does not exist yet
	} {
		if err := os.Symlink(target, filepath.Join(b, link)); err != nil {
			t.Fatal(err)
		}
	}
	l.guard = &Guard{
		Homes: []string{l.home},
		Own: []Owned{
			{What: "Codexgate's config file", Path: l.cfg},
			{What: "Codexgate's state directory", Path: filepath.Join(b, "state", "codexgate")},
			// Not created yet: the app makes it when it listens.
			{What: "Codexgate's control socket", Path: filepath.Join(b, "run", "codexgate", "control.sock")},
			{What: "the folder of the codexgate binary", Path: filepath.Join(b, "bin")},
		},
		Codex:     l.codex,
		CodexHome: filepath.Join(l.home, ".codex"),
	}
	return l
}

func TestWorkspaceRule(t *testing.T) {
	t.Parallel()
	l := newLayout(t)
	b := l.base
	for _, tc := range []struct {
		name, dir, want string // want: part of the refusal; "" may run
	}{
		{"a project folder", l.proj, ""},
		{"a project folder, trailing slash", l.proj + "/", ""},
		{"a harmless symlink", filepath.Join(b, "projlink"), ""},
		{"beside the home", l.other, ""},
		{"inside the config's folder, without it", filepath.Join(filepath.Dir(l.cfg), "sub"), ""},
		{"the home", l.home, "is your home directory"},
		{"the home, trailing slash", l.home + "/", "is your home directory"},
		{"the home through a symlink", filepath.Join(b, "homelink"), "is your home directory"},
		{"the home through ..", filepath.Join(l.proj, "..") + "/", "is your home directory"},
		{"the home as written with ..", l.proj + "/../", "is your home directory"},
		{"the home through a symlink and .. (physically)", b + "/other/in/..", "is your home directory"},
		{"an ancestor of the home", b, "contains your home directory"},
		{"an ancestor, written with ..", l.home + "/..", "contains your home directory"},
		{"the root", "/", "is the root directory"},
		{"the root, written with ..", "/..", "is the root directory"},
		{"the config's folder", filepath.Dir(l.cfg), "contains Codexgate's config file"},
		{"above the config", filepath.Join(l.home, ".config"), "contains Codexgate's config file"},
		{"the state directory", filepath.Join(b, "state"), "contains Codexgate's state directory"},
		{"above a socket not made yet", filepath.Join(b, "run"), "contains Codexgate's control socket"},
		{"the binary's folder", filepath.Join(b, "bin"), "contains the folder of the codexgate binary"},
		{"the binary's folder through a symlink", filepath.Join(b, "binlink") + "/", "contains the folder of the codexgate binary"},
		{"the codex binary's folder", filepath.Dir(l.codex), "contains the codex binary it runs"},
		{"codex's home", filepath.Join(l.home, ".codex"), "contains codex's home (its own config)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := l.guard.Problem(tc.dir)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("Problem(%q) = %q, want %q", tc.dir, got, tc.want)
			}
		})
	}
}

// TestABindMountOfTheHomeIsTheHome: a workspace that is the home mounted at
// another path (mount --bind) is refused as the home is. The test runs
// again in a user and mount namespace of its own (unshare), where it may
// mount.
func TestABindMountOfTheHomeIsTheHome(t *testing.T) {
	if os.Getenv("CODEXGATE_TEST_USERNS") == "" {
		cmd := exec.Command("unshare", "--user", "--map-root-user", "--mount", os.Args[0], "-test.run=^TestABindMountOfTheHomeIsTheHome$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CODEXGATE_TEST_USERNS=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("in a namespace of its own: %v\n%s", err, out)
		}
		return
	}
	l := newLayout(t)
	for _, tc := range []struct{ name, source, want string }{
		{"the home", l.home, "is your home directory"},
		{"the config's folder", filepath.Dir(l.cfg), "contains Codexgate's config file"},
		{"above the home", l.base, "contains your home directory"},
	} {
		mnt := filepath.Join(l.other, "mnt-"+strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.Mkdir(mnt, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount(tc.source, mnt, "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("mount --bind %s %s: %v", tc.source, mnt, err)
		}
		t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
		if got := l.guard.Problem(mnt); !strings.Contains(got, tc.want) {
			t.Errorf("%s mounted at %s: Problem = %q, want %q", tc.name, mnt, got, tc.want)
		}
	}
}

// TestCodexsOwnConfigIsJudged: codex applies the config.toml in its home
// under Codexgate's settings: the writable roots it adds are checked as the
// workers' own, and a program it runs outside the sandbox must not lie
// where a sandbox can write.
func TestCodexsOwnConfigIsJudged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, codexConfig, want string // want: part of the refusal; "" may run
	}{
		{"trusted projects only", "[projects.\"PROJ\"]\ntrust_level = \"trusted\"\n", ""},
		{"a root that is the home", "[sandbox_workspace_write]\nwritable_roots = [\"HOME\"]\n", "is your home directory"},
		{"a profile's root", "[profiles.wide.sandbox_workspace_write]\nwritable_roots = [\"HOME\"]\n", "is your home directory"},
		{"notify in the workspace", "notify = [\"PROJ/hook.sh\", \"x\"]\n", "contains the notify program of codex's config"},
		{"an MCP server in the workspace", "[mcp_servers.db]\ncommand = \"PROJ/server\"\n", "contains the MCP server db of codex's config"},
		{"an MCP server elsewhere", "[mcp_servers.db]\ncommand = \"/usr/bin/db-server\"\n", ""},
		{"broken", "notify = [\n", "codex's config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLayout(t)
			text := strings.NewReplacer("PROJ", l.proj, "HOME", l.home).Replace(tc.codexConfig)
			if err := os.WriteFile(filepath.Join(l.guard.CodexHome, "config.toml"), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			writeConfig(t, l.cfg, []string{"w", fmt.Sprintf("cwd = %q", l.proj)})
			cfg, err := Load(l.cfg, l.guard)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Workers[0].Refused; tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("refused %q, want %q", got, tc.want)
			}
		})
	}
}

func TestArgRoots(t *testing.T) {
	t.Parallel()
	const cwd = "/ws"
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		roots []string // beyond /ws and /tmp
		err   string   // part of the error
	}{
		{"model settings", []string{"-c", `model="o3"`, "-c", `model_providers.m={name="m",base_url="http://x"}`, "--enable", "f", "--disable=g", "--strict-config"}, nil, nil, ""},
		{"writable_roots", []string{"-c", `sandbox_workspace_write.writable_roots=["/a", "rel"]`}, nil, []string{"/a", "/ws/rel"}, ""},
		{"the table form", []string{"-c", `sandbox_workspace_write={writable_roots=["/a"], network_access=false}`}, nil, []string{"/a"}, ""},
		{"network access", []string{"-c", "sandbox_workspace_write.network_access=true"}, nil, nil, "can reach your session bus"},
		{"a profile's network access", []string{"-c", `profiles.p={sandbox_workspace_write={network_access=true}}`}, nil, nil, "can reach your session bus"},
		{"a notify hook", []string{"-c", `notify=["/ws/hook.sh"]`}, nil, nil, "names a program codex runs outside the sandbox"},
		{"an MCP server", []string{"-c", `mcp_servers.x={command="/ws/srv"}`}, nil, nil, "names a program"},
		{"hooks", []string{"-c", `hooks.stop=[{command="/ws/h"}]`}, nil, nil, "names a program"},
		{"a command anywhere", []string{"-c", `model_providers.m.auth.command="/ws/token.sh"`}, nil, nil, "names a program"},
		{"network access not a bool", []string{"-c", `sandbox_workspace_write.network_access="yes"`}, nil, nil, "can reach your session bus"},
		{"--config=", []string{`--config=sandbox_workspace_write.writable_roots=["/a"]`}, nil, []string{"/a"}, ""},
		{"-c glued", []string{`-csandbox_workspace_write.writable_roots=['/a']`}, nil, []string{"/a"}, ""},
		{"spaces around", []string{"-c", ` sandbox_workspace_write.writable_roots = [ "/a" ] `}, nil, []string{"/a"}, ""},
		{"quoted key", []string{"-c", `"sandbox_workspace_write".writable_roots=["/a"]`}, nil, []string{"/a"}, ""},
		{"a profile's", []string{"-c", `profiles.p.sandbox_workspace_write.writable_roots=["/a"]`}, nil, []string{"/a"}, ""},
		{"profiles as a table", []string{"-c", `profiles={p={sandbox_workspace_write={writable_roots=["/a"]}}}`}, nil, []string{"/a"}, ""},
		{"--add-dir", []string{"--add-dir", "/a", "--add-dir=/b"}, nil, []string{"/a", "/b"}, ""},
		{"TMPDIR from env", nil, map[string]string{"TMPDIR": "/scratch"}, []string{"/scratch"}, ""},
		{"narrowing", []string{"-c", "sandbox_workspace_write.exclude_slash_tmp=true", "-c", "sandbox_mode=read-only"}, nil, nil, ""},
		{"writable_roots not TOML", []string{"-c", "sandbox_workspace_write.writable_roots=/a"}, nil, nil, "not a list of paths"},
		{"writable_roots of tables", []string{"-c", `sandbox_workspace_write.writable_roots=[{a=1}]`}, nil, nil, "not a path"},
		{"full access", []string{"-c", `sandbox_mode="danger-full-access"`}, nil, nil, "only workspace-write or read-only"},
		{"a nested profile's full access", []string{"-c", `profiles.p.profiles.q.sandbox_mode="danger-full-access"`}, nil, nil, "only workspace-write or read-only"},
		{"a profile's full access", []string{"-c", `profiles.p={sandbox_mode="danger-full-access"}`}, nil, nil, "only workspace-write or read-only"},
		{"permission profiles", []string{"-c", `permissions.p.filesystem.write=["/"]`}, nil, nil, "cannot check"},
		{"default_permissions", []string{"-c", `default_permissions="p"`}, nil, nil, "cannot check"},
		{"sandbox_permissions", []string{"-c", `sandbox_permissions=["disk-full-write-access"]`}, nil, nil, "cannot check"},
		{"a profile from codex's file", []string{"--config", "profile=wide"}, nil, nil, "cannot check"},
		{"an unknown sandbox key", []string{"-c", "sandbox_workspace_write.mounts=1"}, nil, nil, "cannot tell"},
		{"an unknown flag", []string{"--dangerously-bypass-approvals-and-sandbox"}, nil, nil, "cannot tell whether it widens"},
		{"a positional", []string{"proxy"}, nil, nil, "cannot tell whether it widens"},
		{"another transport", []string{"--listen", "unix://"}, nil, nil, "stdio only"},
		{"a flag without its value", []string{"-c"}, nil, nil, "needs a value"},
		{"not key=value", []string{"-c", "sandbox_mode"}, nil, nil, "not key=value"},
		{"relative TMPDIR", nil, map[string]string{"TMPDIR": "tmp"}, nil, "not an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			roots, err := writableRoots(Worker{Cwd: cwd, Args: tc.args, Env: tc.env}, "")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range roots {
				got = append(got, r.Path)
			}
			if want := append([]string{cwd, "/tmp"}, tc.roots...); !slices.Equal(got, want) {
				t.Errorf("roots = %q, want %q", got, want)
			}
		})
	}
}

// writeConfig writes workers (each "name", then TOML lines) to path, mode 0600.
func writeConfig(t *testing.T, path string, workers ...[]string) {
	t.Helper()
	var b strings.Builder
	for _, w := range workers {
		fmt.Fprintf(&b, "[[worker]]\nname = %q\n%s\n\n", w[0], strings.Join(w[1:], "\n"))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o600)
}

func TestLoadRefusesWorkers(t *testing.T) {
	t.Parallel()
	l := newLayout(t)
	os.Mkdir(filepath.Join(l.proj, "sub"), 0o700)
	writeConfig(t, l.cfg,
		[]string{"ok", fmt.Sprintf("cwd = %q", l.proj)},
		[]string{"home", fmt.Sprintf("cwd = %q", l.home+"/")},
		[]string{"wide", fmt.Sprintf("cwd = %q", l.other), fmt.Sprintf(`args = ["-c", 'sandbox_workspace_write={writable_roots=[%q]}']`, l.base)},
		[]string{"added", fmt.Sprintf("cwd = %q", l.other), fmt.Sprintf(`args = ["--add-dir", %q]`, filepath.Dir(l.cfg))},
		[]string{"unknown", fmt.Sprintf("cwd = %q", l.other), `args = ["--yolo"]`},
		[]string{"tmpdir", fmt.Sprintf("cwd = %q", l.other), fmt.Sprintf("env = { TMPDIR = %q }", l.home)},
		[]string{"codexhome", fmt.Sprintf("cwd = %q", l.other), fmt.Sprintf("env = { CODEX_HOME = %q }", filepath.Join(l.other, ".codex"))},
		// Without CODEX_HOME, codex's home is $HOME/.codex of the worker's own env.
		[]string{"envhome", fmt.Sprintf("cwd = %q", l.other), fmt.Sprintf("env = { HOME = %q }", filepath.Join(l.other, "sub"))},
		// The sandbox of "ok" could replace the folder of "inner" by a link to the home.
		[]string{"inner", fmt.Sprintf("cwd = %q", filepath.Join(l.proj, "sub"))},
		[]string{"same", fmt.Sprintf("cwd = %q", filepath.Join(l.base, "projlink"))},
		// Codex runs git from PATH outside the sandbox.
		[]string{"venv", fmt.Sprintf("cwd = %q", l.other), fmt.Sprintf("env = { PATH = %q }", filepath.Join(l.other, ".venv", "bin")+":/usr/bin")},
		[]string{"relpath", fmt.Sprintf("cwd = %q", l.proj), `env = { PATH = "/usr/bin::/bin" }`},
		[]string{"tmppath", fmt.Sprintf("cwd = %q", l.proj), `env = { PATH = "/tmp/bin:/usr/bin" }`},
		[]string{"okpath", fmt.Sprintf("cwd = %q", l.proj), `env = { PATH = "/usr/local/bin:/usr/bin" }`},
	)
	cfg, err := Load(l.cfg, l.guard)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ok":        "",
		"home":      "refused: workspace is your home directory",
		"wide":      "contains your home directory",
		"added":     "writable root from --add-dir " + filepath.Dir(l.cfg) + " contains Codexgate's config file",
		"unknown":   `argument "--yolo"`,
		"tmpdir":    "TMPDIR " + l.home + " is your home directory",
		"codexhome": "workspace contains codex's home (its own config) " + filepath.Join(l.other, ".codex"),
		"envhome":   "workspace contains codex's home (its own config) " + filepath.Join(l.other, "sub", ".codex"),
		"inner":     "workspace lies inside workspace " + l.proj + ` of worker "ok"`,
		"same":      "",
		"venv":      "PATH entry " + filepath.Join(l.other, ".venv", "bin") + " lies inside its own workspace " + l.other,
		"relpath":   `PATH entry "" is not an absolute path`,
		"tmppath":   "PATH entry /tmp/bin lies inside its own writable root /tmp",
		"okpath":    "",
	}
	for _, w := range cfg.Workers {
		if want[w.Name] == "" && w.Refused != "" || !strings.Contains(w.Refused, want[w.Name]) {
			t.Errorf("worker %s refused %q, want %q", w.Name, w.Refused, want[w.Name])
		}
	}
}

func TestLoadTrust(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(l *layout) []string // the ok worker's codex line
		want  []string                 // parts of the error; none: valid
	}{
		{"trusted", func(l *layout) []string { return nil }, nil},
		{"codex named and trusted", func(l *layout) []string { return []string{fmt.Sprintf("codex = %q", l.codex)} }, nil},
		{"config writable by the group", func(l *layout) []string { os.Chmod(l.cfg, 0o620); return nil }, []string{"config.toml: refused", "writable by group or others", "chmod go-w"}},
		{"config writable by others", func(l *layout) []string { os.Chmod(l.cfg, 0o602); return nil }, []string{"writable by group or others"}},
		{"config directory writable by others", func(l *layout) []string { os.Chmod(filepath.Dir(l.cfg), 0o777); return nil }, []string{"its directory", "writable by group or others"}},
		{"codex writable by the group", func(l *layout) []string { os.Chmod(l.codex, 0o775); return nil }, []string{"worker[0].codex", "writable by group or others"}},
		{"codex named and missing", func(l *layout) []string { return []string{fmt.Sprintf("codex = %q", l.codex+"-gone")} }, []string{"config.toml:4: worker[0].codex", "no such file"}},
		{"codex inside a workspace", func(l *layout) []string {
			script := filepath.Join(l.other, "codex.sh")
			os.WriteFile(script, []byte("#!/bin/sh\n"), 0o700)
			return []string{fmt.Sprintf("codex = %q", script)}
		}, []string{"config.toml:4: worker[0].codex", "lies inside workspace", `of worker "next"`}},
		{"codex through a symlink inside a workspace", func(l *layout) []string {
			return []string{fmt.Sprintf("codex = %q", filepath.Join(l.other, "cx"))}
		}, []string{"worker[0].codex", "lies inside workspace"}},
		{"codex inside its own workspace", func(l *layout) []string {
			script := filepath.Join(l.proj, "codex.sh")
			os.WriteFile(script, []byte("#!/bin/sh\n"), 0o700)
			return []string{fmt.Sprintf("codex = %q", script)}
		}, nil}, // that worker is refused instead, below
		{"codex inside a refused worker's workspace", func(l *layout) []string {
			return []string{fmt.Sprintf("codex = %q", filepath.Join(l.home, "bin", "codex"))}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLayout(t)
			writeConfig(t, l.cfg, []string{"ok", fmt.Sprintf("cwd = %q", l.proj)}, []string{"next", fmt.Sprintf("cwd = %q", l.other)}, []string{"home", fmt.Sprintf("cwd = %q", l.home)})
			if extra := tc.setup(l); extra != nil {
				writeConfig(t, l.cfg, append([]string{"ok", fmt.Sprintf("cwd = %q", l.proj)}, extra...), []string{"next", fmt.Sprintf("cwd = %q", l.other)}, []string{"home", fmt.Sprintf("cwd = %q", l.home)})
			}
			cfg, err := Load(l.cfg, l.guard)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if tc.name == "codex inside its own workspace" && !strings.Contains(cfg.Workers[0].Refused, "contains the codex binary it runs") {
					t.Errorf("refused %q", cfg.Workers[0].Refused)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// fakeInfo is a file with a given mode and owner.
type fakeInfo struct {
	mode fs.FileMode
	uid  uint32
}

func (f fakeInfo) Name() string       { return "f" }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return false }
func (f fakeInfo) Sys() any           { return &syscall.Stat_t{Uid: f.uid} }

func TestTrustOwner(t *testing.T) {
	t.Parallel()
	me, other := uint32(os.Getuid()), uint32(os.Getuid()+12345)
	for _, tc := range []struct {
		name   string
		info   fakeInfo
		rootOK bool
		want   string
	}{
		{"mine", fakeInfo{0o600, me}, false, ""},
		{"mine, read by all", fakeInfo{0o644, me}, false, ""},
		{"another user's", fakeInfo{0o600, other}, false, "owned by another user"},
		{"another user's binary", fakeInfo{0o755, other}, true, "owned by another user"},
		{"root's binary", fakeInfo{0o755, 0}, true, ""},
		{"group-writable", fakeInfo{0o660, me}, false, "writable by group or others"},
		{"root's, writable by all", fakeInfo{0o777, 0}, true, "writable by group or others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := trustInfo("f", tc.info, tc.rootOK)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("trustInfo = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheckOwn(t *testing.T) {
	t.Parallel()
	l := newLayout(t)
	if err := l.guard.CheckOwn(); err != nil {
		t.Errorf("own files outside /tmp: %v", err)
	}
	for _, tc := range []struct {
		name, path, tmpdir string
	}{
		{"under /tmp", "/tmp/codexgate/config.toml", ""},
		{"under /tmp, written with ..", "/var/../tmp/x/audit", ""},
		{"under $TMPDIR", filepath.Join(l.other, "state"), l.other},
	} {
		g := *l.guard
		g.TempDir = tc.tmpdir
		g.Own = append(slices.Clone(g.Own), Owned{What: "Codexgate's state directory", Path: tc.path})
		if err := g.CheckOwn(); err == nil || !strings.Contains(err.Error(), "state directory "+tc.path+" is under") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
