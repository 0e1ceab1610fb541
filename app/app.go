package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"codexgate/approvals"
	"codexgate/config"
	"codexgate/config/secrets"
	"codexgate/control"
	"codexgate/supervisor"
)

// stopTimeout bounds a clean stop of every worker at exit.
const stopTimeout = 20 * time.Second

// Options are what the command line gives a run.
type Options struct {
	Config   string // "" for the default path
	Socket   string // "" for the default path
	Headless bool
	// Version is the build's version; Codex the pinned codex binary that
	// workers run unless their config names another.
	Version string
	Codex   string
}

// app is the running Codexgate: the parts wired together. It is the UI's
// Backend.
type app struct {
	opts   Options
	ctx    context.Context
	queue  *approvals.Queue
	sup    *supervisor.Supervisor
	server *control.Server
	log    *slog.Logger
	desk   *desktop // nil when headless
	// failed carries workers that just failed to a notification; nil when
	// headless.
	failed chan supervisor.Status

	mu      sync.Mutex        // protects cfgErr, refused
	cfgErr  string            // why the file on disk is not what runs; "" when it is
	refused map[string]string // worker -> why containment refuses it, as last reported
}

// Run runs Codexgate until a signal, or Quit in the tray.
func Run(opts Options) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	slog.SetDefault(log)

	cfgPath := opts.Config
	var err error
	if cfgPath == "" {
		if cfgPath, err = config.DefaultPath(); err != nil {
			return err
		}
	}
	auditPath, err := approvals.DefaultAuditPath()
	if err != nil {
		return err
	}
	sock := opts.Socket
	if sock == "" {
		if sock, err = control.DefaultPath(); err != nil {
			return err
		}
	}
	guard, err := newGuard(cfgPath, auditPath, sock, opts.Codex)
	if err != nil {
		return err
	}
	firstRun, err := writeFirstConfig(cfgPath, guard, log)
	if err != nil {
		return err
	}
	cfg, err := config.Load(cfgPath, guard)
	if err != nil {
		return err
	}
	audit, err := approvals.OpenAudit(auditPath)
	if err != nil {
		return err
	}
	defer audit.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	a := &app{opts: opts, ctx: ctx, log: log, refused: map[string]string{}}
	a.queue = approvals.NewQueue(approvals.Options{
		Limits:      cardLimits(cfg.Cards),
		SettleDelay: cfg.Cards.SettleDelay.Duration,
		Audit:       audit,
		Log:         log,
		OnChange:    a.onCardChange,
	})
	if !opts.Headless {
		a.desk = newDesktop(ctx, a, cfg, log)
		if firstRun != "" {
			a.desk.notifier.Say("Codexgate: add a project folder", firstRun)
		}
	}
	if err := supervisor.AdoptOrphans(ctx, log); err != nil {
		log.Warn("cannot adopt the orphans of workers", "err", err)
	}
	if a.desk != nil {
		a.failed = make(chan supervisor.Status, 16)
		go a.notifyFailures(ctx)
	}
	a.sup = supervisor.New(ctx, supervisor.Options{Approver: a.queue, Log: log, Version: opts.Version, Secret: secrets.Get, OnStatus: a.onStatus, OnTurnEnded: a.onTurnEnded, OnActivity: a.onActivity})

	a.server, err = control.Listen(sock, a.handle)
	if err != nil {
		return err
	}
	a.server.Excluded = a.sup.PIDs
	a.server.Refused = a.queue.Refused
	a.server.Log = log
	serveDone := make(chan error, 1)
	go func() { serveDone <- a.server.Serve(ctx) }()

	a.reportRefused(cfg)
	if err := a.sup.Apply(ctx, a.specs(cfg)); err != nil {
		log.Error("start workers", "err", err)
	}
	if err := config.Watch(ctx, cfgPath, guard, a.reload, a.configError, log); err != nil {
		log.Warn("config changes will not be seen until a restart", "err", err)
	}
	log.Info("codexgate running", "config", cfgPath, "socket", sock, "audit", auditPath, "workers", len(cfg.Workers))

	if a.desk != nil {
		a.desk.run(ctx, stop) // until Quit, or a signal
	} else {
		<-ctx.Done()
	}
	log.Info("stopping workers")
	stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	err = a.sup.Stop(stopCtx)
	if serr := <-serveDone; serr != nil {
		err = errors.Join(err, serr)
	}
	return err
}

