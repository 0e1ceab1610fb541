package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// Decision is a person's answer, as the command line spells it.
type Decision string

const (
	DecisionAllow        Decision = "allow"
	DecisionAllowSession Decision = "allow-session"
	DecisionDeny         Decision = "deny"
	DecisionStop         Decision = "stop" // deny and interrupt the turn
	// DecisionAllowPrefix also saves the proposed command prefix as an allow rule.
	DecisionAllowPrefix Decision = "allow-prefix"
	// DecisionAllowHost and DecisionDenyHost save the proposed network rule.
	DecisionAllowHost Decision = "allow-host"
	DecisionDenyHost  Decision = "deny-host"
)

// ParseDecision reads a decision word.
func ParseDecision(s string) (Decision, error) {
	d := Decision(s)
	switch d {
	case DecisionAllow, DecisionAllowSession, DecisionDeny, DecisionStop, DecisionAllowPrefix, DecisionAllowHost, DecisionDenyHost:
		return d, nil
	}
	return "", fmt.Errorf("unknown decision %q (allow, allow-session, deny, stop, allow-prefix, allow-host, deny-host)", s)
}

func decision(v string) json.RawMessage { return mustJSON(map[string]string{"decision": v}) }

func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on values built here, which always encode
	}
	return raw
}

// commandParams are the fields of item/commandExecution/requestApproval a card shows.
type commandParams struct {
	ids
	Kind       *string `json:"kind"`
	ApprovalID *string `json:"approvalId"`
	Command    *string `json:"command"`
	Cwd        string  `json:"cwd"`
	Reason     *string `json:"reason"`
	// Input is what writeStdin would type; 0.171.0 does not send it, so such
	// requests are declined until it does.
	Input          *string `json:"input"`
	CommandActions []struct {
		Type    string  `json:"type"`
		Command string  `json:"command"`
		Path    *string `json:"path"`
		Query   *string `json:"query"`
	} `json:"commandActions"`
	NetworkApprovalContext *struct {
		Host     string `json:"host"`
		Protocol string `json:"protocol"`
	} `json:"networkApprovalContext"`
	AdditionalPermissions       *permissionProfile `json:"additionalPermissions"`
	ProposedExecpolicyAmendment []string           `json:"proposedExecpolicyAmendment"`
	ProposedNetworkAmendments   []networkAmendment `json:"proposedNetworkPolicyAmendments"`
	AvailableDecisions          []json.RawMessage  `json:"availableDecisions"`
}

type networkAmendment struct {
	Host   string `json:"host"`
	Action string `json:"action"`
}

