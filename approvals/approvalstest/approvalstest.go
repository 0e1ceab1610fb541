// Package approvalstest has fakes for tests of approvals and of what uses
// it: requests whose replies are recorded, and an in-memory audit log.
package approvalstest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"codexgate/approvals"
)

// Replies records the replies to one request, and fails the test on a
// second reply: every request is answered at most once.
type Replies struct {
	t    testing.TB
	mu   sync.Mutex // protects sent, gone
	sent []json.RawMessage
	gone bool
}

// Request returns a request of method with params and item, whose replies
// are recorded.
func Request(t testing.TB, worker string, session uint64, id, method, params, item string) (approvals.Request, *Replies) {
	r := &Replies{t: t}
	req := approvals.Request{Worker: worker, Session: session, ID: id, Method: method, Params: json.RawMessage(params), Reply: r.reply}
	if item != "" {
		req.Item = json.RawMessage(item)
	}
	return req, r
}

func (r *Replies) reply(result json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return errors.New("connection closed")
	}
	r.sent = append(r.sent, result)
	if len(r.sent) > 1 {
		r.t.Errorf("request answered %d times: %s", len(r.sent), r.sent)
	}
	return nil
}

// Disconnect makes later replies fail, as after a worker's exit.
func (r *Replies) Disconnect() {
	r.mu.Lock()
	r.gone = true
	r.mu.Unlock()
}

// Sent is the replies sent so far.
func (r *Replies) Sent() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]json.RawMessage(nil), r.sent...)
}

// Audit is an in-memory audit log.
type Audit struct {
	mu      sync.Mutex // protects records, fail
	records []approvals.Record
	fail    error
}

func (a *Audit) Write(r approvals.Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return a.fail
	}
	a.records = append(a.records, r)
	return nil
}

// Fail makes every later write fail with err (nil: succeed again).
func (a *Audit) Fail(err error) {
	a.mu.Lock()
	a.fail = err
	a.mu.Unlock()
}

// Records is what was written.
func (a *Audit) Records() []approvals.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]approvals.Record(nil), a.records...)
}

// Clock is a test clock that moves only when told, for the settle delay.
type Clock struct {
	mu  sync.Mutex // protects now
	now time.Time
}

// NewClock returns a clock at a fixed time.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// WaitFor waits, at most 10 seconds, until cond holds: for what another
// goroutine does, as a test sees it.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