func logLevel() slog.Level {
	if os.Getenv("CODEXGATE_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// writeFirstConfig writes a default config on a first run (no file at
// path): with a worker for the current directory when that can be a
// workspace, or else with an example worker commented out. It returns what
// to tell the person then, or "".
func writeFirstConfig(path string, guard *config.Guard, log *slog.Logger) (string, error) {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find current directory: %w", err)
	}
	problem := guard.Problem(cwd)
	dir := cwd
	if problem != "" {
		dir = ""
	}
	wrote, err := config.WriteDefault(path, dir)
	if err != nil || !wrote {
		return "", err
	}
	if problem == "" {
		log.Info("wrote a default config with one worker for the current directory", "config", path, "cwd", cwd)
		return "", nil
	}
	msg := fmt.Sprintf("No worker was set up for %s, where Codexgate was first started: it %s, and a worker's sandbox can write its whole workspace without asking. "+
		"To add a project folder, edit %s: uncomment the example [[worker]] and set its cwd to the folder; Codexgate starts it when you save.", cwd, problem, path)
	log.Warn(msg)
	return msg, nil
}

// newGuard is what the containment and trust rules protect in this run:
// the home directory and Codexgate's own files, none of which may lie
// under /tmp or $TMPDIR.
func newGuard(cfgPath, auditPath, sock, codex string) (*config.Guard, error) {
	g := &config.Guard{Codex: codex, Native: supervisor.NativeCodex, TempDir: os.Getenv("TMPDIR"), Path: os.Getenv("PATH")}
	if home, err := os.UserHomeDir(); err == nil {
		g.Homes = append(g.Homes, home)
		g.CodexHome = filepath.Join(home, ".codex")
	}
	if dir := os.Getenv("CODEX_HOME"); dir != "" {
		g.CodexHome = dir
	}
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		g.Homes = append(g.Homes, u.HomeDir)
	}
	if len(g.Homes) == 0 {
		return nil, errors.New("cannot find your home directory, which no workspace may hold: set HOME")
	}
	g.Own = []config.Owned{
		{What: "Codexgate's config file", Path: cfgPath},
		{What: "Codexgate's state directory (the audit log)", Path: filepath.Dir(auditPath)},
		{What: "Codexgate's control socket", Path: sock},
		{What: "Codexgate's runtime directory", Path: filepath.Dir(sock)},
	}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		g.Own = append(g.Own, config.Owned{What: "the session's runtime directory", Path: dir})
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the codexgate binary, which no workspace may hold: %w", err)
	}
	// The binaries beside it (the panel) are Codexgate's too.
	g.Own = append(g.Own, config.Owned{What: "the folder of the codexgate binary", Path: filepath.Dir(exe)})
	if real, err := filepath.EvalSymlinks(exe); err == nil && filepath.Dir(real) != filepath.Dir(exe) {
		g.Own = append(g.Own, config.Owned{What: "the folder of the codexgate binary", Path: filepath.Dir(real)})
	}
	if err := g.CheckOwn(); err != nil {
		return nil, err
	}
	return g, nil
}

func cardLimits(c config.Cards) approvals.Limits {
	return approvals.Limits{ShowBytes: c.ShowBytes, MaxBytes: c.MaxBytes, OpenCards: c.MaxOpenCards, OpenBytes: c.MaxOpenBytes}
}

// specs turns the config's workers into what the supervisor runs.
func (a *app) specs(cfg *config.Config) []supervisor.Spec {
	out := make([]supervisor.Spec, len(cfg.Workers))
	for i, w := range cfg.Workers {
		codex := w.Codex
		if codex == "" {
			codex = a.opts.Codex
		}
		out[i] = supervisor.Spec{
			Name: w.Name, Cwd: w.Cwd, Codex: supervisor.NativeCodex(codex), Model: w.Model,
			Args: w.Args, Env: w.Env, Secrets: w.Secrets, Refused: w.Refused,
		}
	}
	return out
}

// reportRefused logs and notifies each worker the containment rule refuses,
// once per reason.
func (a *app) reportRefused(cfg *config.Config) {
	a.mu.Lock()
	var news []config.Worker
	now := map[string]string{}
	for _, w := range cfg.Workers {
		if w.Refused == "" {
			continue
		}
		now[w.Name] = w.Refused
		if a.refused[w.Name] != w.Refused {
			news = append(news, w)
		}
	}
	a.refused = now
	a.mu.Unlock()
	for _, w := range news {
		a.log.Error("worker not started", "worker", w.Name, "reason", w.Refused)
		if a.desk != nil {
			a.desk.notifier.Say("Codexgate: worker "+w.Name+" not started", w.Refused)
		}
	}
}

