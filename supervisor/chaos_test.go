package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/supervisor/codextest"
)

// The chaos tests run workers of the fake app-server through the real card
// queue, and check in each case that nothing panics, that no goroutine is
// left behind, and that the cards of the workers that behave are answered.

// memAudit keeps the audit records in memory.
type memAudit struct {
	mu   sync.Mutex
	recs []approvals.Record
}

func (a *memAudit) Write(r approvals.Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
	return nil
}

func (a *memAudit) ended(card string) []approvals.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []approvals.Record
	for _, r := range a.recs {
		if r.Card == card && r.Event == "end" {
			out = append(out, r)
		}
	}
	return out
}

type chaos struct {
	t     *testing.T
	sup   *Supervisor
	queue *approvals.Queue
	audit *memAudit
	dirs  map[string]string // fake log dir by worker
}

// newChaos runs one fake worker per name through a queue.
func newChaos(t *testing.T, opts Options, names ...string) *chaos {
	t.Helper()
	c := &chaos{t: t, audit: &memAudit{}, dirs: map[string]string{}}
	c.queue = approvals.NewQueue(approvals.Options{Audit: c.audit, Log: testLog(t)})
	opts.Approver, opts.Log = c.queue, testLog(t)
	if opts.Backoff == (Backoff{}) {
		opts.Backoff = Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond, MaxFailures: 1000, StableAfter: time.Hour}
	}
	opts.StopGrace = 500 * time.Millisecond
	c.sup = New(context.Background(), opts)
	var specs []Spec
	for _, n := range names {
		dir := t.TempDir()
		c.dirs[n] = dir
		specs = append(specs, Spec{Name: n, Cwd: dir, Codex: os.Args[0], Env: map[string]string{codextest.FakeEnv: dir}})
	}
	if err := c.sup.Apply(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		waitState(t, c.worker(n), StateIdle)
	}
	return c
}

func (c *chaos) worker(name string) *Worker {
	w, err := c.sup.Worker(name)
	if err != nil {
		c.t.Fatal(err)
	}
	return w
}

// card waits for an open card of worker.
func (c *chaos) card(worker string) approvals.Card {
	c.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, card := range c.queue.Cards() {
			if card.Worker == worker {
				return card
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("no card of %s", worker)
	return approvals.Card{}
}

// answered waits until the fake of worker logged n replies.
func (c *chaos) answered(worker string, n int) {
	c.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for len(events(codextest.FakeLog(c.t, c.dirs[worker]), "reply ")) < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %d replies, want %d", worker, len(events(codextest.FakeLog(c.t, c.dirs[worker]), "reply ")), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *chaos) stop() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.sup.Stop(ctx); err != nil {
		c.t.Error(err)
	}
}

// noLeak fails when goroutines that the test started outlive it.
func noLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestChaosACodexThatStopsReading(t *testing.T) {
	noLeak(t)
	c := newChaos(t, Options{WriteTimeout: 300 * time.Millisecond}, "stuck", "good")
	defer c.stop()
	stuck := c.worker("stuck")
	first := stuck.Status()
	if _, err := stuck.StartTurn(context.Background(), "stall; exec rm a.txt"); err != nil {
		t.Fatal(err)
	}
	card := c.card("stuck")
	deadline := time.Now().Add(waitLimit)
	for len(events(codextest.FakeLog(t, c.dirs["stuck"]), "stalled")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the fake never stalled")
		}
		// The next line the fake reads is its last: a call is one.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		stuck.Interrupt(ctx, "")
		cancel()
	}
	// A task larger than the pipe holds cannot be written: the write
	// misses its deadline, which ends the connection.
	_, err := stuck.StartTurn(context.Background(), strings.Repeat("x", 1<<20))
	if err == nil {
		t.Error("a task reached a codex that reads nothing")
	}
	// The other worker's cards flow meanwhile, and after.
	good := c.worker("good")
	for i := range 3 {
		if _, err := good.StartTurn(context.Background(), "exec ls"); err != nil {
			t.Fatal(err)
		}
		gc := c.card("good")
		if _, err := c.queue.Answer(approvals.Answer{Card: gc.ID, Decision: approvals.DecisionAllow, Revision: gc.Revision, By: approvals.ByPanel}); err != nil {
			t.Fatal(err)
		}
		c.answered("good", i+1)
	}
	// The stuck worker's card is closed, and recorded so; answering it sends nothing.
	if _, err := c.queue.Answer(approvals.Answer{Card: card.ID, Decision: approvals.DecisionAllow, Revision: card.Revision, By: approvals.ByPanel}); err == nil {
		t.Error("an answer went to a codex that reads nothing")
	}
	if recs := c.audit.ended(card.ID); len(recs) != 1 {
		t.Errorf("end records of the stuck card: %+v", recs)
	}
	// The stuck worker is restarted on its thread.
	st := waitState(t, stuck, StateIdle)
	for st.PID == first.PID {
		st = waitState(t, stuck, StateIdle)
	}
	if st.ThreadID != first.ThreadID || !strings.Contains(st.LastError, "stopped reading its input") {
		t.Errorf("after the stall: %+v", st)
	}
}

func TestChaosGarbageFromCodex(t *testing.T) {
	noLeak(t)
	c := newChaos(t, Options{}, "garbage", "good")
	defer c.stop()
	for _, name := range []string{"garbage", "good"} {
		prompt := "exec ls"
		if name == "garbage" {
			prompt = "garbage; exec ls"
		}
		if _, err := c.worker(name).StartTurn(context.Background(), prompt); err != nil {
			t.Fatal(err)
		}
		card := c.card(name)
		if _, err := c.queue.Answer(approvals.Answer{Card: card.ID, Decision: approvals.DecisionDeny, Revision: card.Revision, By: approvals.ByCLI}); err != nil {
			t.Fatal(err)
		}
		c.answered(name, 1)
	}
	if st := waitState(t, c.worker("garbage"), StateIdle); st.LastError != "" {
		t.Errorf("garbage worker: %+v", st)
	}
}

