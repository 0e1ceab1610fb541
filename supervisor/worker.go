package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"codexgate/approvals"
	"codexgate/supervisor/codexrpc"
)

// State is where a worker is in its life. It is printed as is.
type State string

const (
	StateStopped    State = "stopped"
	StateStarting   State = "starting"
	StateIdle       State = "idle"
	StateWorking    State = "working"
	StateWaiting    State = "waiting"
	StateRestarting State = "restarting"
	StateFailed     State = "failed"
	StateStopping   State = "stopping"
	StatePaused     State = "paused"
)

// Spec is what a worker runs: one codex app-server for one workspace.
type Spec struct {
	Name  string
	Cwd   string
	Codex string // path of the codex binary
	Model string
	Args  []string // after "app-server"
	Env   map[string]string
	// Secrets are environment variables whose values are read from the
	// keyring secret named (Options.Secret), once per Apply. Codex's shell
	// policy keeps them from the commands the agent runs.
	Secrets map[string]string
	// Refused, when set, is why this worker must not run (for example, its
	// workspace holds Codexgate's own files): it never starts, and shows
	// state failed with this as its last error.
	Refused string
}

// Status is a worker as the command line and the tray show it. It stays
// comparable with ==: the tray compares snapshots.
type Status struct {
	Name      string `json:"name"`
	Cwd       string `json:"cwd"`
	State     State  `json:"state"`
	ThreadID  string `json:"threadId"`
	TurnID    string `json:"turnId,omitempty"`
	PID       int    `json:"pid,omitempty"`
	LastError string `json:"lastError,omitempty"`
}

// Approver receives every approval request of every worker, and the events
// that update or close them. Both are called from a worker's read loop and
// must not block on a person.
type Approver interface {
	Open(approvals.Request)
	Event(approvals.Event)
}

// Backoff paces restarts after crashes.
type Backoff struct {
	Min, Max time.Duration
	// MaxFailures consecutive failed starts (runs that never got ready)
	// mark a worker failed. A worker that got ready and then crashed is
	// restarted, however often, after a growing delay.
	MaxFailures int
	// StableAfter is how long a run must last to reset the failure count.
	StableAfter time.Duration
}

// Clock is the time the backoff waits on; tests give one that does not sleep.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// DefaultBackoff is used where Options leaves Backoff zero.
var DefaultBackoff = Backoff{Min: time.Second, Max: 30 * time.Second, MaxFailures: 5, StableAfter: time.Minute}

// delay is the wait before restart attempt n (1-based): exponential, capped,
// with jitter so that workers that crashed together do not restart together.
func (b Backoff) delay(n int) time.Duration {
	d := b.Min << min(n-1, 20)
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	return d/2 + rand.N(d/2+1)
}

const (
	handshakeTimeout = 60 * time.Second
	// resumeRetries covers a previous process that still holds the thread's
	// writer lock for a moment after its group was killed.
	resumeRetries = 10
	resumeRetry   = 500 * time.Millisecond
)

// sessions numbers connections across all workers, so that a request is
// never mistaken for one of an earlier process of the same worker name.
var sessions atomic.Uint64

// Worker supervises one codex app-server. Its run loop owns the process and
// the state machine; every change of state goes through transition, and mu
// guards what other goroutines read.
type Worker struct {
	spec    Spec
	opts    *Options
	secrets *secretCache
	log     *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
	ctl    chan string // pause, resume, restart: read by the run loop

	mu      sync.Mutex // protects status, conn, session, items, logged, stderr, hist
	status  Status
	conn    *codexrpc.Conn         // set in exactly the ready states, and while starting and stopping
	session uint64                 // conn's number, from the global count
	items   map[string]trackedItem // started items of this session by id, for cards
	logged  map[string]bool        // notification methods already logged as unknown
	stderr  []string               // codex's last stderr lines, across its processes
	hist    history                // the last turns, across its processes

	pubMu sync.Mutex // keeps Options.OnStatus and OnActivity calls in the order of the changes
}

