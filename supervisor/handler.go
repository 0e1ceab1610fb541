package supervisor

import (
	"encoding/json"
	"maps"
	"slices"

	"codexgate/approvals"
	"codexgate/supervisor/codexrpc"
)

// connHandler follows one connection of a worker. It runs on that
// connection's read loop, so the events it hands on keep codex's order.
type connHandler struct {
	w       *Worker
	session uint64
	said    map[string]string // the last agent message by turn id, until the turn ends; read loop only
}

func (h *connHandler) event(kind approvals.EventKind, threadID, turnID, itemID string) approvals.Event {
	return approvals.Event{Kind: kind, Worker: h.w.spec.Name, Session: h.session, ThreadID: threadID, TurnID: turnID, ItemID: itemID}
}

// Request routes an approval request, with the item it names, to the
// approver. Anything else is answered at once with an error, which codex
// treats as a refusal.
func (h *connHandler) Request(req *codexrpc.Request) {
	w := h.w
	if !approvals.Methods[req.Method] {
		w.log.Warn("declined a request codexgate does not handle", "method", req.Method)
		if err := req.ReplyError(codexrpc.CodeMethodNotFound, "codexgate does not handle "+req.Method); err != nil {
			w.log.Warn("reply to unhandled request", "method", req.Method, "err", err)
		}
		return
	}
	var ref struct {
		ItemID string `json:"itemId"`
	}
	_ = json.Unmarshal(req.Params, &ref) // approvals judges params that do not parse
	var item json.RawMessage
	h.items(func(items map[string]trackedItem) { item = items[ref.ItemID].raw })
	w.opts.Approver.Open(approvals.Request{
		Worker:  w.spec.Name,
		Session: h.session,
		ID:      req.Key(),
		Method:  req.Method,
		Params:  req.Params,
		Item:    item,
		Reply:   func(result json.RawMessage) error { return req.Reply(result) },
	})
	// The card is built and the params hashed: the open request need not
	// keep them (up to max_bytes each) until it is answered.
	req.Params = nil
}

// Notification keeps the item and turn state cards need, and the worker's
// state, and hands on what changes cards.
func (h *connHandler) Notification(method string, params json.RawMessage) {
	w := h.w
	switch method {
	case codexrpc.NotifyItemStarted:
		var n codexrpc.ItemNotification
		var hdr codexrpc.ItemHeader
		if !h.decode(method, params, &n) || !h.decode(method, n.Item, &hdr) {
			return
		}
		if hdr.Type == "commandExecution" || hdr.Type == "fileChange" {
			shared := false
			h.items(func(items map[string]trackedItem) {
				it, ok := items[hdr.ID]
				if shared = ok && it.inFlight > 0; shared {
					it.inFlight++
					it.raw = nil
					items[hdr.ID] = it
					return
				}
				items[hdr.ID] = trackedItem{turnID: n.TurnID, raw: n.Item, inFlight: 1}
			})
			if shared {
				w.log.Warn("two items in flight share an id: requests that name it show no item and are declined", "item", hdr.ID)
			}
		}
		w.record(h.session, func(hi *history) bool { return hi.item(n.TurnID, n.Item, false) })
	case codexrpc.NotifyPatchUpdated:
		var n codexrpc.PatchUpdated
		if !h.decode(method, params, &n) {
			return
		}
		var it trackedItem
		started, updated := false, false
		shared := false
		h.items(func(items map[string]trackedItem) {
			if it, started = items[n.ItemID]; started && it.raw == nil {
				shared = true
			} else if started {
				it.raw, updated = withChanges(it.raw, n.Changes)
				items[n.ItemID] = it
			}
		})
		if shared {
			// Whose changes these are cannot be told: the cards of the id
			// are declined (an update without an item).
			w.opts.Approver.Event(h.event(approvals.ItemUpdated, n.ThreadID, n.TurnID, n.ItemID))
			return
		}
		if !updated {
			w.log.Warn("skipped a patch update", "item", n.ItemID, "started", started)
			return
		}
		w.record(h.session, func(hi *history) bool { return hi.item(n.TurnID, it.raw, false) })
		ev := h.event(approvals.ItemUpdated, n.ThreadID, n.TurnID, n.ItemID)
		ev.Item = it.raw
		w.opts.Approver.Event(ev)
	case codexrpc.NotifyItemCompleted:
		var n codexrpc.ItemNotification
		var hdr codexrpc.ItemHeader
		if !h.decode(method, params, &n) || !h.decode(method, n.Item, &hdr) {
			return
		}
		shared := false
		h.items(func(items map[string]trackedItem) {
			if it := items[hdr.ID]; it.inFlight > 1 {
				it.inFlight--
				items[hdr.ID] = it
				shared = true
			} else {
				delete(items, hdr.ID)
			}
		})
		if hdr.Type == "agentMessage" {
			h.remember(n.TurnID, n.Item)
		}
		w.record(h.session, func(hi *history) bool { return hi.item(n.TurnID, n.Item, true) })
		if shared {
			// Which of the items that share the id completed is unknown:
			// a card of the other would close unanswered, and its turn
			// wait. Cards close on their own request's resolution instead.
			return
		}
		ev := h.event(approvals.ItemCompleted, n.ThreadID, n.TurnID, hdr.ID)
		ev.Item = n.Item
		w.opts.Approver.Event(ev)
	case codexrpc.NotifyRequestResolved:
		var n codexrpc.RequestResolved
		if !h.decode(method, params, &n) {
			return
		}
		ev := h.event(approvals.RequestResolved, n.ThreadID, "", "")
		ev.RequestID = string(n.RequestID)
		w.opts.Approver.Event(ev)
	case codexrpc.NotifyTurnStarted:
		var n codexrpc.TurnNotification
		if !h.decode(method, params, &n) {
			return
		}
		w.update(h.session, func(st *Status) { st.TurnID = n.Turn.ID })
		w.record(h.session, func(hi *history) bool { return hi.turn(n.Turn.ID) != nil })
		w.opts.Approver.Event(h.event(approvals.TurnStarted, n.ThreadID, n.Turn.ID, ""))
	case codexrpc.NotifyTurnCompleted:
		var n codexrpc.TurnNotification
		if !h.decode(method, params, &n) {
			return
		}
		h.items(func(items map[string]trackedItem) {
			maps.DeleteFunc(items, func(_ string, it trackedItem) bool { return it.turnID == n.Turn.ID })
		})
		w.update(h.session, func(st *Status) {
			if st.TurnID == n.Turn.ID {
				st.TurnID = ""
			}
			if n.Turn.Error != nil {
				st.LastError = n.Turn.Error.Message
			}
		})
		w.record(h.session, func(hi *history) bool {
			msg := ""
			if n.Turn.Error != nil {
				msg = n.Turn.Error.Message
			}
			hi.ended(n.Turn.ID, n.Turn.Status, msg)
			return true
		})
		w.opts.Approver.Event(h.event(approvals.TurnCompleted, n.ThreadID, n.Turn.ID, ""))
		h.turnEnded(n)
	case codexrpc.NotifyTokenUsage:
		var n codexrpc.TokenUsageUpdated
		if h.decode(method, params, &n) {
			w.record(h.session, func(hi *history) bool {
				hi.tokens(n.TurnID, n.TokenUsage.Total.TotalTokens, n.TokenUsage.Last.TotalTokens)
				return n.TurnID != ""
			})
		}
	case codexrpc.NotifyThreadStatusChanged:
		var n codexrpc.ThreadStatusChanged
		if !h.decode(method, params, &n) {
			return
		}
		w.update(h.session, func(st *Status) {
			if st.State == StateIdle || st.State == StateWorking || st.State == StateWaiting {
				st.State = stateOf(n.Status)
			}
		})
	case codexrpc.NotifyThreadClosed:
		var n codexrpc.ThreadClosed
		if h.decode(method, params, &n) {
			w.opts.Approver.Event(h.event(approvals.ThreadClosed, n.ThreadID, "", ""))
		}
	case codexrpc.NotifyError:
		var n codexrpc.ErrorNotification
		if h.decode(method, params, &n) {
			w.log.Warn("codex reported an error", "message", n.Error.Message, "willRetry", n.WillRetry)
			w.update(h.session, func(st *Status) { st.LastError = n.Error.Message })
		}
	case codexrpc.NotifyWarning, codexrpc.NotifyConfigWarning, codexrpc.NotifyDeprecationNotice:
		var n codexrpc.MessageNotification
		_ = json.Unmarshal(params, &n)
		w.log.Warn("codex "+method, "message", n.Message)
	default:
		w.mu.Lock()
		first := !w.logged[method]
		w.logged[method] = true
		w.mu.Unlock()
		if first {
			w.log.Debug("ignoring notification", "method", method)
		}
	}
}

