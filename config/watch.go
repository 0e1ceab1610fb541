package config

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the file must be quiet before it is read: editors
// write in bursts (truncate, write, rename).
const settle = 200 * time.Millisecond

// Watch reads the file at path again whenever it changes, until ctx ends:
// onChange gets each valid new config, checked as Load checks it, onError
// each problem (the caller keeps running on the last good config). The
// directory is watched, not the file, so that saves by rename or replace
// (vim, VS Code, sed -i) are seen.
func Watch(ctx context.Context, path string, g *Guard, onChange func(*Config), onError func(error), log *slog.Logger) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config: %w", err)
	}
	path = filepath.Clean(path)
	if err := w.Add(filepath.Dir(path)); err != nil {
		w.Close()
		return fmt.Errorf("watch config directory: %w", err)
	}
	seen, _ := os.ReadFile(path)
	applied := true
	go func() {
		defer w.Close()
		var fire <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Clean(ev.Name) == path {
					fire = time.After(settle)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("config watch", "err", err)
			case <-fire:
				fire = nil
				src, err := readTrusted(path)
				if err != nil {
					applied = false
					onError(err)
					continue
				}
				// A file that was refused is checked again at its next
				// event, even unchanged: a chmod may have fixed it.
				if applied && bytes.Equal(src, seen) {
					continue
				}
				seen, applied = src, false
				cfg, err := parseGuarded(path, src, g)
				if err != nil {
					onError(err)
					continue
				}
				applied = true
				onChange(cfg)
			}
		}
	}()
	return nil
}
