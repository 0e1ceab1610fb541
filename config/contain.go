package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"
)

// Containment. A worker's sandbox lets every command the agent runs, with
// no card, write its workspace and each other writable root codex is given.
// None of them may hold the person's home (shell start-up files), the
// config Codexgate reloads live (its codex binaries run outside the
// sandbox), the audit log, the control socket, or a binary Codexgate runs.
// A worker that breaks this rule is refused: it never starts, and its
// status says why.

// Guard is what the containment and trust rules protect.
type Guard struct {
	// Homes are the person's home directories: $HOME, and the account's
	// home when it differs.
	Homes []string
	// Own are Codexgate's own files and directories.
	Own []Owned
	// Codex is the codex binary a worker runs when its config names none.
	Codex string
	// Native is the binary a codex path really runs (the native binary
	// behind the Node wrapper); nil: the path itself.
	Native func(string) string
	// TempDir is the TMPDIR workers inherit ("" when unset): codex lets
	// the sandbox write it.
	TempDir string
	// Path is the PATH workers inherit. Codex runs programs it finds there
	// (git, at every turn) outside the sandbox.
	Path string
	// CodexHome is the CODEX_HOME workers inherit (codex's default when
	// unset). Codex's own config there can run commands outside the
	// sandbox, so it is protected like Codexgate's.
	CodexHome string
}

// Owned is one of Codexgate's own paths, and what it is, for messages.
type Owned struct{ What, Path string }

// writable is a directory a worker's sandbox can write, and where it comes from.
type writable struct {
	Path string
	From string // "workspace", "TMPDIR", "writable root" and the argument that adds it
}

// slashTmp is writable in every workspace-write sandbox.
const slashTmp = "/tmp"