// remember keeps the text of an agent message as its turn's last. The
// message deltas are opted out: item/completed carries the whole text.
func (h *connHandler) remember(turnID string, item json.RawMessage) {
	var msg struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(item, &msg) != nil {
		return
	}
	if h.said == nil {
		h.said = map[string]string{}
	}
	h.said[turnID] = msg.Text
}

// turnEnded reports a turn that ended to Options.OnTurnEnded.
func (h *connHandler) turnEnded(n codexrpc.TurnNotification) {
	said := h.said[n.Turn.ID]
	delete(h.said, n.Turn.ID)
	if h.w.opts.OnTurnEnded == nil {
		return
	}
	te := TurnEnded{Worker: h.w.spec.Name, ThreadID: n.ThreadID, TurnID: n.Turn.ID, Status: n.Turn.Status, LastMessage: said}
	if n.Turn.Error != nil {
		te.Error = n.Turn.Error.Message
	}
	h.w.opts.OnTurnEnded(te)
}

// items runs f on the worker's tracked items while this connection is the
// worker's current one; a late message of an earlier process changes nothing.
func (h *connHandler) items(f func(map[string]trackedItem)) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if h.w.session == h.session && h.w.items != nil {
		f(h.w.items)
	}
}

func (h *connHandler) decode(method string, raw json.RawMessage, v any) bool {
	if err := json.Unmarshal(raw, v); err != nil {
		h.w.log.Warn("skipped a malformed notification", "method", method, "err", err)
		return false
	}
	return true
}

// stateOf maps codex's thread status to a worker state.
func stateOf(s codexrpc.ThreadStatus) State {
	if s.Type != "active" {
		return StateIdle
	}
	if slices.Contains(s.ActiveFlags, "waitingOnApproval") || slices.Contains(s.ActiveFlags, "waitingOnUserInput") {
		return StateWaiting
	}
	return StateWorking
}

// withChanges is item with its changes replaced: patchUpdated replaces the
// whole list.
func withChanges(item, changes json.RawMessage) (json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(item, &fields) != nil || len(changes) == 0 {
		return item, false
	}
	fields["changes"] = changes
	out, err := json.Marshal(fields)
	if err != nil {
		return item, false
	}
	return out, true
}
