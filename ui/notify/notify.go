// Package notify raises one desktop notification per new card, and one per
// request declined without asking, through the session's notification
// server. A burst is coalesced into one notification that counts it, so a
// runaway agent cannot flood the desktop.
package notify

import (
	"context"
	"fmt"
	"html"
	"log/slog"
	"strings"
	"time"

	"codexgate/approvals"
)

// Burst limits: more than BurstSize notifications within BurstWindow are
// held back and summed up in one when the window ends.
const (
	BurstSize   = 3
	BurstWindow = time.Second
	bodyBytes   = 240
)

// Sender shows one notification (beeep.Notify in the app).
type Sender func(title, body string) error

// Notifier turns card changes into notifications. Its Run goroutine is the
// only one that sends.
type Notifier struct {
	send    Sender
	log     *slog.Logger
	changes chan approvals.Change
}

// New returns a notifier; Run must be called to send.
func New(send Sender, log *slog.Logger) *Notifier {
	return &Notifier{send: send, log: log, changes: make(chan approvals.Change, 256)}
}

// Notice queues a change. It never blocks: when the queue is full the
// change still counts in the next summary.
func (n *Notifier) Notice(ch approvals.Change) {
	if ch.Kind != approvals.CardOpened && ch.Kind != approvals.CardDeclined {
		return
	}
	select {
	case n.changes <- ch:
	default:
		n.log.Warn("notification queue full; the change is counted in the next summary")
	}
}

// Say shows a notification. The body is escaped for the markup that
// notification servers such as dunst apply, so that a tag in a command
// cannot hide the text after it.
func (n *Notifier) Say(title, body string) {
	if err := n.send(title, html.EscapeString(body)); err != nil {
		n.log.Warn("notification", "err", err)
	}
}

// Run sends notifications until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	var recent []time.Time
	var held []approvals.Change
	var flush <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case ch := <-n.changes:
			now := time.Now()
			recent = trim(recent, now)
			if len(recent) >= BurstSize {
				held = append(held, ch)
				if flush == nil {
					flush = time.After(recent[0].Add(BurstWindow).Sub(now))
				}
				continue
			}
			recent = append(recent, now)
			n.Say(Message(ch))
		case <-flush:
			flush = nil
			if len(held) == 0 {
				continue
			}
			n.Say(Summary(held))
			recent = append(trim(recent, time.Now()), time.Now())
			held = nil
		}
	}
}

func trim(times []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(times) && now.Sub(times[i]) >= BurstWindow {
		i++
	}
	return times[i:]
}

// Message is the title and body of the notification of one change. Every
// text in it comes escaped from the card.
func Message(ch approvals.Change) (string, string) {
	c := ch.Card
	if ch.Kind == approvals.CardDeclined {
		return c.Worker + ": a request was declined without asking", approvals.FirstLine(approvals.Escape(ch.Why, false), bodyBytes)
	}
	var title string
	switch c.Kind {
	case approvals.KindCommand:
		title = c.Worker + " wants to run a command"
	case approvals.KindNetwork:
		title = c.Worker + " wants network access to " + approvals.FirstLine(c.Host, 80)
	case approvals.KindFileChange:
		title = fmt.Sprintf("%s wants to change %d file%s", c.Worker, len(c.Changes), plural(len(c.Changes)))
	case approvals.KindPermissions:
		title = c.Worker + " asks for more permissions"
	case approvals.KindQuestion:
		title = c.Worker + " asks a question"
	default:
		title = c.Worker + ": " + approvals.FirstLine(c.Server, 60) + " needs your approval"
	}
	return title, firstLines(c, 3)
}

// firstLines is the escaped start of what the card shows: the command, the
// changed paths, or the permissions.
func firstLines(c approvals.Card, n int) string {
	var lines []string
	switch {
	case len(c.Changes) > 0:
		for _, ch := range c.Changes {
			lines = append(lines, ch.Kind+" "+ch.Path)
		}
	case c.Command != "":
		lines = strings.Split(c.Command, "\n")
	case len(c.Permissions) > 0:
		lines = c.Permissions
	default:
		lines = strings.Split(c.Message, "\n")
	}
	more := len(lines) > n
	if more {
		lines = lines[:n]
	}
	body, cut := approvals.Cap(strings.Join(lines, "\n"), bodyBytes)
	if more || cut {
		body += " …"
	}
	return body
}

// Summary is the one notification for a held-back burst.
func Summary(held []approvals.Change) (string, string) {
	workers := map[string]int{}
	var order []string
	for _, ch := range held {
		if workers[ch.Card.Worker] == 0 {
			order = append(order, ch.Card.Worker)
		}
		workers[ch.Card.Worker]++
	}
	parts := make([]string, len(order))
	for i, w := range order {
		parts[i] = fmt.Sprintf("%s: %d", w, workers[w])
	}
	return fmt.Sprintf("%d more requests", len(held)), approvals.FirstLine(strings.Join(parts, ", "), bodyBytes)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