// CheckOwn refuses Codexgate's own files under /tmp or $TMPDIR, which
// every worker's sandbox can write.
func (g *Guard) CheckOwn() error {
	tmps := []string{slashTmp}
	if g.TempDir != "" {
		tmps = append(tmps, g.TempDir)
	}
	var errs []error
	for _, o := range g.Own {
		for _, tmp := range tmps {
			if contains(tmp, o.Path) {
				errs = append(errs, fmt.Errorf("%s %s is under %s", o.What, o.Path, tmp))
				break
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("codexgate keeps no file of its own under /tmp or $TMPDIR, which every worker's sandbox can write; move it (--config, --socket, XDG_CONFIG_HOME, XDG_STATE_HOME, XDG_RUNTIME_DIR, or install the binary elsewhere): %w", errors.Join(errs...))
	}
	return nil
}

// Problem is what keeps dir from being a workspace ("is your home
// directory", "contains Codexgate's config file ..."), or "" when it may be
// one: the rule for workspaces on its own, as first run applies it.
func (g *Guard) Problem(dir string) string {
	return g.problem(dir, g.workerOwn(Worker{}))
}

// check applies the containment and trust rules to a parsed config: it
// sets each refused worker's Refused, and returns the trust errors, which
// refuse the whole file.
func (g *Guard) check(path string, src []byte, cfg *Config) error {
	lines := newLineFinder(src)
	roots := make([][]writable, len(cfg.Workers)) // of the workers that may run
	for i, w := range cfg.Workers {
		rs, err := writableRoots(w, g.TempDir)
		if err != nil {
			cfg.Workers[i].Refused = "refused: " + err.Error()
			continue
		}
		more, programs, err := g.codexConfig(w)
		if err != nil {
			cfg.Workers[i].Refused = "refused: " + err.Error()
			continue
		}
		rs = append(rs, more...)
		own := append(g.workerOwn(w), programs...)
		for _, r := range rs {
			if reason := g.checkRoot(r, own); reason != "" {
				cfg.Workers[i].Refused = reason
				break
			}
		}
		if cfg.Workers[i].Refused == "" {
			roots[i] = rs
		}
	}
	// Only now that every worker's roots are known: a root inside another
	// worker's is refused.
	nested := make([]string, len(cfg.Workers))
	for i := range cfg.Workers {
		nested[i] = insideAnother(roots, i, cfg.Workers)
	}
	for i, w := range cfg.Workers {
		if nested[i] == "" && roots[i] != nil {
			nested[i] = g.pathProblem(w, i, roots, cfg.Workers)
		}
	}
	for i, why := range nested {
		if why != "" {
			cfg.Workers[i].Refused, roots[i] = why, nil
		}
	}
	var errs []error
	for i, w := range cfg.Workers {
		fail := func(format string, args ...any) {
			errs = append(errs, &Error{
				File:  path,
				Line:  lines.findInTable("worker", i, "codex"),
				Field: fmt.Sprintf("worker[%d].codex", i),
				Msg:   fmt.Sprintf(format, args...),
			})
		}
		for _, bin := range g.binaries(w) {
			switch err := trustFile(bin, true); {
			case errors.Is(err, os.ErrNotExist) && w.Codex == "":
				// The default codex is missing: starting the worker says so.
			case err != nil && w.Codex == "":
				fail("the pinned codex: %v", err)
			case err != nil:
				fail("%v", err)
			}
			for j, rs := range roots {
				for _, r := range rs {
					if contains(r.Path, bin) {
						fail("codex binary %s lies inside %s %s of worker %q, which its sandbox can write; keep codex outside every workspace", bin, r.From, r.Path, cfg.Workers[j].Name)
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// insideAnother is why a root of worker i lies inside a root of another
// worker that may run, or "". That worker's sandbox could replace the
// folder by a link to anywhere, and codex, given the path, then lets the
// worker's sandbox write where the link points (it checks only links
// inside the worker's own writable roots). /tmp and TMPDIR are every
// worker's: codex refuses a path through a link there itself.
func insideAnother(roots [][]writable, i int, workers []Worker) string {
	shared := func(r writable) bool { return r.From == "TMPDIR" || r.Path == slashTmp }
	for _, r := range roots[i] {
		if shared(r) {
			continue
		}
		for j, rs := range roots {
			for _, q := range rs {
				if j == i || shared(q) || same(q.Path, r.Path) || !contains(q.Path, r.Path) {
					continue
				}
				label := r.From
				if r.From != "workspace" {
					label += " " + r.Path
				}
				return fmt.Sprintf("refused: %s lies inside %s %s of worker %q, whose sandbox could replace it by a link to anywhere. Give each worker a folder that no other worker's sandbox can write", label, q.From, q.Path, workers[j].Name)
			}
		}
	}
	return ""
}

// pathProblem is why worker i's PATH (inherited, or set by its env) is
// unsafe, or "". Codex runs programs it finds there (git at every turn)
// outside the sandbox: a relative or empty entry is looked up in the
// workspace, and an entry inside a writable root of a worker that may run
// (a virtualenv's bin in the project, /tmp) is one its sandbox can fill.
func (g *Guard) pathProblem(w Worker, i int, roots [][]writable, workers []Worker) string {
	path := g.Path
	if v, ok := w.Env["PATH"]; ok {
		path = v
	}
	const why = "codex runs git and other programs it finds on PATH outside the sandbox"
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			return fmt.Sprintf("refused: PATH entry %q is not an absolute path, so it is looked up in the workspace; %s", dir, why)
		}
		order := []int{i} // its own roots first
		for j := range roots {
			if j != i {
				order = append(order, j)
			}
		}
		for _, j := range order {
			for _, r := range roots[j] {
				if !contains(r.Path, dir) {
					continue
				}
				whose := "its own"
				if j != i {
					whose = fmt.Sprintf("worker %q's", workers[j].Name)
				}
				return fmt.Sprintf("refused: PATH entry %s lies inside %s %s %s, which that sandbox can write; %s", dir, whose, r.From, r.Path, why)
			}
		}
	}
	return ""
}

// binaries are the codex paths a worker runs: the configured (or default)
// one and the native binary behind it.
func (g *Guard) binaries(w Worker) []string {
	codex := w.Codex
	if codex == "" {
		codex = g.Codex
	}
	if codex == "" {
		return nil
	}
	bins := []string{codex}
	if g.Native != nil {
		if native := g.Native(codex); native != codex {
			bins = append(bins, native)
		}
	}
	return bins
}

// workerOwn are the paths of a worker's own that its sandbox must not
// write: the codex binaries it runs and codex's home.
func (g *Guard) workerOwn(w Worker) []Owned {
	var own []Owned
	for _, bin := range g.binaries(w) {
		own = append(own, Owned{What: "the codex binary it runs,", Path: bin})
	}
	for _, home := range g.codexHomes(w) {
		own = append(own, Owned{What: "codex's home (its own config)", Path: home})
	}
	return own
}

// codexHomes are where the worker's codex may keep its home.
func (g *Guard) codexHomes(w Worker) []string {
	homes := []string{g.CodexHome}
	if v, ok := w.Env["CODEX_HOME"]; ok {
		homes = []string{v}
	} else if v, ok := w.Env["HOME"]; ok && v != "" {
		// Without CODEX_HOME codex's home is $HOME/.codex, of the env
		// the worker is given (when Codexgate's own has no CODEX_HOME).
		homes = append(homes, filepath.Join(v, ".codex"))
	}
	return slices.DeleteFunc(homes, func(h string) bool { return h == "" })
}

// codexConfig reads the config.toml in the worker's codex home, which codex
// applies under Codexgate's settings: the writable roots it adds to the
// sandbox, and the programs it names that codex runs outside it (the
// notify hook, MCP servers; a name without a folder is found through PATH,
// which is checked on its own). None when there is no such file.
func (g *Guard) codexConfig(w Worker) (roots []writable, programs []Owned, err error) {
	for _, home := range g.codexHomes(w) {
		path := filepath.Join(home, "config.toml")
		var doc map[string]any
		switch _, err := toml.DecodeFile(path, &doc); {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("codex's config %s: %w", path, err)
		}
		tables := []map[string]any{doc}
		if profiles, ok := doc["profiles"].(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(profiles)) {
				if t, ok := profiles[name].(map[string]any); ok {
					tables = append(tables, t)
				}
			}
		}
		from := "writable root from " + path + ","
		for _, t := range tables {
			sww, _ := t["sandbox_workspace_write"].(map[string]any)
			list, _ := sww["writable_roots"].([]any)
			for _, v := range list {
				if p, ok := v.(string); ok {
					if !filepath.IsAbs(p) {
						p = filepath.Join(w.Cwd, p)
					}
					roots = append(roots, writable{Path: p, From: from})
				}
			}
			if notify, ok := t["notify"].([]any); ok && len(notify) > 0 {
				if p, ok := notify[0].(string); ok && filepath.IsAbs(p) {
					programs = append(programs, Owned{What: "the notify program of codex's config", Path: p})
				}
			}
			servers, _ := t["mcp_servers"].(map[string]any)
			for _, name := range slices.Sorted(maps.Keys(servers)) {
				server, _ := servers[name].(map[string]any)
				if p, ok := server["command"].(string); ok && filepath.IsAbs(p) {
					programs = append(programs, Owned{What: "the MCP server " + name + " of codex's config", Path: p})
				}
			}
		}
	}
	return roots, programs, nil
}

// checkRoot is why root may not be writable by a worker whose own paths
// are own, or "" when it may.
func (g *Guard) checkRoot(r writable, own []Owned) string {
	what := g.problem(r.Path, own)
	if what == "" {
		return ""
	}
	label := r.From // a workspace's path is shown beside it
	if r.From != "workspace" {
		label += " " + r.Path
	}
	return fmt.Sprintf("refused: %s %s; its sandbox could change that without asking. Give the worker a project folder", label, what)
}

// problem is what makes dir unfit to be written by the sandbox of a worker
// whose own paths are own, or "".
func (g *Guard) problem(dir string, own []Owned) string {
	for _, p := range resolved(dir) {
		if p == "/" {
			return "is the root directory"
		}
	}
	for _, home := range g.Homes {
		if home == "" {
			continue
		}
		if same(dir, home) {
			return "is your home directory"
		}
		if contains(dir, home) {
			return "contains your home directory " + home
		}
	}
	for _, o := range append(slices.Clone(g.Own), own...) {
		if contains(dir, o.Path) {
			return "contains " + o.What + " " + o.Path
		}
	}
	return ""
}

// writableRoots are the directories a worker's sandbox can write: its
// workspace, /tmp, the TMPDIR it inherits (tempDir, unless its env sets
// one) and those its args add. An argument that could widen the sandbox in
// a way Codexgate cannot judge is an error.
func writableRoots(w Worker, tempDir string) ([]writable, error) {
	roots := []writable{{Path: w.Cwd, From: "workspace"}, {Path: slashTmp, From: "writable root"}}
	if v, ok := w.Env["TMPDIR"]; ok {
		tempDir = v
	}
	if tempDir != "" {
		if !filepath.IsAbs(tempDir) {
			return nil, fmt.Errorf("TMPDIR %q is not an absolute path", tempDir)
		}
		roots = append(roots, writable{Path: tempDir, From: "TMPDIR"})
	}
	more, err := argRoots(w.Args)
	if err != nil {
		return nil, err
	}
	for _, r := range more {
		if !filepath.IsAbs(r.Path) {
			r.Path = filepath.Join(w.Cwd, r.Path)
		}
		roots = append(roots, r)
	}
	return roots, nil
}

// argRoots are the writable roots codex's arguments (after "app-server")
// add. Only arguments known not to widen the sandbox, or whose widening can
// be read, pass.
func argRoots(args []string) ([]writable, error) {
	var roots []writable
	for i := 0; i < len(args); i++ {
		arg := args[i]
		flag, value, inline := arg, "", false
		switch {
		case strings.HasPrefix(arg, "--"):
			flag, value, inline = strings.Cut(arg, "=")
		case strings.HasPrefix(arg, "-c") && len(arg) > 2:
			flag, value, inline = "-c", strings.TrimPrefix(arg[2:], "="), true
		}
		next := func() (string, error) {
			if inline {
				return value, nil
			}
			if i+1 == len(args) {
				return "", fmt.Errorf("argument %s needs a value", flag)
			}
			i++
			return args[i], nil
		}
		switch flag {
		case "-c", "--config":
			v, err := next()
			if err != nil {
				return nil, err
			}
			rs, err := overrideRoots(v)
			if err != nil {
				return nil, fmt.Errorf("argument %s %s: %w", flag, v, err)
			}
			roots = append(roots, rs...)
		case "--add-dir":
			v, err := next()
			if err != nil {
				return nil, err
			}
			roots = append(roots, writable{Path: v, From: "writable root from --add-dir"})
		case "--enable", "--disable":
			if _, err := next(); err != nil {
				return nil, err
			}
		case "--strict-config", "--analytics-default-enabled", "--stdio":
			if inline {
				return nil, fmt.Errorf("argument %s takes no value", flag)
			}
		case "--listen":
			v, err := next()
			if err != nil {
				return nil, err
			}
			if v != "stdio://" {
				return nil, fmt.Errorf("argument --listen %s: codexgate talks to codex on stdio only", v)
			}
		default:
			return nil, fmt.Errorf("argument %q: codexgate cannot tell whether it widens the sandbox (it knows -c/--config, --enable, --disable, --add-dir, --strict-config)", arg)
		}
	}
	return roots, nil
}

// overrideRoots judges one `-c key=value`, read as codex reads it: the key
// split at dots, the value parsed as TOML, or taken as a plain string when
// it does not parse.
func overrideRoots(kv string) ([]writable, error) {
	key, raw, ok := strings.Cut(kv, "=")
	if !ok {
		return nil, errors.New("not key=value")
	}
	raw = strings.TrimSpace(raw)
	var value any = strings.Trim(raw, `"'`)
	var doc map[string]any
	if _, err := toml.Decode("_x_ = "+raw, &doc); err == nil {
		value = doc["_x_"]
	}
	return judge(strings.Split(strings.TrimSpace(key), "."), value, kv)
}

// refusedKeys widen the sandbox in ways Codexgate cannot read: permission
// profiles, the old sandbox_permissions, and a profile picked from codex's
// own config file.
var refusedKeys = []string{"permissions", "default_permissions", "sandbox_permissions", "profile"}

// programKeys name programs codex runs itself, outside the sandbox: the
// notify hook at every turn's end, lifecycle hooks, MCP servers.
var programKeys = []string{"notify", "hooks", "mcp_servers"}

// judge is the writable roots that setting path to value adds; an error
// when it could widen the sandbox otherwise. Tables are judged key by key.
func judge(path []string, value any, arg string) ([]writable, error) {
	p := make([]string, len(path))
	for i, seg := range path {
		p[i] = strings.Trim(seg, " \t\"'") // codex does not unquote; judge as if it did
	}
	for len(p) >= 2 && p[0] == "profiles" { // a profile's settings are judged as the top level's
		p = p[2:]
	}
	if len(p) > 0 && slices.Contains(refusedKeys, p[0]) {
		return nil, fmt.Errorf("%s can widen the sandbox in ways codexgate cannot check", strings.Join(path, "."))
	}
	if len(p) > 0 && (slices.Contains(programKeys, p[0]) || strings.HasSuffix(p[len(p)-1], "command")) {
		return nil, fmt.Errorf("%s names a program codex runs outside the sandbox, which codexgate cannot check; a script the sandbox can write would run there", strings.Join(path, "."))
	}
	if table, ok := value.(map[string]any); ok {
		var roots []writable
		for _, k := range slices.Sorted(maps.Keys(table)) {
			rs, err := judge(append(slices.Clone(path), k), table[k], arg)
			if err != nil {
				return nil, err
			}
			roots = append(roots, rs...)
		}
		return roots, nil
	}
	if len(p) == 0 {
		return nil, nil
	}
	switch p[0] {
	case "sandbox_mode":
		if s, ok := value.(string); !ok || len(p) != 1 || (s != "workspace-write" && s != "read-only") {
			return nil, fmt.Errorf("%s: only workspace-write or read-only", strings.Join(path, "."))
		}
	case "sandbox_workspace_write":
		switch {
		case len(p) == 2 && p[1] == "writable_roots":
			list, ok := value.([]any)
			if !ok {
				return nil, fmt.Errorf("%s is not a list of paths", strings.Join(path, "."))
			}
			var roots []writable
			for _, v := range list {
				s, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("%s holds %v, not a path", strings.Join(path, "."), v)
				}
				roots = append(roots, writable{Path: s, From: "writable root from -c " + arg + ","})
			}
			return roots, nil
		case len(p) == 2 && p[1] == "network_access":
			// With network access codex lets the sandbox open any socket,
			// and every Unix socket is reachable by its path or its
			// abstract name: the session bus (systemd-run runs anything
			// outside the sandbox; the keyring hands out secrets), the X
			// display (synthetic keys press the allow hotkey), the
			// ssh-agent. A worker with it could answer its own cards.
			if value != false {
				return nil, fmt.Errorf("%s: a sandbox with network access can reach your session bus, display and ssh-agent, and through them answer its own cards and run commands outside the sandbox", strings.Join(path, "."))
			}
		case len(p) == 2 && slices.Contains([]string{"exclude_tmpdir_env_var", "exclude_slash_tmp"}, p[1]):
		default:
			return nil, fmt.Errorf("%s: codexgate cannot tell whether it widens the sandbox", strings.Join(path, "."))
		}
	}
	return nil, nil
}

// trustFile refuses a file (or directory) that someone else could change:
// writable by group or others, or owned by another user. rootOK also
// trusts root's files.
func trustFile(path string, rootOK bool) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	return trustInfo(path, info, rootOK)
}

func trustInfo(path string, info os.FileInfo, rootOK bool) error {
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (%v): run chmod go-w %s", path, perm, path)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot read its owner", path)
	}
	if uid := int(st.Uid); uid != os.Getuid() && !(rootOK && uid == 0) {
		return fmt.Errorf("%s is owned by another user (uid %d)", path, uid)
	}
	return nil
}

// readTrusted reads the config file at path, refusing it when it or its
// directory could be changed by someone else. The file is checked through
// the descriptor it is read from.
func readTrusted(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if err := trustInfo(path, info, false); err != nil {
		return nil, &Error{File: path, Msg: "refused: " + err.Error()}
	}
	dirs := []string{filepath.Dir(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, dir := range dirs {
		if err := trustFile(dir, false); err != nil {
			return nil, &Error{File: path, Msg: "refused: its directory " + err.Error()}
		}
	}
	src, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return src, nil
}

// resolved are the forms of path to compare: cleaned and absolute, with
// symlinks resolved, both after cleaning (as codex is given a cleaned
// workspace) and on the path as written (where "link/.." leaves the link's
// target). A part that does not exist yet is kept as written after the
// longest existing parent.
func resolved(path string) []string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return []string{filepath.Clean(path)}
	}
	out := []string{resolve(abs)}
	if filepath.IsAbs(path) {
		if raw := resolve(path); raw != out[0] {
			out = append(out, raw)
		}
	}
	return out
}

func resolve(path string) string {
	rest := ""
	for {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(path)
		if parent == path {
			return filepath.Join(path, rest)
		}
		rest = filepath.Join(filepath.Base(path), rest)
		path = parent
	}
}

// contains reports whether the directory root holds p (or is p), once
// both are resolved, or through a symlink on p's way that lies inside root:
// the sandbox could point that anywhere.
func contains(root, p string) bool {
	roots := resolved(root)
	in := func(q string) bool {
		for _, r := range roots {
			if q == r || r == "/" || strings.HasPrefix(q, r+"/") {
				return true
			}
		}
		return false
	}
	if slices.ContainsFunc(resolved(p), in) {
		return true
	}
	q, err := filepath.Abs(p)
	if err != nil {
		return false
	}
	for ; ; q = filepath.Dir(q) {
		if in(filepath.Join(resolve(filepath.Dir(q)), filepath.Base(q))) || sameDir(root, q) {
			return true
		}
		if filepath.Dir(q) == q {
			return false
		}
	}
}

// same reports whether a and b are the same directory.
func same(a, b string) bool {
	for _, x := range resolved(a) {
		if slices.Contains(resolved(b), x) {
			return true
		}
	}
	return sameDir(a, b)
}

// sameDir reports whether a and b are one directory by device and inode: a
// bind mount shows a directory at a second path that no comparison of
// paths sees.
func sameDir(a, b string) bool {
	ai, err := os.Stat(a)
	if err != nil || !ai.IsDir() {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}