// refusedFor tells whether st failed because containment refuses its
// worker: reportRefused has said so already, once is enough.
func (a *app) refusedFor(st supervisor.Status) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused[st.Name] != "" && a.refused[st.Name] == st.LastError
}

// handle answers one control-socket request.
func (a *app) handle(ctx context.Context, req control.Request) (any, error) {
	switch req.Op {
	case "workers":
		reply := control.WorkersReply{Workers: a.sup.Statuses(), Stderr: map[string][]string{}, Turns: map[string]control.TurnState{}}
		for _, act := range a.sup.Activity() {
			if ts, ok := control.TurnStateOf(act); ok {
				reply.Turns[act.Worker] = ts
			}
		}
		for _, st := range reply.Workers {
			if lines, err := a.sup.Stderr(st.Name); err == nil && len(lines) > 0 {
				reply.Stderr[st.Name] = lines
			}
		}
		a.mu.Lock()
		reply.ConfigError = a.cfgErr
		a.mu.Unlock()
		return reply, nil
	case "restart":
		return nil, a.Restart(req.Worker)
	case "task":
		return a.StartTask(ctx, req.Worker, req.Prompt)
	case "relogin":
		return a.relogin(ctx)
	case "interrupt":
		w, err := a.sup.Worker(req.Worker)
		if err != nil {
			return nil, err
		}
		return nil, w.Interrupt(ctx, "")
	case "cards":
		return a.queue.Cards(), nil
	case "panel":
		if a.desk == nil {
			return nil, errors.New("codexgate runs headless: there is no panel")
		}
		if err := a.desk.ui.OpenPanel(req.Card); err != nil {
			return nil, err
		}
		return "shown", nil
	case "show":
		return a.show(req.Card)
	case "answer":
		d, err := approvals.ParseDecision(req.Decision)
		if err != nil {
			return nil, err
		}
		return a.queue.Answer(approvals.Answer{Card: req.Card, Decision: d, Revision: req.Revision, By: approvals.ByCLI, Values: req.Values})
	}
	return nil, fmt.Errorf("unknown request %q", req.Op)
}

// show serves a card whole and records, by the command line, that this
// revision was shown in full: the record is made here, where the text is
// served, so no client can claim it without being sent the text.
func (a *app) show(id string) (control.ShowReply, error) {
	if id == "" {
		return control.ShowReply{}, errors.New("name the card: codexgate show CARD")
	}
	text, card, err := a.queue.Full(id)
	if err != nil {
		return control.ShowReply{}, err
	}
	if approvals.RightToLeft(text) {
		// A terminal may lay it out in another order than it runs.
		return control.ShowReply{Card: card, Text: text}, nil
	}
	if err := a.queue.MarkShownInFull(card.ID, card.Revision, approvals.ByCLI); err != nil {
		return control.ShowReply{}, fmt.Errorf("%w; run show again", err)
	}
	if !card.ShownInFull {
		card.ShownInFull, card.ShownBy = true, approvals.ByCLI
	}
	return control.ShowReply{Card: card, Text: text}, nil
}

// reloginWait bounds the restart of the workers after a login; it is less
// than the command line waits for an answer.
const reloginWait = 45 * time.Second

// relogin reads the keyring again and restarts every worker that can run
// (running, waiting to restart, or failed), so that it starts with the key
// now there; paused and refused workers stay as they are. It waits until
// each restarted worker is ready or failed, and reports every worker.
func (a *app) relogin(ctx context.Context) ([]control.ReloginResult, error) {
	a.sup.RereadSecrets()
	statuses := a.sup.Statuses()
	results := make([]control.ReloginResult, len(statuses))
	oldPID := map[string]int{}
	for i, st := range statuses {
		results[i] = control.ReloginResult{Name: st.Name, State: st.State}
		if st.State == supervisor.StatePaused || st.State == supervisor.StateStopped {
			results[i].Error = fmt.Sprintf("%s: it reads the key when it starts", st.State)
			continue
		}
		if err := a.Restart(st.Name); err != nil {
			results[i].Error = err.Error()
			continue
		}
		results[i].Restarted = true
		oldPID[st.Name] = st.PID
	}
	ctx, cancel := context.WithTimeout(ctx, reloginWait)
	defer cancel()
	for {
		// A restart is taken at once, but the worker leaves a failed state
		// only as its run loop starts the process: look after a moment.
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
		settled := true
		for i := range results {
			r := &results[i]
			if !r.Restarted {
				continue
			}
			w, err := a.sup.Worker(r.Name)
			if err != nil {
				r.State, r.Error = supervisor.StateStopped, err.Error()
				continue
			}
			st := w.Status()
			r.State, r.Error = st.State, ""
			switch {
			case st.State == supervisor.StateIdle && st.PID != oldPID[r.Name]:
			case st.State == supervisor.StateFailed:
				r.Error = st.LastError
			default:
				settled = false
				r.Error = "not ready yet"
			}
		}
		if settled || ctx.Err() != nil {
			return results, nil
		}
	}
}

