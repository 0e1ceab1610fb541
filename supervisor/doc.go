// Package supervisor runs one codex app-server per configured worker: it
// spawns the child in a process group of its own with a scrubbed
// environment, performs the handshake, starts or resumes the worker's
// thread, restarts it with capped backoff after a crash, and stops it
// cleanly (open requests denied first, then TERM and KILL to the group).
//
// Each Worker has one run loop goroutine that owns its process and
// connection, and one state machine: Worker.transition sets the state, the
// PID, the connection and the last error together, and pushes the change
// (Options.OnStatus). A worker that fails to start MaxFailures times in a
// row, or cannot start at all, is failed: like a paused one it has no
// process and waits for Restart. Worker.mu guards what other goroutines
// read (status, items, the stderr tail). Every write to codex has a
// deadline: a codex that stops reading is restarted, not waited for.
// Every approval request and the events that close it go to an Approver
// (approvals.Queue), called from the connection's read loop in codex's
// order.
//
// Tests run a fake app-server (codextest.RunFakeIfAsked: the test binary
// re-run as the child) and the pinned real codex against a fake Responses
// endpoint (codextest.NewResponses).
package supervisor
