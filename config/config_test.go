package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "x")
	os.WriteFile(file, nil, 0o600)
	for _, tc := range []struct {
		name string
		src  string
		want []string // substrings of the error; none: valid
	}{
		{"valid", `
[[worker]]
name = "api"
cwd = "` + dir + `"
args = ["-c", "x=1"]
env = { A = "b" }

[cards]
show_bytes = 2048
max_open_cards = 50
settle_delay = "2s"
`, nil},
		{"syntax", "[[worker]]\nname = \"api\nccwd = 1\n", []string{"config.toml:2", "worker.name"}},
		{"unknown key with a suggestion", "[[worker]]\nname = \"api\"\ncwd = \"" + dir + "\"\nnmae = \"x\"\n", []string{"config.toml:4", "worker.nmae", `did you mean "name"`}},
		{"unknown table", "[hotkeyz]\nallow = \"x\"\n", []string{"unknown key"}},
		{"wrong type", "[[worker]]\nname = 5\ncwd = \"" + dir + "\"\n", []string{"config.toml:2"}},
		{"duplicate name", "[[worker]]\nname = \"a\"\ncwd = \"" + dir + "\"\n[[worker]]\nname = \"a\"\ncwd = \"" + dir + "\"\n", []string{"config.toml:5", "worker[1].name", "already the name of worker[0]"}},
		{"missing cwd", "[[worker]]\nname = \"a\"\ncwd = \"/no/such/dir\"\n", []string{"config.toml:3", "worker[0].cwd", "does not exist"}},
		{"relative cwd", "[[worker]]\nname = \"a\"\ncwd = \"src\"\n", []string{"not an absolute path"}},
		{"cwd is a file", "[[worker]]\nname = \"a\"\ncwd = \"" + file + "\"\n", []string{"not a directory"}},
		{"no name", "[[worker]]\ncwd = \"" + dir + "\"\n", []string{"config.toml:1", "worker[0].name", "required"}},
		{"bad name", "[[worker]]\nname = \"a b\"\ncwd = \"" + dir + "\"\n", []string{"worker[0].name"}},
		{"bad delay", "[cards]\nsettle_delay = \"soon\"\n", []string{"config.toml:2"}},
		{"caps", "[cards]\nshow_bytes = 10\n", []string{"cards.show_bytes", "at least 1024"}},
		{"notifications typo", "[notifications]\nturn = false\n", []string{"config.toml:2", "notifications.turn", `did you mean "turns"`}},
		{"open card caps", "[cards]\nmax_open_cards = 0\nmax_open_bytes = 1024\n", []string{"config.toml:2: cards.max_open_cards: must be at least 1", "config.toml:3: cards.max_open_bytes: must be at least max_bytes"}},
		{"open card cap misspelt", "[cards]\nmax_open_card = 5\n", []string{"cards.max_open_card", `did you mean "max_open_cards"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("config.toml", []byte(tc.src))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if len(cfg.Workers) != 1 || cfg.Workers[0].Env["A"] != "b" || cfg.Cards.ShowBytes != 2048 || cfg.Cards.MaxBytes != DefaultCards.MaxBytes || cfg.Cards.MaxOpenCards != 50 || cfg.Cards.MaxOpenBytes != 64<<20 || cfg.Cards.SettleDelay.Duration != 2*time.Second {
					t.Errorf("config = %+v", cfg)
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

func TestWriteDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "my project!")
	os.Mkdir(ws, 0o700)
	path := filepath.Join(dir, "config", "codexgate", "config.toml")
	wrote, err := WriteDefault(path, ws)
	if err != nil || !wrote {
		t.Fatal(wrote, err)
	}
	cfg, err := Load(path, &Guard{Homes: []string{"/nonexistent/home"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Workers) != 1 || cfg.Workers[0].Name != "my-project" || cfg.Workers[0].Cwd != ws {
		t.Errorf("default config = %+v", cfg.Workers)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", info.Mode())
	}
	if wrote, err := WriteDefault(path, "/elsewhere"); wrote || err != nil {
		t.Errorf("second write: %v %v", wrote, err)
	}

	// Without a folder it writes no worker, only a commented example.
	example := filepath.Join(dir, "example", "config.toml")
	if wrote, err := WriteDefault(example, ""); !wrote || err != nil {
		t.Fatal(wrote, err)
	}
	cfg, err = Load(example, &Guard{Homes: []string{"/nonexistent/home"}})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(example)
	if len(cfg.Workers) != 0 || !strings.Contains(string(src), "# [[worker]]\n# name") || !strings.Contains(string(src), "To add a project folder") {
		t.Errorf("example config = %+v\n%s", cfg.Workers, src)
	}
}

// TestDefaultSettingsUncomment: each commented setting of the default
// config, uncommented, is valid and says the default.
func TestDefaultSettingsUncomment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o700)
	path := filepath.Join(dir, "config.toml")
	if _, err := WriteDefault(path, ws); err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(path)
	setting := regexp.MustCompile(`(?m)^# (\[[a-z]+\]|[a-z_]+ *=)`)
	if err := os.WriteFile(path, setting.ReplaceAll(src, []byte("$1")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, &Guard{Homes: []string{"/nonexistent/home"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cards.SettleDelay.Duration != time.Second || cfg.Hotkeys.Allow != "ctrl+alt+y" || !cfg.Notifications.Turns {
		t.Errorf("uncommented defaults = %+v %+v %+v", cfg.Cards, cfg.Hotkeys, cfg.Notifications)
	}
}