// reload applies a valid new config: workers added, removed or changed,
// new limits for new cards, new hotkeys. Workers left as they were keep
// running untouched.
func (a *app) reload(cfg *config.Config) {
	a.mu.Lock()
	a.cfgErr = ""
	a.mu.Unlock()
	a.queue.SetLimits(cardLimits(cfg.Cards), cfg.Cards.SettleDelay.Duration)
	if a.desk != nil {
		a.desk.reload(cfg)
	}
	a.reportRefused(cfg)
	if err := a.sup.Apply(a.ctx, a.specs(cfg)); errors.Is(err, supervisor.ErrStopped) {
		return // codexgate is quitting
	} else if err != nil {
		a.log.Error("apply config", "err", err)
	}
	a.log.Info("config reloaded", "workers", len(cfg.Workers))
}

// configError reports a config file that cannot be applied; what runs stays.
func (a *app) configError(err error) {
	a.mu.Lock()
	a.cfgErr = err.Error()
	a.mu.Unlock()
	a.log.Error("config not applied; still running on the last good one", "err", err)
	if a.desk != nil {
		a.desk.notifier.Say("Codexgate config not applied", err.Error())
	}
}

// onStatus is told of every worker status change. It must not block: a
// failure is handed to notifyFailures, and dropped if too many are waiting
// (the tray still shows it).
func (a *app) onStatus(st supervisor.Status) {
	if a.desk != nil {
		a.desk.ui.OnStatus(st)
	}
	if st.State == supervisor.StateFailed && a.failed != nil && !a.refusedFor(st) {
		select {
		case a.failed <- st:
		default:
		}
	}
}

// notifyFailures says, in a notification, that a worker failed and why:
// codex's own error line when it gave one.
func (a *app) notifyFailures(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case st := <-a.failed:
			a.desk.notifier.Say("Codexgate: worker "+st.Name+" failed", approvals.OneLine(st.LastError, 200))
		}
	}
}

func (a *app) onCardChange(ch approvals.Change) {
	if a.desk != nil {
		a.desk.ui.OnCardChange(ch)
	}
}

func (a *app) onTurnEnded(te supervisor.TurnEnded) {
	if a.desk != nil {
		a.desk.notifier.TurnEnded(te)
	}
}

func (a *app) onActivity(act supervisor.Activity) {
	if a.desk != nil {
		a.desk.ui.OnActivity(act)
	}
}

// The UI's Backend.

func (a *app) Cards() []approvals.Card { return a.queue.Cards() }

func (a *app) Full(id string) (string, approvals.Card, error) { return a.queue.Full(id) }

func (a *app) MarkShownInFull(id string, revision int, by approvals.By) error {
	return a.queue.MarkShownInFull(id, revision, by)
}

func (a *app) Answer(ans approvals.Answer) (approvals.Answered, error) { return a.queue.Answer(ans) }

func (a *app) Workers() []supervisor.Status { return a.sup.Statuses() }

func (a *app) SettleDelay() time.Duration { return a.queue.SettleDelay() }

func (a *app) Activity() []supervisor.Activity { return a.sup.Activity() }

func (a *app) StartTask(ctx context.Context, worker, prompt string) (string, error) {
	w, err := a.sup.Worker(worker)
	if err != nil {
		return "", err
	}
	return w.StartTurn(ctx, prompt)
}

func (a *app) Pause(worker string) error   { return a.workerOp(worker, (*supervisor.Worker).Pause) }
func (a *app) Resume(worker string) error  { return a.workerOp(worker, (*supervisor.Worker).Resume) }
func (a *app) Restart(worker string) error { return a.workerOp(worker, (*supervisor.Worker).Restart) }

func (a *app) workerOp(worker string, op func(*supervisor.Worker) error) error {
	w, err := a.sup.Worker(worker)
	if err != nil {
		return err
	}
	return op(w)
}
