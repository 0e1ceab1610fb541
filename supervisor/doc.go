// Package supervisor runs one codex app-server per configured worker: it
// spawns the child in a process group of its own with a scrubbed
// environment, performs the handshake, starts or resumes the worker's
// thread, restarts it with capped backoff after a crash, and stops it
// cleanly (open requests denied first, then TERM and KILL to the group).
//
// Each Worker has one run loop goroutine that owns its process and
// connection; Worker.mu guards what other goroutines read (status, items).
// Every approval request and the events that close it go to an Approver
// (approvals.Queue), called from the connection's read loop in codex's
// order.
//
// Tests run a fake app-server (codextest.RunFakeIfAsked: the test binary
// re-run as the child) and the pinned real codex against a fake Responses
// endpoint (codextest.NewResponses).
package supervisor
