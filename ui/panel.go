package ui

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"codexgate/approvals"
	"codexgate/ui/panel/wire"
)

const (
	// panelStart bounds the wait for the panel's first frame.
	panelStart = 15 * time.Second
	// panelWrite bounds one message to the panel; a panel that does not
	// read is ended.
	panelWrite = 5 * time.Second
	// panelGrace is how long a closing panel may take before it is killed.
	panelGrace = 3 * time.Second
	// panelName is the panel's binary, installed beside codexgate.
	panelName = "codexgate-panel"
)

// panelPath is the panel binary beside the running one.
func panelPath() string {
	exe, err := os.Executable()
	if err != nil {
		return panelName
	}
	return filepath.Join(filepath.Dir(exe), panelName)
}

// panelHost starts the panel process on demand and is its other end: it
// pushes every new snapshot and serves the panel's requests, each checked
// as if it came from a stranger.
type panelHost struct {
	u    *UI
	path string

	startMu sync.Mutex // one open at a time

	mu     sync.Mutex // protects run, failed
	run    *panelRun  // nil when no panel runs
	failed string     // why the last start failed; "" after a good one
}

// panelRun is one panel process.
type panelRun struct {
	cmd    *exec.Cmd
	conn   net.Conn
	w      *wire.Writer
	ready  chan struct{} // closed at the first frame
	exited chan struct{} // closed once the process is waited for
	stderr *tail

	readyOnce sync.Once
	requests  sync.WaitGroup // requests being served

	mu     sync.Mutex          // protects pushed, full
	pushed map[string]shownRev // the revision of each card sent, and when
	full   map[string]int      // the revision whose whole text was sent, by card
}

type shownRev struct {
	revision int
	at       time.Time
	whole    bool // the card was not truncated: its whole text was sent
}

func (h *panelHost) failure() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

// open starts the panel, or brings it to the front, and shows s there.
func (h *panelHost) open(s wire.Show) error {
	h.startMu.Lock()
	defer h.startMu.Unlock()
	h.mu.Lock()
	r := h.run
	h.mu.Unlock()
	if r != nil {
		return r.send(wire.Update{Show: &s})
	}
	began := time.Now()
	r, err := h.start()
	if err == nil {
		select {
		case <-r.ready:
		case <-r.exited:
			err = fmt.Errorf("the panel exited: %s", r.stderr.last())
		case <-time.After(panelStart):
			err = fmt.Errorf("the panel did not show its window within %v", panelStart)
			r.stop()
		}
	}
	if err != nil {
		h.mu.Lock()
		h.failed = err.Error()
		h.mu.Unlock()
		h.u.opts.Log.Warn("the panel cannot open", "err", err)
		h.u.say("The Codexgate panel cannot open", err.Error()+"\nCards can still be answered with the hotkeys and `codexgate answer`.")
		h.u.Changed()
		return err
	}
	h.mu.Lock()
	wasFailed := h.failed != ""
	h.failed = ""
	h.mu.Unlock()
	if wasFailed {
		h.u.Changed()
	}
	h.u.opts.Log.Info("panel shown", "pid", r.cmd.Process.Pid, "first_frame_ms", time.Since(began).Milliseconds())
	return r.send(wire.Update{Show: &s})
}

// start runs the panel with its end of a new socketpair as fd 3 and sends
// it the current state.
func (h *panelHost) start() (*panelRun, error) {
	if _, err := os.Stat(h.path); err != nil {
		return nil, fmt.Errorf("the panel program is missing (%s): install %s beside codexgate", h.path, panelName)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("create the panel's channel: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "panel"), os.NewFile(uintptr(fds[1]), "panel")
	defer theirs.Close()
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, fmt.Errorf("open the panel's channel: %w", err)
	}
	r := &panelRun{
		conn: conn, w: wire.NewWriter(conn),
		ready: make(chan struct{}), exited: make(chan struct{}), stderr: &tail{},
		pushed: map[string]shownRev{}, full: map[string]int{},
	}
	// The panel stays in codexgate's process group: the orphan reaper
	// leaves that group's children to their owners.
	r.cmd = exec.Command(h.path)
	r.cmd.ExtraFiles = []*os.File{theirs} // fd 3 = wire.FD
	r.cmd.Stderr = io.MultiWriter(os.Stderr, r.stderr)
	if err := r.cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("start the panel %s: %w", h.path, err)
	}
	go func() {
		r.cmd.Wait()
		close(r.exited)
	}()
	h.mu.Lock()
	h.run = r
	h.mu.Unlock()
	go h.serve(r)
	r.push(h.u.snapshot())
	return r, nil
}

// push sends s to the running panel, if any.
func (h *panelHost) push(s snapshot) {
	h.mu.Lock()
	r := h.run
	h.mu.Unlock()
	if r != nil {
		r.push(s)
	}
}

// close ends the panel: its channel closes, so it quits; it is killed if
// it has not after the grace period.
func (h *panelHost) close() {
	h.mu.Lock()
	r := h.run
	h.mu.Unlock()
	if r != nil {
		r.stop()
	}
}

// serve answers the panel's requests until the channel closes, then waits
// for the process.
func (h *panelHost) serve(r *panelRun) {
	rd := wire.NewReader(r.conn, wire.MaxRequest)
	for {
		var req wire.Request
		if err := rd.Read(&req); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				h.u.opts.Log.Warn("panel channel", "err", err)
			}
			break
		}
		r.requests.Add(1)
		go func() {
			defer r.requests.Done()
			reply := h.handle(r, req)
			reply.ID = req.ID
			r.send(wire.Update{Reply: &reply})
		}()
	}
	r.stop()
	r.requests.Wait()
	h.mu.Lock()
	if h.run == r {
		h.run = nil
	}
	h.mu.Unlock()
	h.u.opts.Log.Info("panel closed", "pid", r.cmd.Process.Pid)
}

