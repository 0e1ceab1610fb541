package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind is what a card asks for.
type Kind string

const (
	KindCommand     Kind = "command"
	KindNetwork     Kind = "network"
	KindFileChange  Kind = "fileChange"
	KindPermissions Kind = "permissions"
	KindElicitation Kind = "elicitation"
	KindQuestion    Kind = "question"
)

// FileChange is one file of a fileChange card, as shown.
type FileChange struct {
	Path     string `json:"path"`
	Kind     string `json:"kind"` // add, delete, update, move
	MovePath string `json:"movePath,omitempty"`
	// Replaces: the file written (Path, or MovePath for a move) exists on
	// disk now, and the diff shown is against it.
	Replaces bool `json:"replaces,omitempty"`
}

// Describe is the change in a few words: "add /p (replaces an existing file)".
func (f FileChange) Describe() string {
	s := f.Kind + " " + f.Path
	if f.MovePath != "" {
		s += " -> " + f.MovePath
	}
	if f.Replaces {
		s += " (replaces an existing file)"
	}
	return s
}

// Field is one input of an elicitation form or one question.
type Field struct {
	Name     string   `json:"name"`
	Label    string   `json:"label"`
	Type     string   `json:"type"` // string, number, integer, boolean, enum, choice
	Required bool     `json:"required,omitempty"`
	Options  []string `json:"options,omitempty"`
	Other    bool     `json:"other,omitempty"` // a free answer is allowed besides the options
	Secret   bool     `json:"secret,omitempty"`
}

