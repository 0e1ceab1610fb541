package panel

import (
	"log/slog"

	"codexgate/approvals"
	"codexgate/ui/panel/wire"
)

// Remote is the Backend of the panel process: Codexgate at the other end of
// the private channel.
type Remote struct {
	C   *wire.Client
	Log *slog.Logger
}

func (r Remote) Answer(card string, revision int, d approvals.Decision, values map[string]string) (string, error) {
	reply, err := r.C.Call(wire.Request{Op: wire.OpAnswer, Card: card, Revision: revision, Decision: string(d), Values: values})
	return reply.Text, err
}

func (r Remote) Full(card string, revision int) (string, approvals.Card, error) {
	reply, err := r.C.Call(wire.Request{Op: wire.OpFull, Card: card, Revision: revision})
	if err != nil {
		return "", approvals.Card{}, err
	}
	if reply.Card == nil {
		return "", approvals.Card{}, wire.ErrClosed
	}
	return reply.Text, *reply.Card, nil
}

func (r Remote) Shown(card string, revision int) error {
	_, err := r.C.Call(wire.Request{Op: wire.OpShown, Card: card, Revision: revision})
	return err
}

func (r Remote) StartTask(worker, prompt string) (string, error) {
	reply, err := r.C.Call(wire.Request{Op: wire.OpTask, Worker: worker, Prompt: prompt})
	return reply.Text, err
}

func (r Remote) Worker(op, worker string) error {
	_, err := r.C.Call(wire.Request{Op: op, Worker: worker})
	return err
}

func (r Remote) Ready() {
	if _, err := r.C.Call(wire.Request{Op: wire.OpReady}); err != nil {
		r.Log.Warn("report the panel ready", "err", err)
	}
}
