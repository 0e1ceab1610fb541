// Package config reads and validates Codexgate's TOML file. Every error
// names the file, the line and the field; unknown keys are errors, with a
// suggestion, so a typo never silently drops a setting. It also applies the
// trust and containment rules (contain.go): a file or codex binary someone
// else could change is refused, and so is a worker whose sandbox could
// write the person's home or Codexgate's own files.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"codexgate/config/keys"
	"codexgate/config/secrets"
)

// Config is the whole file.
type Config struct {
	Workers []Worker `toml:"worker"`
	Cards   Cards    `toml:"cards"`
	Hotkeys Hotkeys  `toml:"hotkeys"`

	Notifications Notifications `toml:"notifications"`
}

// Notifications choose which desktop notifications are shown besides the
// one per card.
type Notifications struct {
	// Turns: one notification when a turn finishes, fails or is stopped.
	Turns bool `toml:"turns"`
}

// Hotkeys are the global keys that answer the oldest card.
type Hotkeys struct {
	Allow string `toml:"allow"`
	Deny  string `toml:"deny"`
}

// Map is the keys by the name the hotkey manager reports.
func (h Hotkeys) Map() map[string]string {
	m := map[string]string{}
	if h.Allow != "" {
		m["allow"] = h.Allow
	}
	if h.Deny != "" {
		m["deny"] = h.Deny
	}
	return m
}

// Worker is one [[worker]]: a codex app-server for one workspace.
type Worker struct {
	Name  string            `toml:"name"`
	Cwd   string            `toml:"cwd"`
	Codex string            `toml:"codex"`
	Model string            `toml:"model"`
	Args  []string          `toml:"args"`
	Env   map[string]string `toml:"env"`
	// Secrets maps environment variables of codex to keyring secrets, for
	// a custom model provider's key. The agent's shell never sees them.
	Secrets map[string]string `toml:"secrets"`
	// Refused is why the containment rule keeps this worker from running,
	// or "" (set by Load and Watch, never read from the file).
	Refused string `toml:"-"`
}

// Cards are the limits on what a card shows.
type Cards struct {
	// ShowBytes caps the text a card shows before "Show all".
	ShowBytes int `toml:"show_bytes"`
	// MaxBytes is the size above which a request is declined without asking.
	MaxBytes int `toml:"max_bytes"`
	// MaxOpenCards and MaxOpenBytes cap the open cards, in number and in
	// the bytes they keep: past them, requests are declined without asking.
	MaxOpenCards int `toml:"max_open_cards"`
	MaxOpenBytes int `toml:"max_open_bytes"`
	// SettleDelay is how long a card must have been the oldest, unchanged,
	// before a hotkey or a notification may allow it.
	SettleDelay Duration `toml:"settle_delay"`
}

// Duration is a time.Duration written as "1s", "500ms".
type Duration struct{ time.Duration }

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return errors.New("must not be negative")
	}
	d.Duration = v
	return nil
}

// Defaults for what the file leaves out.
var (
	DefaultCards         = Cards{ShowBytes: 64 << 10, MaxBytes: 4 << 20, MaxOpenCards: 1000, MaxOpenBytes: 64 << 20, SettleDelay: Duration{time.Second}}
	DefaultHotkeys       = Hotkeys{Allow: "ctrl+alt+y", Deny: "ctrl+alt+n"}
	DefaultNotifications = Notifications{Turns: true}
)

// Error is a problem in the file, with where it is.
type Error struct {
	File  string
	Line  int    // 0 when unknown
	Field string // dotted, e.g. worker[1].cwd
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	return b.String()
}

// DefaultPath is $XDG_CONFIG_HOME/codexgate/config.toml.
func DefaultPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find config directory: %w", err)
	}
	return filepath.Join(dir, "codexgate", "config.toml"), nil
}

// Load reads and validates the file at path, and applies the trust and
// containment rules of g to it: a file or codex binary someone else could
// change is an error; a worker that breaks containment is marked Refused.
func Load(path string, g *Guard) (*Config, error) {
	src, err := readTrusted(path)
	if err != nil {
		return nil, err
	}
	return parseGuarded(path, src, g)
}

func parseGuarded(path string, src []byte, g *Guard) (*Config, error) {
	cfg, err := Parse(path, src)
	if err != nil {
		return nil, err
	}
	if err := g.check(path, src, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Parse validates src, the contents of the file named path.
func Parse(path string, src []byte) (*Config, error) {
	cfg := Config{Cards: DefaultCards, Hotkeys: DefaultHotkeys, Notifications: DefaultNotifications}
	md, err := toml.Decode(string(src), &cfg)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: path, Line: pe.Position.Line, Field: pe.LastKey, Msg: pe.Message}
		}
		// Type mismatches come as plain errors that carry line and key in
		// their text.
		if m := decodeErrorPattern.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &Error{File: path, Line: line, Field: m[2], Msg: m[3]}
		}
		return nil, &Error{File: path, Msg: err.Error()}
	}
	lines := newLineFinder(src)
	var errs []error
	for _, key := range md.Undecoded() {
		field := key.String()
		msg := "unknown key"
		if s := suggest(key[len(key)-1], knownKeys(key[:len(key)-1])); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		errs = append(errs, &Error{File: path, Line: lines.find(key), Field: field, Msg: msg})
	}
	errs = append(errs, cfg.validate(path, lines)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for i := range cfg.Workers {
		cfg.Workers[i].Cwd = filepath.Clean(cfg.Workers[i].Cwd)
	}
	return &cfg, nil
}

var decodeErrorPattern = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

var envPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (c *Config) validate(path string, lines *lineFinder) []error {
	var errs []error
	fail := func(i int, field, format string, args ...any) {
		errs = append(errs, &Error{
			File:  path,
			Line:  lines.findInTable("worker", i, field),
			Field: fmt.Sprintf("worker[%d].%s", i, field),
			Msg:   fmt.Sprintf(format, args...),
		})
	}
	seen := map[string]int{}
	for i, w := range c.Workers {
		switch prev, dup := seen[w.Name]; {
		case w.Name == "":
			fail(i, "name", "is required")
		case !namePattern.MatchString(w.Name):
			fail(i, "name", "%q: use letters, digits, '.', '_' and '-' (at most 64)", w.Name)
		case dup:
			fail(i, "name", "%q is already the name of worker[%d]", w.Name, prev)
		default:
			seen[w.Name] = i
		}
		switch info, err := os.Stat(w.Cwd); {
		case w.Cwd == "":
			fail(i, "cwd", "is required")
		case !filepath.IsAbs(w.Cwd):
			fail(i, "cwd", "%q is not an absolute path", w.Cwd)
		case err != nil:
			fail(i, "cwd", "%q does not exist", w.Cwd)
		case !info.IsDir():
			fail(i, "cwd", "%q is not a directory", w.Cwd)
		}
		if w.Codex != "" && !filepath.IsAbs(w.Codex) {
			fail(i, "codex", "%q is not an absolute path", w.Codex)
		}
		for env, secret := range w.Secrets {
			if !envPattern.MatchString(env) {
				fail(i, "secrets", "%q is not an environment variable name", env)
			}
			if err := secrets.ValidName(secret); err != nil {
				fail(i, "secrets", "%v", err)
			}
			if _, both := w.Env[env]; both {
				fail(i, "secrets", "%s is also set in env", env)
			}
		}
	}
	cardErr := func(field, msg string) {
		errs = append(errs, &Error{File: path, Line: lines.findInTable("cards", 0, field), Field: "cards." + field, Msg: msg})
	}
	if c.Cards.ShowBytes < 1024 {
		cardErr("show_bytes", "must be at least 1024")
	}
	if c.Cards.MaxBytes < c.Cards.ShowBytes {
		cardErr("max_bytes", "must be at least show_bytes")
	}
	if c.Cards.MaxOpenCards < 1 {
		cardErr("max_open_cards", "must be at least 1")
	}
	if c.Cards.MaxOpenBytes < c.Cards.MaxBytes {
		cardErr("max_open_bytes", "must be at least max_bytes")
	}
	for name, spec := range map[string]string{"allow": c.Hotkeys.Allow, "deny": c.Hotkeys.Deny} {
		if spec == "" {
			continue // that hotkey is off
		}
		if _, err := keys.Parse(spec); err != nil {
			errs = append(errs, &Error{File: path, Line: lines.findInTable("hotkeys", 0, name), Field: "hotkeys." + name, Msg: err.Error()})
		}
	}
	if c.Hotkeys.Allow != "" && c.Hotkeys.Allow == c.Hotkeys.Deny {
		errs = append(errs, &Error{File: path, Line: lines.findInTable("hotkeys", 0, "deny"), Field: "hotkeys.deny", Msg: "is the same key as hotkeys.allow"})
	}
	return errs
}

// knownKeys are the keys allowed in the table at path.
func knownKeys(path toml.Key) []string {
	switch path.String() {
	case "":
		return []string{"worker", "cards", "hotkeys", "notifications"}
	case "notifications":
		return []string{"turns"}
	case "hotkeys":
		return []string{"allow", "deny"}
	case "worker":
		return []string{"name", "cwd", "codex", "model", "args", "env", "secrets"}
	case "cards":
		return []string{"show_bytes", "max_bytes", "max_open_cards", "max_open_bytes", "settle_delay"}
	}
	return nil
}

// suggest is the known key closest to key, if it is close enough to be a typo.
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// lineFinder locates keys in the source for error messages. The TOML
// decoder reports lines only for syntax errors; this finds the line of a
// key that decoded but is wrong.
type lineFinder struct{ lines []string }

func newLineFinder(src []byte) *lineFinder {
	return &lineFinder{lines: strings.Split(string(src), "\n")}
}

var headerPattern = regexp.MustCompile(`^\s*\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?`)

// findInTable is the line of key in the index-th [[table]] (or [table]),
// or of that table's header when key is not written there.
func (f *lineFinder) findInTable(table string, index int, key string) int {
	seen, header := -1, 0
	for n, line := range f.lines {
		if m := headerPattern.FindStringSubmatch(line); m != nil {
			if header > 0 && seen == index {
				break
			}
			if m[1] == table {
				seen++
				if seen == index {
					header = n + 1
				}
			}
			continue
		}
		if header > 0 && seen == index && keyOnLine(line, key) {
			return n + 1
		}
	}
	return header
}

// find is the first line of key (a full key path) anywhere in its table.
func (f *lineFinder) find(key toml.Key) int {
	table, name := strings.Join(key[:len(key)-1], "."), key[len(key)-1]
	inTable := table == ""
	for n, line := range f.lines {
		if m := headerPattern.FindStringSubmatch(line); m != nil {
			inTable = m[1] == table
			continue
		}
		if inTable && keyOnLine(line, name) {
			return n + 1
		}
	}
	return 0
}

func keyOnLine(line, key string) bool {
	name, _, ok := strings.Cut(strings.TrimSpace(line), "=")
	return ok && slices.Contains([]string{key, `"` + key + `"`}, strings.TrimSpace(name))
}