// errNotShown refuses an answer for a revision the panel was never sent.
var errNotShown = errors.New("this revision of the card was not shown in the panel")

// handle serves one request. Nothing in it is taken on trust: the card and
// revision must be named and must be what was pushed to this panel, an
// allow must come after the settle delay, and a card is marked shown in full
// only at a revision whose whole text was sent here.
func (h *panelHost) handle(r *panelRun, req wire.Request) wire.Reply {
	b := h.u.b
	fail := func(err error) wire.Reply { return wire.Reply{Error: err.Error()} }
	switch req.Op {
	case wire.OpReady:
		r.readyOnce.Do(func() { close(r.ready) })
		return wire.Reply{}
	case wire.OpAnswer:
		d, err := approvals.ParseDecision(req.Decision)
		if err != nil {
			return fail(err)
		}
		if req.Card == "" || req.Revision < 1 {
			return fail(errors.New("an answer from the panel must name the card and the revision it shows"))
		}
		at, ok := r.shown(req.Card, req.Revision)
		if !ok {
			return fail(errNotShown)
		}
		if d.Allows() && time.Since(at) < h.u.b.SettleDelay() {
			return fail(approvals.ErrTooSoon)
		}
		sent, err := b.Answer(approvals.Answer{Card: req.Card, Decision: d, Revision: req.Revision, By: approvals.ByPanel, Values: req.Values})
		if err != nil {
			return fail(err)
		}
		h.u.opts.Log.Info("answered in the panel", "card", sent.Card.ID, "decision", sent.Decision)
		return wire.Reply{Text: fmt.Sprintf("Sent %s to %s.", sent.Decision, sent.Card.ID)}
	case wire.OpFull:
		if _, ok := r.shown(req.Card, req.Revision); !ok {
			return fail(errNotShown)
		}
		text, card, err := b.Full(req.Card)
		if err != nil {
			return fail(err)
		}
		if card.Revision != req.Revision {
			return fail(approvals.ErrStale)
		}
		r.mu.Lock()
		r.full[card.ID] = card.Revision
		r.mu.Unlock()
		return wire.Reply{Text: text, Card: &card}
	case wire.OpShown:
		// The whole text is on screen when the card was sent whole, or its
		// full text was sent after Show all.
		r.mu.Lock()
		full, ok := r.full[req.Card]
		pushed := r.pushed[req.Card]
		r.mu.Unlock()
		whole := ok && full == req.Revision || pushed.whole && pushed.revision == req.Revision
		if !whole || req.Revision < 1 {
			return fail(errors.New("the whole text of this revision was not sent to the panel"))
		}
		if err := b.MarkShownInFull(req.Card, req.Revision, approvals.ByPanel); err != nil {
			return fail(err)
		}
		h.u.Changed()
		return wire.Reply{}
	case wire.OpTask:
		if req.Worker == "" || strings.TrimSpace(req.Prompt) == "" {
			return fail(errors.New("a task needs a worker and a prompt"))
		}
		turn, err := b.StartTask(h.u.ctx, req.Worker, req.Prompt)
		if err != nil {
			return fail(err)
		}
		h.u.opts.Log.Info("task started from the panel", "worker", req.Worker, "turn", turn)
		return wire.Reply{Text: turn}
	case wire.OpPause, wire.OpResume, wire.OpRestart:
		op := map[string]func(string) error{wire.OpPause: b.Pause, wire.OpResume: b.Resume, wire.OpRestart: b.Restart}[req.Op]
		if err := h.u.workerAction(req.Op, req.Worker, op); err != nil {
			return fail(err)
		}
		return wire.Reply{}
	}
	return fail(fmt.Errorf("unknown request %q", req.Op))
}

// shown is when the card's revision was first sent to this panel.
func (r *panelRun) shown(card string, revision int) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.pushed[card]
	return s.at, ok && s.revision == revision && revision >= 1
}

// push sends the state, recording which revision of each card was sent.
func (r *panelRun) push(s snapshot) {
	now := time.Now()
	r.mu.Lock()
	seen := make(map[string]shownRev, len(s.cards))
	for _, c := range s.cards {
		if old, ok := r.pushed[c.ID]; ok && old.revision == c.Revision {
			seen[c.ID] = old
		} else {
			seen[c.ID] = shownRev{c.Revision, now, !c.Truncated}
		}
	}
	r.pushed = seen
	r.mu.Unlock()
	st := s.state()
	r.send(wire.Update{State: &st})
}

// send writes one update; a panel that cannot take it is ended.
func (r *panelRun) send(u wire.Update) error {
	r.conn.SetWriteDeadline(time.Now().Add(panelWrite))
	if err := r.w.Write(u); err != nil {
		r.stop()
		return err
	}
	return nil
}

// stop closes the channel, which ends the panel, and kills it if it is
// still there after the grace period. It can be called more than once.
func (r *panelRun) stop() {
	r.conn.Close()
	select {
	case <-r.exited:
	case <-time.After(panelGrace):
		r.cmd.Process.Kill()
		<-r.exited
	}
}

// tail keeps the last bytes the panel wrote to stderr, to say why it failed.
type tail struct {
	mu  sync.Mutex // protects buf
	buf []byte
}

const tailBytes = 2048

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = t.buf[len(t.buf)-tailBytes:]
	}
	return len(p), nil
}

// last is the last line written, or a note that there was none.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	if l := lines[len(lines)-1]; l != "" {
		return approvals.Escape(l, false)
	}
	return "it said nothing"
}