// Card is one request as a person sees it. Every text in it is escaped and
// capped: it is exactly what is shown.
type Card struct {
	ID       string `json:"id"`
	Worker   string `json:"worker"`
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	Kind     Kind   `json:"kind"`
	Command  string `json:"command"`
	Cwd      string `json:"cwd"`
	Reason   string `json:"reason"`
	Host     string `json:"host"`
	Protocol string `json:"protocol,omitempty"`
	// GrantRoot is the directory under which a fileChange asks for session
	// write access.
	GrantRoot   string   `json:"grantRoot"`
	Actions     []string `json:"actions,omitempty"`
	Permissions []string `json:"permissions,omitempty"`
	// Amendment is the command prefix that allow-prefix would allow from now on.
	Amendment []string `json:"amendment,omitempty"`
	// HostRules are the network rules (host and allow/deny) codex proposes to save.
	HostRules []string `json:"hostRules,omitempty"`
	// Rules are, for allow-prefix, allow-host and deny-host, the prefix or
	// host of the amendment that decision sends, escaped.
	Rules   map[Decision]string `json:"rules,omitempty"`
	Changes []FileChange        `json:"changes,omitempty"`
	Diff    string              `json:"diff"`
	Server  string              `json:"server,omitempty"`
	Message string              `json:"message,omitempty"`
	URL     string              `json:"url,omitempty"`
	Fields  []Field             `json:"fields,omitempty"`

	// Body is the card's whole text, labelled lines then the diff, capped.
	Body string `json:"body"`
	// Truncated: Body (or a field) does not show everything. Such a card can
	// only be allowed after the full text was shown (MarkShownInFull).
	Truncated bool `json:"truncated"`
	// ShownInFull: a view showed the whole text of this revision
	// (MarkShownInFull), ShownBy which one. A new revision clears it.
	ShownInFull bool `json:"shownInFull"`
	ShownBy     By   `json:"shownBy,omitempty"`
	FullBytes   int  `json:"fullBytes"`

	Revision   int        `json:"revision"`
	Decisions  []Decision `json:"decisions"`
	NeedsInput bool       `json:"needsInput,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	ChangedAt  time.Time  `json:"changedAt"`
	// SHA256 is the hash of the exact bytes of the request and its item;
	// DiffSHA256 of the exact diff text.
	SHA256     string `json:"sha256"`
	DiffSHA256 string `json:"diffSha256,omitempty"`
}

// Grants says what allowing the card grants beyond running it once, for
// labels such as "Allow and grant writes under /path"; empty when nothing.
// The permissions of a permissions card, and the additionalPermissions a
// command carries, are granted by a plain allow.
func (c *Card) Grants() string {
	switch {
	case c.GrantRoot != "":
		return "grant writes under " + c.GrantRoot
	case len(c.Permissions) > 0:
		return "grant " + strings.Join(c.Permissions, ", ")
	}
	return ""
}

// labelBytes caps the part of a decision label taken from the card.
const labelBytes = 120

// DecisionLabel is what every view (buttons, menus, notification actions,
// the command line) calls decision d on this card: what it does, what it
// grants, and for a rule, the exact rule that is sent.
func (c *Card) DecisionLabel(d Decision) string {
	grants := FirstLine(c.Grants(), labelBytes)
	rule := FirstLine(c.Rules[d], labelBytes)
	switch d {
	case DecisionAllow:
		switch {
		case c.Kind == KindQuestion:
			return "Send the answers"
		case c.Kind == KindElicitation && len(c.Fields) > 0:
			return "Accept and send the form"
		case c.Kind == KindElicitation:
			return "Accept"
		case grants != "":
			return "Allow and " + grants
		}
		return "Allow this once"
	case DecisionAllowSession:
		what := "Allow for this session"
		switch c.Kind {
		case KindCommand:
			what = "Allow, and don't ask again for this command this session"
		case KindNetwork:
			what = "Allow this host for this session"
		case KindFileChange:
			what = "Allow, and don't ask again for these files this session"
		}
		if grants != "" {
			return what + ", and " + grants
		}
		return what
	case DecisionAllowPrefix:
		return "Allow, and always allow commands starting with: " + rule
	case DecisionAllowHost:
		return "Allow, and always allow " + rule
	case DecisionDenyHost:
		return "Deny, and always block " + rule
	case DecisionDeny:
		switch c.Kind {
		case KindPermissions:
			return "Deny: grant nothing (the turn goes on)"
		case KindQuestion:
			return "Deny: answer nothing (the turn goes on)"
		case KindElicitation:
			return "Decline (the turn goes on)"
		}
		return "Deny (the turn goes on)"
	case DecisionStop:
		if c.Kind == KindElicitation {
			// MCP's cancel: dismissed without a choice; codex does not
			// promise that it ends the turn.
			return "Cancel (dismiss without an answer)"
		}
		return "Deny and stop the turn"
	}
	return string(d)
}

// QuickYesOffered reports whether the card, by what it is, may be allowed
// without being named or opened (hotkey, notification action). Whether it
// was shown in full and has settled as the oldest is for the queue to judge
// when the answer comes.
func (c *Card) QuickYesOffered() bool {
	return slices.Contains(c.Decisions, DecisionAllow) && c.quickNo(DecisionAllow) == nil
}

// quickNo is why d on the card, by what the card is, cannot be a yes given
// without naming or opening it: the card is truncated, needs typed input,
// or d grants more than running it once; nil when nothing of the card
// stands against it.
func (c *Card) quickNo(d Decision) error {
	byName := fmt.Sprintf("`codexgate show %s`, then `codexgate answer %s %s`", c.ID, d, c.ID)
	switch {
	case c.Truncated:
		return fmt.Errorf("%w: read it all with %s, or use Show all in the panel", ErrTruncated, byName)
	case c.NeedsInput:
		return fmt.Errorf("%w: answer it in the panel, or with `codexgate answer %s %s --value NAME=VALUE`", ErrNeedsInput, d, c.ID)
	case d != DecisionAllow:
		return fmt.Errorf("%w: %s saves a rule or lasts the session; name the card: %s", ErrGrants, d, byName)
	case c.Grants() != "":
		return fmt.Errorf("%w (it would %s): allow it from the panel, or name it: %s", ErrGrants, c.Grants(), byName)
	}
	return nil
}

// Summary is the card in one escaped line of at most about limit bytes,
// for lists, menus and notifications.
func (c *Card) Summary(limit int) string {
	if c.Kind == KindNetwork {
		return FirstLine("network access to "+c.Host, limit)
	}
	return FirstLine(strings.Join(c.Subject(), ", "), limit)
}

// Subject is what the card asks about, a line each: its file changes, its
// command, the permissions it asks for, its first question, or its message.
func (c *Card) Subject() []string {
	switch {
	case len(c.Changes) > 0:
		lines := make([]string, len(c.Changes))
		for i, ch := range c.Changes {
			lines[i] = ch.Describe()
		}
		return lines
	case c.Command != "":
		return []string{c.Command}
	case len(c.Permissions) > 0:
		return c.Permissions
	case len(c.Fields) > 0:
		return []string{c.Fields[0].Label}
	}
	return []string{c.Message}
}

// Allows reports whether d lets something happen. deny-host saves a rule,
// but one that only blocks: it is a denial.
func (d Decision) Allows() bool {
	return d != DecisionDeny && d != DecisionStop && d != DecisionDenyHost
}

// Limits bound what a card shows and what is refused outright.
type Limits struct {
	ShowBytes int // the shown text of a card
	// MaxBytes: a larger request is declined without asking, and so is a
	// file change whose files on disk are larger together.
	MaxBytes int
	// OpenCards and OpenBytes cap the open cards, in number and in the
	// bytes they keep; past them, requests are declined without asking.
	OpenCards int
	OpenBytes int
}

// DefaultLimits are 64 KiB shown, 4 MiB at most, 1,000 open cards keeping
// 64 MiB at most.
var DefaultLimits = Limits{ShowBytes: 64 << 10, MaxBytes: 4 << 20, OpenCards: 1000, OpenBytes: 64 << 20}

// orDefault is l with DefaultLimits where it has zero.
func (l Limits) orDefault() Limits {
	if l.ShowBytes <= 0 {
		l.ShowBytes = DefaultLimits.ShowBytes
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.OpenCards <= 0 {
		l.OpenCards = DefaultLimits.OpenCards
	}
	if l.OpenBytes <= 0 {
		l.OpenBytes = DefaultLimits.OpenBytes
	}
	return l
}

// refusal is a request declined without asking, and why.
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

func refuse(format string, args ...any) error { return &refusal{fmt.Sprintf(format, args...)} }

// built is a card with what answering it needs: its capped texts, the
// whole shown text, the replies and the hashes of the files it showed. The
// raw request is not in it (see keep for what of it a card keeps).
type built struct {
	card Card
	// replies maps each offered decision to the exact result it sends.
	replies map[Decision]json.RawMessage
	// form answers are built from the person's values.
	form formKind
	// full is the whole shown text, uncapped and escaped, for "Show all":
	// it is kept whole, because a truncated card may be allowed only once
	// every byte of it was shown, and it cannot be built again from the
	// request (dropped) or from the files (they may have changed). Body is
	// its first ShowBytes and shares its memory; it counts against
	// Limits.OpenBytes.
	full string
	// files are the files on disk a file change showed, as they were read,
	// for the re-read before a yes.
	files []shownFile
}

// size is about how many bytes b keeps.
func (b *built) size() int {
	c := &b.card
	n := len(b.full) + len(c.Command) + len(c.Diff) + 1024
	for _, r := range b.replies {
		n += len(r)
	}
	return n + len(b.files)*(len(shownFile{}.sum)+64)
}

// build turns a request into a card, or a refusal (an error) when it cannot
// show what would happen.
func build(req Request, lim Limits) (*built, error) {
	lim = lim.orDefault()
	if size := len(req.Params) + len(req.Item); size > lim.MaxBytes {
		return nil, refuse("the request is %d bytes, above the %d-byte limit", size, lim.MaxBytes)
	}
	var b *built
	var err error
	switch req.Method {
	case MethodCommandApproval:
		b, err = buildCommand(req.Params)
	case MethodFileChangeApproval:
		b, err = buildFileChange(req.Params, req.Item, lim)
	case MethodPermissions:
		b, err = buildPermissions(req.Params)
	case MethodElicitation:
		b, err = buildElicitation(req.Params)
	case MethodUserInput:
		b, err = buildQuestion(req.Params)
	case MethodLegacyExec, MethodLegacyPatch:
		return nil, refuse("%s is the legacy v1 approval; codexgate answers only v2 requests", req.Method)
	default:
		return nil, refuse("unknown request method %q", req.Method)
	}
	if err != nil {
		return nil, err
	}
	c := &b.card
	c.Worker = req.Worker
	sum := sha256.New()
	sum.Write(req.Params)
	sum.Write(req.Item)
	c.SHA256 = hex.EncodeToString(sum.Sum(nil))
	b.full = render(c, lim)
	return b, nil
}

// params decodes the request's params, refusing what does not parse.
func params(raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return refuse("params do not parse: %v", err)
	}
	return nil
}

// ids are the fields every item request carries.
type ids struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
}

func (i ids) apply(c *Card) { c.ThreadID, c.TurnID, c.ItemID = i.ThreadID, i.TurnID, i.ItemID }

func line(s string) string { return Escape(s, false) }

func lines(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = line(s)
	}
	return out
}

// render writes the card's Body, capping it and the long fields, and
// returns the whole text.
func render(c *Card, lim Limits) string {
	var b strings.Builder
	b.Grow(len(c.Diff) + 1024)
	field := func(label, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%-11s %s\n", label+":", strings.ReplaceAll(value, "\n", "\n            "))
		}
	}
	field("worker", line(c.Worker))
	field("kind", string(c.Kind))
	field("command", c.Command)
	field("cwd", c.Cwd)
	field("host", strings.TrimSpace(c.Host+" "+c.Protocol))
	field("grantRoot", c.GrantRoot)
	field("reason", c.Reason)
	field("server", c.Server)
	field("message", c.Message)
	field("url", c.URL)
	for _, a := range c.Actions {
		field("action", a)
	}
	for _, p := range c.Permissions {
		field("permission", p)
	}
	if len(c.Amendment) > 0 {
		field("rule", "allow commands starting with: "+strings.Join(c.Amendment, " "))
	}
	for _, r := range c.HostRules {
		field("rule", r)
	}
	for _, f := range c.Fields {
		desc := f.Type
		if len(f.Options) > 0 {
			desc += " [" + strings.Join(f.Options, " | ") + "]"
		}
		field("field", f.Name+" ("+desc+"): "+f.Label)
	}
	for _, ch := range c.Changes {
		field("file", ch.Describe())
	}
	if c.Diff != "" {
		b.WriteString("\n")
		b.WriteString(c.Diff)
		if !strings.HasSuffix(c.Diff, "\n") {
			b.WriteString("\n")
		}
	}
	full := b.String()
	c.FullBytes = len(full)
	var cut [3]bool
	c.Body, cut[0] = Cap(full, lim.ShowBytes)
	c.Command, cut[1] = capCopy(c.Command, lim.ShowBytes)
	c.Diff, cut[2] = capCopy(c.Diff, lim.ShowBytes)
	c.Truncated = cut[0] || cut[1] || cut[2]
	return full
}

// capCopy is Cap, copying what it keeps when it cut, so that the whole
// text can be freed.
func capCopy(s string, limit int) (string, bool) {
	s, cut := Cap(s, limit)
	if cut {
		s = strings.Clone(s)
	}
	return s, cut
}