type trackedItem struct {
	turnID string
	raw    json.RawMessage // nil while the id is shared
	// inFlight counts the started items with this id that have not
	// completed. Item ids are the model's call ids: parallel calls can share
	// one, and a request naming it cannot be told which item is its own.
	inFlight int
}

func newWorker(spec Spec, opts *Options, secrets *secretCache) *Worker {
	return &Worker{
		spec:    spec,
		opts:    opts,
		secrets: secrets,
		log:     opts.Log.With("worker", spec.Name),
		done:    make(chan struct{}),
		ctl:     make(chan string),
		status:  Status{Name: spec.Name, Cwd: spec.Cwd, State: StateStopped},
		logged:  make(map[string]bool),
		hist:    history{Activity: Activity{Worker: spec.Name}},
	}
}

// Activity is what the worker has been doing: its last turns.
func (w *Worker) Activity() Activity {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hist.snapshot()
}

// record changes the history for session, as update changes the status,
// and reports the change (Options.OnActivity) when f reports one.
func (w *Worker) record(session uint64, f func(*history) bool) {
	w.mu.Lock()
	if session != w.session || !f(&w.hist) {
		w.mu.Unlock()
		return
	}
	w.activityChanged()
}

// activityChanged reports the history to Options.OnActivity, outside w.mu
// but in the order of the changes. It is called with w.mu held, and
// releases it.
func (w *Worker) activityChanged() {
	w.hist.Seq++
	a := w.hist.snapshot()
	w.pubMu.Lock()
	w.mu.Unlock()
	defer w.pubMu.Unlock()
	if w.opts.OnActivity != nil {
		w.opts.OnActivity(a)
	}
}

// Status is a snapshot of the worker.
func (w *Worker) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Stderr is the last lines codex wrote to its stderr, oldest first.
func (w *Worker) Stderr() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.stderr)
}

func (w *Worker) addStderr(line string) {
	w.mu.Lock()
	w.stderr = append(w.stderr, line)
	if len(w.stderr) > stderrLines {
		w.stderr = slices.Delete(w.stderr, 0, len(w.stderr)-stderrLines)
	}
	w.mu.Unlock()
}

// running is one process of the worker and its connection.
type running struct {
	proc    *process
	conn    *codexrpc.Conn
	session uint64
}

// transition is the one place the state changes: the state, the process
// (its PID), the connection and the last error move together, so nobody
// sees a ready worker without a connection, or a PID that is not running.
// A nil lastErr keeps the last error.
func (w *Worker) transition(s State, r running, lastErr error) {
	w.mu.Lock()
	old := w.status
	w.status.State = s
	w.status.PID = 0
	if r.proc != nil {
		w.status.PID = r.proc.pid()
	}
	if r.session != w.session {
		w.items = make(map[string]trackedItem)
	}
	w.conn, w.session = r.conn, r.session
	lost := false
	if r.conn == nil {
		w.status.TurnID = ""
		clear(w.items)
		lost = w.hist.lost()
	}
	if lastErr != nil {
		w.status.LastError = lastErr.Error()
	}
	w.changed(old)
	if lost {
		w.mu.Lock()
		w.activityChanged()
	}
}

// update changes the status fields a running connection reports (turn,
// thread, busy or idle, last error) for session; a late message of an
// earlier connection changes nothing. It reports the change (Options.OnStatus).
func (w *Worker) update(session uint64, f func(*Status)) {
	w.mu.Lock()
	if session != w.session {
		w.mu.Unlock()
		return
	}
	old := w.status
	f(&w.status)
	w.changed(old)
}

// changed reports the status, if it differs from old, to Options.OnStatus
// outside w.mu but in the order of the changes. It is called with w.mu
// held, and releases it.
func (w *Worker) changed(old Status) {
	st := w.status
	w.pubMu.Lock()
	w.mu.Unlock()
	defer w.pubMu.Unlock()
	if st != old {
		w.opts.published(st)
	}
}

