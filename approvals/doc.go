// Package approvals turns codex's server requests into cards: it decides
// what a person is shown (escaped, capped), keeps the open cards oldest first
// across workers, applies the safety rules (fail closed, revisions, a yes
// only to a card shown in full, the quick-yes rules for hotkeys,
// notifications and answers that name no card), maps a decision to
// the exact reply the protocol expects, and writes the audit log before any
// reply goes out.
//
// It is plain Go: no Fyne, no processes, no sockets; it reads the files a
// file change touches (capped, never under the queue's lock) to show them as
// they will land and to read them again before a yes. Queue is the one owner
// of card state; its methods are safe for concurrent use, and OnChange is
// called in order outside its lock. Fakes for tests that use it are in
// approvalstest.
package approvals
