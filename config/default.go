package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

const defaultTemplate = `# Codexgate configuration. Edits are picked up while the app runs.
#
# One [[worker]] per workspace: each runs its own codex app-server with the
# sandbox "workspace-write" and the approval policy "on-request", and every
# approval it asks for becomes a card in the tray.
#
# A command the agent runs inside its sandbox needs no card, and the sandbox
# can write the whole workspace: a workspace may not be your home folder, a
# folder above it, or one that holds Codexgate's own files. Such a worker is
# refused and never starts.
%s
# [cards]
# show_bytes   = 65536         # text a card shows before "Show all"
# max_bytes    = 4194304       # larger requests are declined without asking
# settle_delay = "1s"          # how long the oldest card waits before a hotkey or a notification may allow it

# [hotkeys]                    # global keys for the oldest card; "" turns one off
# allow = "ctrl+alt+y"
# deny  = "ctrl+alt+n"

# [notifications]
# turns = true                 # a notification when a turn finishes, fails or is stopped
`

const workerTemplate = `
[[worker]]
# A unique name, used on the command line.
name  = %s
# The workspace, a project folder; it must exist.
cwd   = %s
# A codex binary; empty: the one Codexgate installed.
codex = ""
# A model; empty: codex's default.
model = ""
# Extra arguments after "app-server", and extra environment for codex.
args  = []
env   = {}
`

// exampleWorker is the worker of a first run from a folder that cannot be a
// workspace: commented out, to be filled in.
const exampleWorker = `
# To add a project folder, remove the "# " before the five lines below and
# set cwd to the folder (and name to a short name). Codexgate starts the
# worker as soon as you save.
# [[worker]]
# name  = "myproject"
# cwd   = "/path/to/myproject"
# codex = ""
# args  = []
`

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// WriteDefault writes a commented config with one worker for dir, or with
// only a commented-out example worker when dir is "", unless a file is
// already at path. It reports whether it wrote one.
func WriteDefault(path, dir string) (bool, error) {
	worker := exampleWorker
	if dir != "" {
		name := strings.Trim(unsafeNameChars.ReplaceAllString(filepath.Base(dir), "-"), "-._")
		if name == "" {
			name = "main"
		}
		name = name[:min(len(name), 64)]
		worker = fmt.Sprintf(workerTemplate, tomlString(name), tomlString(dir))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("create config directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("write default config: %w", err)
	}
	_, err = fmt.Fprintf(f, defaultTemplate, worker)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return false, fmt.Errorf("write default config: %w", err)
	}
	return true, nil
}