func (w *Worker) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	w.cancel = cancel
	go w.run(ctx)
}

// stop ends the worker: open requests are denied, then its process group
// ends. It waits until the worker is stopped or ctx is done.
func (w *Worker) stop(ctx context.Context) error {
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop worker %q: %w", w.spec.Name, ctx.Err())
	}
}

func (w *Worker) run(ctx context.Context) {
	defer close(w.done)
	defer w.transition(StateStopped, running{}, nil)
	if w.spec.Refused != "" {
		w.log.Error("worker refused", "reason", w.spec.Refused)
		w.transition(StateFailed, running{}, errors.New(w.spec.Refused))
		<-ctx.Done()
		return
	}
	b, clock := w.opts.Backoff, w.opts.Clock
	failures, failedStarts := 0, 0 // consecutive runs that ended unasked; of them, those that never got ready
	for {
		started := clock.Now()
		ready, err := w.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		var ctl *controlled
		if errors.As(err, &ctl) {
			failures, failedStarts = 0, 0
			if ctl.op == ctlPause && !w.hold(ctx, StatePaused, nil) {
				return
			}
			continue
		}
		var startErr *startError
		if !errors.As(err, &startErr) {
			if clock.Now().Sub(started) >= b.StableAfter {
				failures = 0
			}
			failures++
			failedStarts++
			if ready { // it started: a crash is not a failed start
				failedStarts = 0
			}
		}
		if startErr != nil || failedStarts >= b.MaxFailures {
			if startErr == nil {
				err = fmt.Errorf("%w; gave up after %d failed starts in a row", err, failedStarts)
			}
			w.log.Error("worker failed; it waits for a restart", "err", err)
			if !w.hold(ctx, StateFailed, err) {
				return
			}
			failures, failedStarts = 0, 0
			continue
		}
		delay := b.delay(failures)
		w.log.Warn("worker exited; restarting", "err", err, "in", delay)
		w.transition(StateRestarting, running{}, err)
		select {
		case <-clock.After(delay):
		case op := <-w.ctl:
			if op == ctlPause && !w.hold(ctx, StatePaused, nil) {
				return
			}
			failures, failedStarts = 0, 0
		case <-ctx.Done():
			return
		}
	}
}

// Operations a person can ask of a worker.
const (
	ctlPause   = "pause"
	ctlResume  = "resume"
	ctlRestart = "restart"
)

// controlled is a run that ended because a person paused or restarted it.
type controlled struct{ op string }

func (c *controlled) Error() string { return c.op }

// hold keeps the worker in state s (paused or failed), with no process,
// until a person resumes or restarts it. It reports false when ctx ended
// first.
func (w *Worker) hold(ctx context.Context, s State, why error) bool {
	w.transition(s, running{}, why)
	for {
		select {
		case <-ctx.Done():
			return false
		case op := <-w.ctl:
			if op != ctlPause {
				return true
			}
		}
	}
}

// controlWait bounds how long an operation waits for the run loop, which
// takes it at once unless it is in the middle of starting or reaping a
// process.
const controlWait = 5 * time.Second

// control hands op to the run loop.
func (w *Worker) control(op string) error {
	if w.spec.Refused != "" {
		return fmt.Errorf("worker %q does not start: %s", w.spec.Name, w.spec.Refused)
	}
	st := w.Status().State
	switch {
	case op == ctlResume && st != StatePaused:
		return fmt.Errorf("worker %q is %s, not paused", w.spec.Name, st)
	case op == ctlPause && (st == StatePaused || st == StateFailed):
		return fmt.Errorf("worker %q is already %s", w.spec.Name, st)
	}
	select {
	case w.ctl <- op:
		return nil
	case <-w.done:
		return fmt.Errorf("worker %q is %s", w.spec.Name, w.Status().State)
	case <-time.After(controlWait):
		return fmt.Errorf("worker %q is %s; try again", w.spec.Name, w.Status().State)
	}
}

