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
	// Secret reads a secret from the keyring, for Spec.Secrets and the API
	// key. Each secret is read once per Apply (or RereadSecrets).
	Secret func(name string) (string, error)
	// Clock paces the backoff; nil is the real one.
	Clock Clock
	// WriteTimeout bounds each message to a worker (0: the codexrpc
	// default). A worker that does not take one in time is restarted.
	WriteTimeout time.Duration
	// OnStatus is told, outside the worker's lock, that a worker's status
	// changed, with the status after the change. Nothing polls: this is how
	// the tray learns of it. It must not block.
	OnStatus func(Status)
	// OnTurnEnded is told that a turn completed, failed or was interrupted.
	// It runs on the worker's connection reader: it must not block.
	OnTurnEnded func(TurnEnded)
	// OnActivity is told, outside the worker's lock and in the order of the
	// changes, that a worker's activity history changed, with the history
	// after the change. It must not block.
	OnActivity func(Activity)
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
	opts    Options
	ctx     context.Context
	secrets *secretCache

	applyMu sync.Mutex // serialises Apply and Stop; protects started, stopped
	started []*Worker  // every worker started and not yet known to be done
	stopped bool

	mu      sync.Mutex // protects workers
	workers []*Worker  // published, in configured order
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
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	return &Supervisor{opts: opts, ctx: ctx, secrets: newSecretCache(opts.Secret)}
}

// ErrStopped is returned by Apply after Stop.
var ErrStopped = errors.New("the supervisor has stopped")

// Apply makes the running workers match specs: it starts added workers,
// stops removed ones, restarts changed ones and leaves the rest untouched.
// It reads the keyring again for the workers it starts. It returns once the
// stopped workers are gone; a worker is published (Worker, Statuses) only
// once it runs and Stop can reach it.
func (s *Supervisor) Apply(ctx context.Context, specs []Spec) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.stopped || s.ctx.Err() != nil {
		return ErrStopped
	}
	s.secrets.forget()
	s.mu.Lock()
	current := s.workers
	s.mu.Unlock()
	var kept, stopping []*Worker
	for _, w := range current {
		i := slices.IndexFunc(specs, func(spec Spec) bool { return spec.Name == w.spec.Name })
		if i >= 0 && reflect.DeepEqual(specs[i], w.spec) {
			kept = append(kept, w)
		} else {
			stopping = append(stopping, w)
		}
	}
	s.publish(kept)
	err := stopAll(ctx, stopping)

	s.started = slices.DeleteFunc(s.started, (*Worker).ended)
	next := make([]*Worker, 0, len(specs))
	for _, spec := range specs {
		i := slices.IndexFunc(kept, func(w *Worker) bool { return w.spec.Name == spec.Name })
		if i >= 0 {
			next = append(next, kept[i])
			continue
		}
		w := newWorker(spec, &s.opts, s.secrets)
		w.start(s.ctx)
		s.started = append(s.started, w)
		next = append(next, w)
	}
	s.publish(next)
	return err
}

func (s *Supervisor) publish(workers []*Worker) {
	s.mu.Lock()
	s.workers = workers
	s.mu.Unlock()
}

// Stop stops every worker and waits for them, at most until ctx is done.
// Nothing starts after it: a later Apply fails with ErrStopped.
func (s *Supervisor) Stop(ctx context.Context) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.stopped = true
	s.publish(nil)
	started := s.started
	s.started = nil
	return stopAll(ctx, started)
}

// RereadSecrets makes the next start of each worker read the keyring again,
// as after a login.
func (s *Supervisor) RereadSecrets() { s.secrets.forget() }

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
func (s *Supervisor) Statuses() []Status { return eachWorker(s, (*Worker).Status) }

// Activity is every worker's activity history, in configured order.
func (s *Supervisor) Activity() []Activity { return eachWorker(s, (*Worker).Activity) }

// eachWorker is f of every worker, in configured order; the list is read
// under the lock, the workers outside it.
func eachWorker[T any](s *Supervisor, f func(*Worker) T) []T {
	s.mu.Lock()
	workers := slices.Clone(s.workers)
	s.mu.Unlock()
	out := make([]T, len(workers))
	for i, w := range workers {
		out[i] = f(w)
	}
	return out
}

// Stderr is the last lines the named worker's codex wrote to stderr.
func (s *Supervisor) Stderr(name string) ([]string, error) {
	w, err := s.Worker(name)
	if err != nil {
		return nil, err
	}
	return w.Stderr(), nil
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
