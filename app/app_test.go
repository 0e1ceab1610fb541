package app

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codexgate/config"
)

func TestWriteFirstConfig(t *testing.T) {
	home := t.TempDir()
	proj := filepath.Join(home, "src", "proj")
	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	guard := &config.Guard{Homes: []string{home}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name, cwd string
		workers   int
		say       string // part of what the person is told; "" nothing
	}{
		{"from home", home, 0, "it is your home directory"},
		{"from above home", filepath.Dir(home), 0, "it contains your home directory"},
		{"from a project", proj, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(tc.cwd)
			path := filepath.Join(t.TempDir(), "codexgate", "config.toml")
			say, err := writeFirstConfig(path, guard, log)
			if err != nil {
				t.Fatal(err)
			}
			if tc.say == "" && say != "" || !strings.Contains(say, tc.say) || tc.say != "" && !strings.Contains(say, "To add a project folder, edit "+path) {
				t.Errorf("said %q, want %q", say, tc.say)
			}
			cfg, err := config.Load(path, guard)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Workers) != tc.workers || tc.workers == 1 && cfg.Workers[0].Cwd != proj {
				t.Errorf("workers = %+v", cfg.Workers)
			}
			if again, err := writeFirstConfig(path, guard, log); again != "" || err != nil {
				t.Errorf("second run: %q %v", again, err)
			}
		})
	}
}

func TestNewGuardRefusesTmp(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	base := filepath.Join(os.TempDir(), "codexgate-guard-test")
	_, err := newGuard(filepath.Join(base, "config.toml"), filepath.Join(base, "state", "audit.jsonl"), filepath.Join(base, "run", "control.sock"), "")
	for _, want := range []string{
		"keeps no file of its own under /tmp",
		"config file " + filepath.Join(base, "config.toml") + " is under",
		"state directory (the audit log) " + filepath.Join(base, "state") + " is under",
		"control socket " + filepath.Join(base, "run", "control.sock") + " is under",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("newGuard: %v, want %q", err, want)
		}
	}
}