func buildCommand(raw json.RawMessage) (*built, error) {
	var p commandParams
	if err := params(raw, &p); err != nil {
		return nil, err
	}
	kind := "command"
	if p.Kind != nil {
		kind = *p.Kind
	}
	b := &built{card: Card{Kind: KindCommand}, replies: map[Decision]json.RawMessage{}}
	c := &b.card
	p.ids.apply(c)
	switch kind {
	case "command", "humanCommand":
	case "writeStdin":
		if p.Input == nil {
			return nil, refuse("writeStdin request without the input it would type")
		}
		c.Message = "type into the running terminal: " + line(*p.Input)
	default:
		return nil, refuse("unknown command approval kind %q", kind)
	}
	if p.NetworkApprovalContext != nil {
		if strings.TrimSpace(p.NetworkApprovalContext.Host) == "" {
			return nil, refuse("network request without a host")
		}
		c.Kind = KindNetwork
		c.Host = hostLine(p.NetworkApprovalContext.Host)
		c.Protocol = line(p.NetworkApprovalContext.Protocol)
	}
	// A sub-approval (approvalId set) is judged on its own command: it never
	// borrows the parent item's.
	if p.Command != nil {
		c.Command = Escape(*p.Command, true)
	}
	if strings.TrimSpace(c.Command) == "" && c.Kind != KindNetwork {
		return nil, refuse("command request without a command")
	}
	c.Cwd = line(p.Cwd)
	if p.Reason != nil {
		c.Reason = Escape(*p.Reason, true)
	}
	for _, a := range p.CommandActions {
		desc := a.Type + ": " + a.Command
		if a.Path != nil {
			desc += " (path " + *a.Path + ")"
		}
		if a.Query != nil {
			desc += " (query " + *a.Query + ")"
		}
		c.Actions = append(c.Actions, line(desc))
	}
	if p.AdditionalPermissions != nil {
		c.Permissions = p.AdditionalPermissions.describe()
	}
	c.Amendment = lines(p.ProposedExecpolicyAmendment)
	for _, a := range p.ProposedNetworkAmendments {
		c.HostRules = append(c.HostRules, line(a.Action)+" "+hostLine(a.Host))
	}

	if p.AvailableDecisions == nil {
		// Older servers send no list: offer the plain decisions, and the
		// amendments that were proposed.
		for _, d := range []string{"accept", "acceptForSession", "decline", "cancel"} {
			p.AvailableDecisions = append(p.AvailableDecisions, mustJSON(d))
		}
		if p.ProposedExecpolicyAmendment != nil {
			p.AvailableDecisions = append(p.AvailableDecisions, mustJSON(map[string]any{
				"acceptWithExecpolicyAmendment": map[string]any{"execpolicy_amendment": p.ProposedExecpolicyAmendment},
			}))
		}
		for _, a := range p.ProposedNetworkAmendments {
			p.AvailableDecisions = append(p.AvailableDecisions, mustJSON(map[string]any{
				"applyNetworkPolicyAmendment": map[string]any{"network_policy_amendment": a},
			}))
		}
	}
	for _, raw := range p.AvailableDecisions {
		d, rule, ok := commandDecision(raw, p)
		if !ok || d == DecisionDeny || d == DecisionStop {
			continue // a decision codexgate cannot show is not offered; deny and stop are set below
		}
		if kind == "humanCommand" && d != DecisionAllow {
			continue // a human checkpoint takes one-time decisions only
		}
		if _, dup := b.replies[d]; !dup {
			b.replies[d] = mustJSON(map[string]json.RawMessage{"decision": raw})
			if rule != "" {
				if c.Rules == nil {
					c.Rules = map[Decision]string{}
				}
				c.Rules[d] = rule
			}
		}
	}
	// Deny and stop are always offered, whatever availableDecisions lists:
	// codex keeps Denied (the call is refused, the turn goes on) and Abort
	// (the turn is interrupted) apart, and 0.171.0 honours decline even
	// where it lists only cancel (PROTOCOL.md 2.1).
	b.replies[DecisionDeny] = decision("decline")
	b.replies[DecisionStop] = decision("cancel")
	c.Decisions = orderDecisions(b.replies)
	return b, nil
}

