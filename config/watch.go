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
// onChange gets each valid new config, onError each problem (the caller
// keeps running on the last good config). The directory is watched, not the
// file, so that saves by rename or replace (vim, VS Code, sed -i) are seen.
func Watch(ctx context.Context, path string, onChange func(*Config), onError func(error), log *slog.Logger) error {
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
				src, err := os.ReadFile(path)
				if err != nil {
					onError(fmt.Errorf("read config: %w", err))
					continue
				}
				if bytes.Equal(src, seen) {
					continue
				}
				seen = src
				cfg, err := Parse(path, src)
				if err != nil {
					onError(err)
					continue
				}
				onChange(cfg)
			}
		}
	}()
	return nil
}