// Pause stops the worker's process (its open requests are denied first) and
// keeps its thread for Resume.
func (w *Worker) Pause() error { return w.control(ctlPause) }

// Resume starts a paused worker again on its thread.
func (w *Worker) Resume() error { return w.control(ctlResume) }

// Restart stops the worker's process, if any, and starts it again on its
// thread: it also starts a failed worker, or one waiting out its backoff.
func (w *Worker) Restart() error { return w.control(ctlRestart) }

// startError is a codex that cannot be started at all: restarting would not help.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// runOnce runs one codex process from spawn to exit. It reports whether
// the process got ready, and why it ended: nil when ctx ended it.
func (w *Worker) runOnce(ctx context.Context) (ready bool, err error) {
	w.transition(StateStarting, running{}, nil)
	if w.spec.Codex == "" {
		return false, &startError{fmt.Errorf("start worker %q: no codex binary: set codex in the config, or build with make, which installs the pinned one", w.spec.Name)}
	}
	args, env, err := w.command()
	if err != nil {
		return false, &startError{fmt.Errorf("start worker %q: %w", w.spec.Name, err)}
	}
	apiKey := w.apiKey()
	if apiKey != "" {
		// The key reaches codex only through the protocol, and codex keeps
		// it in memory: its keyring store would need the session bus,
		// which workers do not get, and its file store is plaintext.
		args = append(args, "-c", `cli_auth_credentials_store="ephemeral"`)
	}
	proc, err := startProcess(w.spec.Codex, args, w.spec.Cwd, childEnv(os.Environ(), env), w.addStderr, w.log)
	if err != nil {
		return false, &startError{fmt.Errorf("start worker %q: %w", w.spec.Name, err)}
	}
	r := running{proc: proc, session: sessions.Add(1)}
	r.conn = codexrpc.New(proc.stdout, proc.stdin, &connHandler{w: w, session: r.session}, w.log)
	r.conn.WriteTimeout = w.opts.WriteTimeout
	w.transition(StateStarting, r, nil)
	go r.conn.Run()
	defer w.opts.Approver.Event(approvals.Event{Kind: approvals.WorkerExited, Worker: w.spec.Name, Session: r.session})

	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	handshakeDone := make(chan error, 1)
	go func() { handshakeDone <- w.handshake(hctx, r, apiKey) }()
	var op string
	shaken := false
	select {
	case err = <-handshakeDone:
		shaken = true
	case <-proc.exited:
		err = codexrpc.ErrClosed
	case op = <-w.ctl:
	}
	if err != nil || op != "" {
		cancel()
		proc.reap()
		<-r.conn.Done()
		if !shaken {
			<-handshakeDone
		}
		switch {
		case ctx.Err() != nil:
			return false, nil
		case op != "":
			return false, &controlled{op}
		}
		return false, w.failure(err, r)
	}
	w.update(r.session, func(st *Status) {
		if st.State == StateStarting {
			st.State = StateIdle
		}
	})
	w.log.Info("worker ready", "pid", proc.pid(), "thread", w.Status().ThreadID)

	select {
	case <-ctx.Done():
		w.shutdown(r)
		return true, nil
	case op := <-w.ctl:
		w.log.Info("worker "+op, "pid", proc.pid())
		w.shutdown(r)
		return true, &controlled{op}
	case <-proc.exited:
	case <-r.conn.Done():
	}
	proc.reap()
	<-r.conn.Done()
	return true, w.failure(codexrpc.ErrClosed, r)
}

// failure is why a run ended without being asked to, in one wording per
// cause: codex's own error line when it exited, the connection's error when
// codex stopped reading, and what the handshake got otherwise. The process
// has been reaped.
func (w *Worker) failure(err error, r running) error {
	if cerr := r.conn.Err(); errors.Is(cerr, codexrpc.ErrWriteTimeout) {
		return fmt.Errorf("codex stopped reading its input (nothing taken in %v); its cards were closed", w.writeTimeout())
	}
	// Whether codex's exit is seen as a closed connection or as a broken
	// pipe on the next write is a race: both are its exit.
	if errors.Is(err, codexrpc.ErrClosed) || errors.Is(err, syscall.EPIPE) {
		return r.proc.exitError()
	}
	if last := r.proc.message(); last != "" {
		return fmt.Errorf("handshake: %w (codex: %s)", err, last)
	}
	return fmt.Errorf("handshake: %w", err)
}

