// Package hotkey holds Codexgate's global hotkeys while cards are open. The
// keys are grabbed by the codexgate-hotkey helper process (see its doc for
// why); the Manager starts it when the first card opens, ends it (releasing
// the keys) when none is open, and reports a failure to grab once.
package hotkey

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// repeatGap drops the presses that X11 auto-repeat makes of one held key:
// one press answers at most one card.
const repeatGap = 500 * time.Millisecond

// readyTimeout bounds the helper's start.
const readyTimeout = 5 * time.Second

// HelperPath is the helper installed beside the running binary.
func HelperPath() string {
	exe, err := os.Executable()
	if err != nil {
		return "codexgate-hotkey"
	}
	return filepath.Join(filepath.Dir(exe), "codexgate-hotkey")
}

// Manager grabs the configured keys while wanted.
type Manager struct {
	helper  string
	onPress func(name string)
	onFail  func(error)
	log     *slog.Logger

	mu        sync.Mutex // protects everything below
	keys      map[string]string
	want      bool
	failed    bool // a failure was reported for these keys; no retry until they change
	run       *helperRun
	lastPress map[string]time.Time
}

type helperRun struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stopped bool
	done    chan struct{}
}

// New returns a manager of keys (name to "ctrl+alt+y"). onPress gets the
// name of a pressed key; onFail a failure to grab, once per set of keys.
func New(helper string, keyset map[string]string, onPress func(string), onFail func(error), log *slog.Logger) *Manager {
	return &Manager{helper: helper, keys: keyset, onPress: onPress, onFail: onFail, log: log, lastPress: map[string]time.Time{}}
}

// Want grabs the keys (on) or releases them (off).
func (m *Manager) Want(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.want = on
	m.sync()
}

// SetKeys changes the keys; held keys are re-grabbed.
func (m *Manager) SetKeys(keyset map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if maps.Equal(keyset, m.keys) {
		return
	}
	m.keys, m.failed = keyset, false
	m.stopLocked()
	m.sync()
}

// Registered reports whether the keys are grabbed now.
func (m *Manager) Registered() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.run != nil
}

// Close releases the keys.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.want = false
	m.stopLocked()
}

// sync starts or stops the helper to match want; m.mu is held.
func (m *Manager) sync() {
	switch {
	case m.want && m.run == nil && !m.failed && len(m.keys) > 0:
		if err := m.startLocked(); err != nil {
			m.failed = true
			m.log.Warn("global hotkeys are not available", "err", err)
			go m.onFail(err)
		}
	case !m.want:
		m.stopLocked()
	}
}

func (m *Manager) startLocked() error {
	var args []string
	for _, name := range slices.Sorted(maps.Keys(m.keys)) {
		args = append(args, name+"="+m.keys[name])
	}
	cmd := exec.Command(m.helper, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.helper, err)
	}
	r := bufio.NewReader(stdout)
	ready := make(chan error, 1)
	go func() {
		line, err := r.ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			ready <- fmt.Errorf("%v", err)
			return
		}
		ready <- nil
	}()
	select {
	case err = <-ready:
	case <-time.After(readyTimeout):
		err = errors.New("no answer")
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("grab %s: %v %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	run := &helperRun{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	m.run = run
	go m.watch(run, r, &stderr)
	m.log.Info("global hotkeys registered", "keys", strings.Join(args, " "))
	return nil
}

// watch reads the presses of one helper run until it ends. A run that ends
// without being stopped failed (the X server refused a grab, or died).
func (m *Manager) watch(run *helperRun, r *bufio.Reader, stderr *bytes.Buffer) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "down ")
		if !ok {
			continue
		}
		m.mu.Lock()
		now := time.Now()
		repeat := now.Sub(m.lastPress[name]) < repeatGap
		m.lastPress[name] = now
		m.mu.Unlock()
		if !repeat {
			m.onPress(name)
		}
	}
	run.cmd.Wait()
	close(run.done)
	m.mu.Lock()
	defer m.mu.Unlock()
	if run.stopped {
		return
	}
	if m.run == run {
		m.run = nil
	}
	m.failed = true
	err := fmt.Errorf("the hotkey helper ended: %s", strings.TrimSpace(stderr.String()))
	m.log.Warn("global hotkeys lost", "err", err)
	go m.onFail(err)
}

// stopLocked ends the helper, which releases the keys; m.mu is held.
func (m *Manager) stopLocked() {
	run := m.run
	if run == nil {
		return
	}
	m.run = nil
	run.stopped = true
	run.stdin.Close()
	run.cmd.Process.Kill()
	m.mu.Unlock()
	<-run.done
	m.mu.Lock()
	m.log.Info("global hotkeys released")
}
