package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock never sleeps: each wait ends at once, and is recorded.
type fakeClock struct {
	mu    sync.Mutex // protects waits
	waits []time.Duration
}

func (c *fakeClock) Now() time.Time { return time.Unix(0, 0) }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Unix(0, 0)
	return ch
}

func (c *fakeClock) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waits)
}

// failingCodex is a codex that reports an error the way codex does, with
// more lines after it, and exits 1; each start leaves a line in starts.
func failingCodex(t *testing.T) (codex, starts string) {
	dir := t.TempDir()
	codex, starts = filepath.Join(dir, "codex"), filepath.Join(dir, "starts")
	script := "#!/bin/sh\necho started >>" + starts + "\necho \"RUST_BACKTRACE=$RUST_BACKTRACE\" >&2\n" +
		"echo 'WARNING: proceeding' >&2\necho 'Error: CODEX_HOME points to \"/nowhere\", but that path does not exist' >&2\necho '   6: <unknown>' >&2\nexit 1\n"
	if err := os.WriteFile(codex, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return codex, starts
}

func startCount(t *testing.T, starts string) int {
	raw, err := os.ReadFile(starts)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(raw), "started")
}

func TestAFailedWorkerShowsCodexsErrorAndWaitsForRestart(t *testing.T) {
	noLeak(t)
	codex, starts := failingCodex(t)
	clock := &fakeClock{}
	var mu sync.Mutex
	var pushed []Status
	s := New(context.Background(), Options{
		Approver: newRecorder(), Log: testLog(t), Clock: clock,
		Backoff:  Backoff{Min: time.Second, Max: time.Minute, MaxFailures: 3, StableAfter: time.Hour},
		OnStatus: func(st Status) { mu.Lock(); pushed = append(pushed, st); mu.Unlock() },
	})
	defer s.Stop(context.Background())
	if err := s.Apply(context.Background(), []Spec{{Name: "w", Cwd: t.TempDir(), Codex: codex}}); err != nil {
		t.Fatal(err)
	}
	w, _ := s.Worker("w")
	st := waitState(t, w, StateFailed)
	want := `Error: CODEX_HOME points to "/nowhere", but that path does not exist; codex exited (exit status 1); gave up after 3 failed starts in a row`
	if st.LastError != want || st.PID != 0 {
		t.Errorf("failed worker: %+v\nwant last error %q", st, want)
	}
	if n := clock.count(); n != 2 {
		t.Errorf("%d backoff waits, want 2", n)
	}
	if lines := w.Stderr(); !slices.Contains(lines, "RUST_BACKTRACE=0") || lines[len(lines)-1] != "   6: <unknown>" {
		t.Errorf("stderr = %q", lines)
	}
	// Calls on a worker that is not ready are errors.
	if _, err := w.StartTurn(context.Background(), "x"); err == nil {
		t.Error("a failed worker took a task")
	}
	if err := w.Interrupt(context.Background(), ""); err == nil {
		t.Error("a failed worker took an interrupt")
	}
	if err := w.Pause(); err == nil {
		t.Error("a failed worker paused")
	}
	if err := w.Resume(); err == nil {
		t.Error("a failed worker resumed")
	}
	// It waits: no start until Restart.
	if n := startCount(t, starts); n != 3 {
		t.Errorf("%d starts, want 3", n)
	}
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	for startCount(t, starts) < 6 {
		time.Sleep(10 * time.Millisecond)
	}
	waitState(t, w, StateFailed)
	mu.Lock()
	defer mu.Unlock()
	var states []State
	for _, st := range pushed {
		if len(states) == 0 || states[len(states)-1] != st.State {
			states = append(states, st.State)
		}
		if st.State == StateFailed && st.PID != 0 {
			t.Errorf("pushed a failed worker with a PID: %+v", st)
		}
	}
	if !slices.Contains(states, StateRestarting) || states[0] != StateStarting {
		t.Errorf("pushed states %v", states)
	}
}

func TestARefusedWorkerNeverStarts(t *testing.T) {
	noLeak(t)
	codex, starts := failingCodex(t)
	s := New(context.Background(), Options{Approver: newRecorder(), Log: testLog(t)})
	defer s.Stop(context.Background())
	const why = "its workspace contains codexgate's config"
	if err := s.Apply(context.Background(), []Spec{{Name: "w", Cwd: t.TempDir(), Codex: codex, Refused: why}}); err != nil {
		t.Fatal(err)
	}
	w, _ := s.Worker("w")
	if st := waitState(t, w, StateFailed); st.LastError != why || st.PID != 0 {
		t.Errorf("refused worker: %+v", st)
	}
	if err := w.Restart(); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("restart of a refused worker: %v", err)
	}
	if _, err := w.StartTurn(context.Background(), "x"); err == nil {
		t.Error("a refused worker took a task")
	}
	if n := startCount(t, starts); n != 0 {
		t.Errorf("a refused worker started %d times", n)
	}
}

func TestSecretsAreReadOncePerApply(t *testing.T) {
	noLeak(t)
	dir := t.TempDir()
	var mu sync.Mutex
	reads := map[string]int{}
	s := New(context.Background(), Options{Approver: newRecorder(), Log: testLog(t), StopGrace: 500 * time.Millisecond,
		Secret: func(name string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			reads[name]++
			if name == APIKeySecret {
				return "", errors.New("no such secret") // the fake does not log in
			}
			return "value-of-" + name, nil
		}})
	defer s.Stop(context.Background())
	spec := Spec{Name: "w", Cwd: dir, Codex: os.Args[0], Env: map[string]string{"CODEXGATE_FAKE_CODEX": dir}, Secrets: map[string]string{"PROVIDER_KEY": "provider"}}
	if err := s.Apply(context.Background(), []Spec{spec}); err != nil {
		t.Fatal(err)
	}
	w, _ := s.Worker("w")
	restart := func() {
		t.Helper()
		pid := waitState(t, w, StateIdle).PID
		if err := w.Restart(); err != nil {
			t.Fatal(err)
		}
		for st := waitState(t, w, StateIdle); st.PID == pid; st = waitState(t, w, StateIdle) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	restart()
	restart()
	check := func(want int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if reads["provider"] != want || reads[APIKeySecret] != want {
			t.Errorf("keyring reads %v, want %d of each", reads, want)
		}
	}
	check(1)
	s.RereadSecrets()
	restart()
	check(2)
}