func (w *Worker) writeTimeout() time.Duration {
	if w.opts.WriteTimeout > 0 {
		return w.opts.WriteTimeout
	}
	return codexrpc.DefaultWriteTimeout
}

// command is the worker's arguments and extra environment, with its
// secrets from the keyring.
func (w *Worker) command() ([]string, map[string]string, error) {
	args := append([]string{"app-server"}, w.spec.Args...)
	env := maps.Clone(w.spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	// Without a backtrace, codex's last stderr line is its own "Error:"
	// line, which is what the worker's status shows.
	if _, set := env["RUST_BACKTRACE"]; !set {
		env["RUST_BACKTRACE"] = "0"
	}
	if len(w.spec.Secrets) == 0 {
		return args, env, nil
	}
	names := slices.Sorted(maps.Keys(w.spec.Secrets))
	for _, name := range names {
		value, err := w.secrets.get(w.spec.Secrets[name])
		if err != nil {
			return nil, nil, fmt.Errorf("secret %q for %s: %w", w.spec.Secrets[name], name, err)
		}
		env[name] = value
	}
	// Codex passes its own environment to the commands the agent runs,
	// unless its shell policy excludes a variable.
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	args = append(args, "-c", "shell_environment_policy.exclude=["+strings.Join(quoted, ",")+"]")
	return args, env, nil
}

// shutdown is a stop on purpose: every open request is denied before the
// process group ends.
func (w *Worker) shutdown(r running) {
	w.transition(StateStopping, r, nil)
	w.opts.Approver.Event(approvals.Event{Kind: approvals.WorkerStopping, Worker: w.spec.Name, Session: r.session})
	for _, req := range r.conn.Open() {
		if err := req.ReplyError(codexrpc.CodeDenied, "codexgate is stopping this worker"); err != nil {
			w.log.Warn("deny open request on stop", "method", req.Method, "err", err)
		}
	}
	r.proc.stop(w.opts.StopGrace)
	<-r.conn.Done()
}

// APIKeySecret is the keyring secret that holds the OpenAI API key.
const APIKeySecret = "openai-api-key"

// apiKey is the OpenAI API key from the keyring, or "" when there is none
// (codex then uses its own login, such as `codex login`).
func (w *Worker) apiKey() string {
	key, err := w.secrets.get(APIKeySecret)
	if err != nil {
		w.log.Debug("no API key from the keyring; codex uses its own login", "err", err)
		return ""
	}
	return key
}

// login gives codex the API key when it reports no account.
func (w *Worker) login(ctx context.Context, conn *codexrpc.Conn, apiKey string) error {
	var acct codexrpc.AccountReadResult
	if err := conn.Call(ctx, codexrpc.MethodAccountRead, codexrpc.AccountReadParams{}, &acct); err != nil {
		return err
	}
	if acct.Account != nil {
		return nil
	}
	if err := conn.Call(ctx, codexrpc.MethodLoginStart, codexrpc.LoginStartParams{Type: "apiKey", APIKey: apiKey}, nil); err != nil {
		return fmt.Errorf("log in with the API key from the keyring: %w", err)
	}
	w.log.Info("logged in with the API key from the keyring")
	return nil
}

func (w *Worker) handshake(ctx context.Context, r running, apiKey string) error {
	conn := r.conn
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	err := conn.Call(ctx, codexrpc.MethodInitialize, codexrpc.InitializeParams{
		ClientInfo: codexrpc.ClientInfo{Name: "codexgate", Title: "Codexgate", Version: w.opts.Version},
		Capabilities: codexrpc.Capabilities{
			ExperimentalAPI:           true,
			OptOutNotificationMethods: codexrpc.NoisyNotifications,
		},
	}, nil)
	if err != nil {
		return err
	}
	if err := conn.Notify(codexrpc.MethodInitialized, nil); err != nil {
		return err
	}
	if apiKey != "" {
		if err := w.login(ctx, conn, apiKey); err != nil {
			return err
		}
	}
	policy := codexrpc.ThreadStartParams{
		Cwd:            w.spec.Cwd,
		Model:          w.spec.Model,
		Sandbox:        codexrpc.SandboxWorkspaceWrite,
		ApprovalPolicy: codexrpc.ApprovalOnRequest,
	}
	threadID := w.Status().ThreadID
	var res codexrpc.ThreadResult
	if threadID != "" {
		err = w.resume(ctx, conn, threadID, policy, &res)
		if err == nil {
			w.log.Info("resumed thread", "thread", threadID)
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		w.log.Warn("could not resume thread; starting a new one", "thread", threadID, "err", err)
		w.update(r.session, func(st *Status) { st.LastError = fmt.Sprintf("could not resume thread %s: %v", threadID, err) })
	}
	if err := conn.Call(ctx, codexrpc.MethodThreadStart, policy, &res); err != nil {
		return err
	}
	w.update(r.session, func(st *Status) { st.ThreadID = res.Thread.ID })
	return nil
}

func (w *Worker) resume(ctx context.Context, conn *codexrpc.Conn, threadID string, policy codexrpc.ThreadStartParams, res *codexrpc.ThreadResult) error {
	params := codexrpc.ThreadResumeParams{ThreadID: threadID, ThreadStartParams: policy, ExcludeTurns: true}
	for attempt := 1; ; attempt++ {
		err := conn.Call(ctx, codexrpc.MethodThreadResume, params, res)
		if err == nil || attempt == resumeRetries || !strings.Contains(err.Error(), "active writer") {
			return err
		}
		select {
		case <-time.After(resumeRetry):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ready returns the connection and thread a turn can start on, and the
// connection's session.
func (w *Worker) ready() (*codexrpc.Conn, string, uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch w.status.State {
	case StateIdle, StateWorking, StateWaiting:
		if w.conn != nil {
			return w.conn, w.status.ThreadID, w.session, nil
		}
	}
	return nil, "", 0, fmt.Errorf("worker %q is %s", w.spec.Name, w.status.State)
}

// StartTurn gives the worker a task and returns the id of the new turn.
func (w *Worker) StartTurn(ctx context.Context, prompt string) (string, error) {
	conn, threadID, session, err := w.ready()
	if err != nil {
		return "", err
	}
	var res codexrpc.TurnResult
	err = conn.Call(ctx, codexrpc.MethodTurnStart, codexrpc.TurnStartParams{ThreadID: threadID, Input: codexrpc.TextInput(prompt)}, &res)
	if err != nil {
		return "", fmt.Errorf("start turn on %q: %w", w.spec.Name, err)
	}
	w.update(session, func(st *Status) { st.TurnID = res.Turn.ID })
	w.record(session, func(h *history) bool { h.prompt(res.Turn.ID, prompt); return true })
	return res.Turn.ID, nil
}

// Interrupt stops a turn; an empty turnID means the running one.
func (w *Worker) Interrupt(ctx context.Context, turnID string) error {
	conn, threadID, _, err := w.ready()
	if err != nil {
		return err
	}
	if turnID == "" {
		turnID = w.Status().TurnID
	}
	if turnID == "" {
		return fmt.Errorf("worker %q has no running turn", w.spec.Name)
	}
	err = conn.Call(ctx, codexrpc.MethodTurnInterrupt, codexrpc.TurnInterruptParams{ThreadID: threadID, TurnID: turnID}, nil)
	if err != nil {
		return fmt.Errorf("interrupt turn on %q: %w", w.spec.Name, err)
	}
	return nil
}

// ended reports whether the worker's run loop has returned.
func (w *Worker) ended() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}
