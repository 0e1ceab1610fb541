package notify

import (
	"errors"
	"fmt"
	"strings"

	"codexgate/approvals"
	"codexgate/supervisor"
)

// Caps of the texts of a notification.
const (
	bodyBytes  = 240
	labelBytes = 80
	turnBytes  = 160
)

// Message is the title and body of the notification of one change. Every
// text in it comes escaped from the card.
func Message(ch approvals.Change) (string, string) {
	c := ch.Card
	if ch.Kind == approvals.CardDeclined {
		return c.Worker + ": a request was declined without asking", approvals.OneLine(ch.Why, bodyBytes)
	}
	var title string
	switch c.Kind {
	case approvals.KindCommand:
		title = c.Worker + " wants to run a command"
	case approvals.KindNetwork:
		title = c.Worker + " wants network access to " + approvals.FirstLine(c.Host, labelBytes)
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

// firstLines is the escaped start of what the card asks about.
func firstLines(c approvals.Card, n int) string {
	body := approvals.FirstLines(strings.Join(c.Subject(), "\n"), n, bodyBytes)
	if c.Truncated {
		// The count of lines above is of what the card kept, not of all.
		body += "\n(the card is longer than it shows: open it and use Show all)"
	}
	return body
}

// Summary is the one notification for the cards a burst held back.
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

// Refusal says why a card was not answered without the panel (by a hotkey
// or a notification's action).
func Refusal(c approvals.Card, err error) string {
	what := c.Worker + " " + string(c.Kind) + " " + c.Summary(labelBytes)
	switch {
	case errors.Is(err, approvals.ErrNotShown):
		return what + ": it was not shown whole yet; open it in the panel, or run `codexgate show " + c.ID + "`, then try again"
	case errors.Is(err, approvals.ErrTooSoon):
		return what + ": it just became the oldest or changed; look at it, then try again"
	case errors.Is(err, approvals.ErrTruncated):
		return what + ": it is too long to see at a glance; open the panel, use Show all and allow it there"
	case errors.Is(err, approvals.ErrNeedsInput):
		return what + ": it needs an answer typed in the panel"
	case errors.Is(err, approvals.ErrGrants):
		return what + ": it grants more than running it once; allow it from the panel"
	}
	return fmt.Sprintf("%s: %v", what, err)
}

// TurnMessage is the notification of an ended turn: "api finished: <the
// first line of the agent's last message>", "api failed: <codex's
// error>" or "api stopped". What codex sent is escaped and capped.
func TurnMessage(te supervisor.TurnEnded) (string, string) {
	worker := approvals.OneLine(te.Worker, labelBytes)
	switch te.Status {
	case "completed":
		lines := strings.Split(approvals.Escape(strings.TrimSpace(te.LastMessage), true), "\n")
		if lines[0] == "" {
			return worker + " finished", ""
		}
		return worker + " finished: " + approvals.FirstLine(lines[0], turnBytes), rest(lines)
	case "failed":
		if te.Error == "" {
			return worker + " failed", ""
		}
		lines := strings.Split(approvals.Escape(strings.TrimSpace(te.Error), true), "\n")
		return worker + " failed: " + approvals.FirstLine(lines[0], turnBytes), rest(lines)
	case "interrupted":
		return worker + " stopped", ""
	}
	return worker + " ended: " + approvals.OneLine(te.Status, labelBytes), ""
}

// rest is the lines after the first, capped, for the body.
func rest(lines []string) string {
	if len(lines) < 2 {
		return ""
	}
	return approvals.FirstLines(strings.Join(lines[1:], "\n"), 3, bodyBytes)
}

// TurnSummary is the one notification for the ended turns a burst held back.
func TurnSummary(held []supervisor.TurnEnded) (string, string) {
	parts := make([]string, len(held))
	for i, te := range held {
		parts[i], _ = TurnMessage(supervisor.TurnEnded{Worker: te.Worker, Status: te.Status})
	}
	return fmt.Sprintf("%d more turns ended", len(held)), approvals.FirstLine(strings.Join(parts, ", "), bodyBytes)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
