package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"
)

// Options configure a Supervisor.
type Options struct {
	Approver Approver
	Log      *slog.Logger
	// Version is sent as clientInfo.version.
	Version string
	Backoff Backoff
	// StopGrace is how long a worker's process group has between TERM and KILL.
	StopGrace time.Duration
	// Secret reads a secret from the keyring, for Spec.Secrets.
	Secret func(name string) (string, error)
	// OnStatus is told, outside the worker's lock, that a worker's status
	// changed, with the status after the change. Nothing polls: this is how
	// the tray learns of it. It must not block.
	OnStatus func(Status)
	// OnTurnEnded is told that a turn completed, failed or was interrupted.
	// It runs on the worker's connection reader: it must not block.
	OnTurnEnded func(TurnEnded)
}

// TurnEnded is a turn that ended, as codex reported it.
type TurnEnded struct {
	Worker   string
	ThreadID string
	TurnID   string
	Status   string // completed, interrupted or failed
	// LastMessage is the text of the turn's last agent message, raw as
	// codex sent it; Error is codex's error for a failed turn.
	LastMessage string
	Error       string
}

func (o *Options) published(st Status) {
	if o.OnStatus != nil {
		o.OnStatus(st)
	}
}

// Supervisor runs one Worker per Spec.
type Supervisor struct {
	opts Options
	ctx  context.Context

	mu      sync.Mutex // protects workers
	workers []*Worker  // in configured order
}

// New returns a supervisor whose workers live until ctx ends or Stop.
func New(ctx context.Context, opts Options) *Supervisor {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Backoff == (Backoff{}) {
		opts.Backoff = DefaultBackoff
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 5 * time.Second
	}
	return &Supervisor{opts: opts, ctx: ctx}
}

// Apply makes the running workers match specs: it starts added workers,
// stops removed ones, restarts changed ones and leaves the rest untouched.
// It returns once the stopped workers are gone.
func (s *Supervisor) Apply(ctx context.Context, specs []Spec) error {
	s.mu.Lock()
	var stopping []*Worker
	next := make([]*Worker, 0, len(specs))
	for _, spec := range specs {
		i := slices.IndexFunc(s.workers, func(w *Worker) bool { return w.spec.Name == spec.Name })
		if i >= 0 && reflect.DeepEqual(s.workers[i].spec, spec) {
			next = append(next, s.workers[i])
			continue
		}
		if i >= 0 {
			stopping = append(stopping, s.workers[i])
		}
		w := newWorker(spec, &s.opts)
		next = append(next, w)
	}
	for _, w := range s.workers {
		if !slices.Contains(next, w) && !slices.Contains(stopping, w) {
			stopping = append(stopping, w)
		}
	}
	old := s.workers
	s.workers = next
	s.mu.Unlock()

	err := stopAll(ctx, stopping)
	for _, w := range next {
		if !slices.Contains(old, w) {
			w.start(s.ctx)
		}
	}
	return err
}

// Stop stops every worker and waits for them, at most until ctx is done.
func (s *Supervisor) Stop(ctx context.Context) error {
	s.mu.Lock()
	workers := s.workers
	s.workers = nil
	s.mu.Unlock()
	return stopAll(ctx, workers)
}

func stopAll(ctx context.Context, workers []*Worker) error {
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() { errs[i] = w.stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Worker returns the worker with that name.
func (s *Supervisor) Worker(name string) (*Worker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.workers {
		if w.spec.Name == name {
			return w, nil
		}
	}
	return nil, fmt.Errorf("no worker named %q", name)
}

// Statuses is every worker's status, in configured order.
func (s *Supervisor) Statuses() []Status {
	s.mu.Lock()
	workers := slices.Clone(s.workers)
	s.mu.Unlock()
	out := make([]Status, len(workers))
	for i, w := range workers {
		out[i] = w.Status()
	}
	return out
}

// PIDs are the process ids of the running codex children.
func (s *Supervisor) PIDs() []int {
	var pids []int
	for _, st := range s.Statuses() {
		if st.PID != 0 {
			pids = append(pids, st.PID)
		}
	}
	return pids
}