func TestChaosKillStorm(t *testing.T) {
	noLeak(t)
	c := newChaos(t, Options{}, "victim", "good")
	defer c.stop()
	victim, good := c.worker("victim"), c.worker("good")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Tasks, interrupts and answers keep coming at both workers; on the
	// victim they may fail, but never panic.
	for _, w := range []*Worker{victim, good} {
		wg.Go(func() {
			for ctx.Err() == nil {
				w.StartTurn(ctx, "exec ls; exec pwd")
				time.Sleep(5 * time.Millisecond)
				w.Interrupt(ctx, "")
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, card := range c.queue.Cards() {
				c.queue.Answer(approvals.Answer{Card: card.ID, Decision: approvals.DecisionAllow, Revision: card.Revision, By: approvals.ByPanel})
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	for range 6 {
		st := waitState(t, victim, StateIdle, StateWorking, StateWaiting)
		if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatal(err)
		}
		for victim.Status().PID == st.PID {
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	wg.Wait()
	// The good worker's cards were answered all along.
	if n := len(events(codextest.FakeLog(t, c.dirs["good"]), "reply ")); n == 0 {
		t.Error("no card of the good worker was answered")
	}
	if st := waitState(t, victim, StateIdle, StateWorking, StateWaiting); st.PID == 0 {
		t.Errorf("victim after the storm: %+v", st)
	}
	if _, err := good.StartTurn(context.Background(), "exec ls"); err != nil {
		t.Errorf("good worker after the storm: %v", err)
	}
	card := c.card("good")
	if _, err := c.queue.Answer(approvals.Answer{Card: card.ID, Decision: approvals.DecisionDeny, Revision: card.Revision, By: approvals.ByCLI}); err != nil {
		t.Error(err)
	}
}

func TestChaosReloadRacesStop(t *testing.T) {
	noLeak(t)
	for i := range 5 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			dir := t.TempDir()
			spec := func(name, model string) Spec {
				return Spec{Name: name, Cwd: dir, Codex: os.Args[0], Model: model, Env: map[string]string{codextest.FakeEnv: dir}}
			}
			s := New(context.Background(), Options{Approver: newRecorder(), Log: testLog(t), Backoff: fastBackoff, StopGrace: 500 * time.Millisecond})
			if err := s.Apply(context.Background(), []Spec{spec("a", ""), spec("b", "")}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var applyErr error
			wg.Go(func() { applyErr = s.Apply(context.Background(), []Spec{spec("a", "other"), spec("c", "")}) })
			time.Sleep(time.Duration(i) * 5 * time.Millisecond)
			if err := s.Stop(context.Background()); err != nil {
				t.Error(err)
			}
			wg.Wait()
			if applyErr != nil && !errors.Is(applyErr, ErrStopped) {
				t.Errorf("apply racing stop: %v", applyErr)
			}
			if err := s.Apply(context.Background(), []Spec{spec("d", "")}); !errors.Is(err, ErrStopped) {
				t.Errorf("apply after stop: %v", err)
			}
			if st := s.Statuses(); len(st) != 0 {
				t.Errorf("workers after stop: %+v", st)
			}
			// Every fake that started has ended.
			var pids []int
			for _, r := range codextest.FakeLog(t, dir) {
				if !slices.Contains(pids, r.PID) {
					pids = append(pids, r.PID)
				}
			}
			for _, pid := range pids {
				if alive(pid) {
					t.Errorf("fake %d outlived Stop", pid)
				}
			}
		})
	}
}

func TestChaosAReplyThatBlocksHoldsUpNoOtherCard(t *testing.T) {
	noLeak(t)
	q := approvals.NewQueue(approvals.Options{Audit: &memAudit{}, Log: testLog(t)})
	params := `{"threadId":"T","turnId":"U","itemId":"i1","startedAtMs":1,"command":"ls","cwd":"/w","availableDecisions":["accept","decline"]}`
	release := make(chan struct{})
	sending := make(chan struct{}, 1)
	var stuckReplies, goodReplies []json.RawMessage
	q.Open(approvals.Request{Worker: "stuck", Session: 1, ID: "1", Method: approvals.MethodCommandApproval, Params: json.RawMessage(params),
		Reply: func(r json.RawMessage) error {
			sending <- struct{}{}
			<-release // a codex that does not take its reply
			stuckReplies = append(stuckReplies, r)
			return nil
		}})
	q.Open(approvals.Request{Worker: "good", Session: 2, ID: "1", Method: approvals.MethodCommandApproval, Params: json.RawMessage(params),
		Reply: func(r json.RawMessage) error { goodReplies = append(goodReplies, r); return nil }})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		q.Event(approvals.Event{Kind: approvals.WorkerStopping, Worker: "stuck", Session: 1})
	}()
	<-sending
	cards := q.Cards()
	if len(cards) != 1 || cards[0].Worker != "good" {
		t.Fatalf("cards while a reply is stuck: %+v", cards)
	}
	if _, err := q.Answer(approvals.Answer{Card: cards[0].ID, Decision: approvals.DecisionAllow, Revision: 1, By: approvals.ByPanel}); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-stopped
	if len(goodReplies) != 1 || len(stuckReplies) != 1 || !strings.Contains(string(stuckReplies[0]), "decline") {
		t.Errorf("replies: good %s, stuck %s", goodReplies, stuckReplies)
	}
}