// commandDecision maps one entry of availableDecisions to a decision word
// and, for an amendment, the rule it sends (escaped). Amendments count only
// when they match what the request proposes, so the rule that is saved is
// the rule that was shown.
func commandDecision(raw json.RawMessage, p commandParams) (Decision, string, bool) {
	var word string
	if json.Unmarshal(raw, &word) == nil {
		switch word {
		case "accept":
			return DecisionAllow, "", true
		case "acceptForSession":
			return DecisionAllowSession, "", true
		case "decline":
			return DecisionDeny, "", true
		case "cancel":
			return DecisionStop, "", true
		}
		return "", "", false
	}
	var obj struct {
		Exec *struct {
			Amendment []string `json:"execpolicy_amendment"`
		} `json:"acceptWithExecpolicyAmendment"`
		Net *struct {
			Amendment networkAmendment `json:"network_policy_amendment"`
		} `json:"applyNetworkPolicyAmendment"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return "", "", false
	}
	switch {
	case obj.Exec != nil && len(obj.Exec.Amendment) > 0 && slices.Equal(obj.Exec.Amendment, p.ProposedExecpolicyAmendment):
		return DecisionAllowPrefix, strings.Join(lines(obj.Exec.Amendment), " "), true
	case obj.Net != nil && slices.Contains(p.ProposedNetworkAmendments, obj.Net.Amendment):
		switch obj.Net.Amendment.Action {
		case "allow":
			return DecisionAllowHost, line(obj.Net.Amendment.Host), true
		case "deny":
			return DecisionDenyHost, line(obj.Net.Amendment.Host), true
		}
	}
	return "", "", false
}

var decisionOrder = []Decision{DecisionAllow, DecisionAllowSession, DecisionAllowPrefix, DecisionAllowHost, DecisionDeny, DecisionDenyHost, DecisionStop}

func orderDecisions(replies map[Decision]json.RawMessage) []Decision {
	var out []Decision
	for _, d := range decisionOrder {
		if _, ok := replies[d]; ok {
			out = append(out, d)
		}
	}
	return out
}

// fileChangeItem is the started fileChange item a request names.
type fileChangeItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Changes []struct {
		Path string `json:"path"`
		Kind struct {
			Type     string  `json:"type"`
			MovePath *string `json:"move_path"`
		} `json:"kind"`
		Diff string `json:"diff"`
	} `json:"changes"`
}

func buildFileChange(raw, itemRaw json.RawMessage, lim Limits) (*built, error) {
	var p struct {
		ids
		Reason    *string `json:"reason"`
		GrantRoot *string `json:"grantRoot"`
	}
	if err := params(raw, &p); err != nil {
		return nil, err
	}
	if len(itemRaw) == 0 {
		return nil, refuse("the file change item %q was never started, so its changes cannot be shown", p.ItemID)
	}
	var item fileChangeItem
	if err := json.Unmarshal(itemRaw, &item); err != nil {
		return nil, refuse("the file change item does not parse: %v", err)
	}
	if item.Type != "fileChange" || item.ID != p.ItemID {
		return nil, refuse("the item %q is not the file change the request names", item.ID)
	}
	if len(item.Changes) == 0 {
		return nil, refuse("the file change item %q has no changes", p.ItemID)
	}
	b := &built{card: Card{Kind: KindFileChange}}
	c := &b.card
	p.ids.apply(c)
	if p.Reason != nil {
		c.Reason = Escape(*p.Reason, true)
	}
	if p.GrantRoot != nil {
		c.GrantRoot = line(*p.GrantRoot)
	}
	var diff strings.Builder
	diff.Grow(len(itemRaw))
	exact := sha256.New()
	files := newDisk(lim.MaxBytes)
	// Codex lists an item's changes in an order of its own, not the order
	// it applies them in (a patch "add B, then move A to B" is listed move
	// first, and B ends as A): two changes landing on one file would show
	// a file that is not the one written.
	touched := map[string]bool{}
	for _, ch := range item.Changes {
		if ch.Path == "" {
			return nil, refuse("a change of item %q has no path", p.ItemID)
		}
		kind := ch.Kind.Type
		switch kind {
		case "add", "delete", "update":
		default:
			return nil, refuse("change of %q has unknown kind %q", ch.Path, kind)
		}
		for _, part := range []string{ch.Path, "\x00", ch.Diff, "\x00"} {
			io.WriteString(exact, part)
		}
		move := ""
		if ch.Kind.MovePath != nil && *ch.Kind.MovePath != "" {
			move = *ch.Kind.MovePath
		}
		shown, body, err := showChange(files, ch.Path, kind, move, ch.Diff)
		if err != nil {
			return nil, err
		}
		for _, p := range []string{ch.Path, move} {
			if p == "" {
				continue
			}
			at := files.at[p]
			if touched[at] {
				return nil, refuse("%s is changed twice in one patch, and the order codex applies the changes in cannot be shown", line(p))
			}
			touched[at] = true
		}
		c.Changes = append(c.Changes, shown)
		diff.WriteString(body)
	}
	c.Diff = diff.String()
	c.DiffSHA256 = hex.EncodeToString(exact.Sum(nil))
	b.files = files.read
	b.replies = map[Decision]json.RawMessage{
		DecisionAllow:        decision("accept"),
		DecisionAllowSession: decision("acceptForSession"),
		DecisionDeny:         decision("decline"),
		DecisionStop:         decision("cancel"),
	}
	c.Decisions = orderDecisions(b.replies)
	return b, nil
}

// showChange shows one change as it will really land, against the files as
// they are on disk now (and as earlier changes of the same item leave
// them): an add or update of an existing file as a diff against it, a move
// as the whole file written at its destination and the removal of its
// source, a delete as what it removes. A diff that does not apply to the
// file on disk is a refusal: what would land cannot be known.
func showChange(files *disk, path, kind, move, diff string) (FileChange, string, error) {
	shown := FileChange{Path: line(path), Kind: kind}
	var body strings.Builder
	header := func(text string) {
		body.WriteString("*** " + text + "\n")
	}
	// section writes a change's lines, escaped, keeping their indentation.
	section := func(lines string) {
		body.WriteString(escape(lines, diffLines))
		if lines != "" && !strings.HasSuffix(lines, "\n") {
			body.WriteString("\n")
		}
	}
	old, exists, at, err := files.file(path)
	if err != nil {
		return shown, "", err
	}
	// A link on the way is named: the path alone would not say where the
	// change lands.
	for _, p := range []string{path, move} {
		if at, err := landing(p); p != "" && err == nil && at != filepath.Clean(p) {
			header(fmt.Sprintf("%s is really %s: a directory on its way is a symbolic link", line(p), line(at)))
		}
	}
	if !exists && kind != "add" {
		return shown, "", refuse("%s does not exist on disk, so the %s cannot be shown", shown.Path, kind)
	}
	switch {
	case kind == "add":
		shown.Replaces = exists
		header(shown.Describe())
		if exists {
			section(unifiedDiff(old, diff, 3, false))
		} else {
			section(prefixLines(diff, "+")) // the diff of an added file is its content
		}
		files.write(path, diff)
	case kind == "delete":
		header(shown.Describe())
		section(prefixLines(old, "-"))
		files.remove(path)
	case move == "":
		updated, err := applyDiff(old, diff)
		if err != nil {
			return shown, "", refuse("the diff of %s does not apply to the file on disk: %v", shown.Path, err)
		}
		shown.Replaces = true
		header(shown.Describe())
		section(unifiedDiff(old, updated, 3, false))
		files.write(path, updated)
	default:
		if filepath.Clean(move) == filepath.Clean(path) {
			return shown, "", refuse("%s is moved onto itself", shown.Path)
		}
		updated, err := applyDiff(old, diff)
		if err != nil {
			return shown, "", refuse("the diff of %s does not apply to the file on disk: %v", shown.Path, err)
		}
		dest, destExists, destAt, err := files.file(move)
		if err != nil {
			return shown, "", err
		}
		if destAt == at {
			return shown, "", refuse("%s is moved onto itself", shown.Path)
		}
		shown.Kind, shown.MovePath, shown.Replaces = "move", line(move), destExists
		header(shown.Describe())
		header(fmt.Sprintf("write %s: the whole file as it will be written", shown.MovePath))
		if destExists {
			section(unifiedDiff(dest, updated, 0, true))
		} else {
			section(prefixLines(updated, "+"))
		}
		header(fmt.Sprintf("delete %s: moved to %s", shown.Path, shown.MovePath))
		files.write(move, updated)
		files.remove(path)
	}
	return shown, body.String(), nil
}

func prefixLines(s, prefix string) string {
	if s == "" {
		return ""
	}
	s = strings.TrimSuffix(s, "\n")
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) + "\n"
}
