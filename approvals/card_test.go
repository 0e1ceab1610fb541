package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"codexgate/supervisor/codextest"
)

// Real message shapes, as codex 0.171.0 sent them (PROTOCOL.md).
const (
	escalatedCommand = `{"kind":"command","threadId":"T","turnId":"U","itemId":"call_resp_0","startedAtMs":1796009056456,"environmentId":"local","reason":"Need to write outside the workspace?","command":"/bin/bash -lc 'touch /opt/probe_escalated.txt && echo done'","cwd":"/w","commandActions":[{"type":"unknown","command":"touch /opt/probe_escalated.txt && echo done"}],"proposedExecpolicyAmendment":["touch","/opt/probe_escalated.txt"],"availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch","/opt/probe_escalated.txt"]}},"cancel"]}`
	withPermissions  = `{"kind":"command","threadId":"T","turnId":"U","itemId":"call_resp_0","startedAtMs":1,"reason":"write to /opt/addperm","command":"/bin/bash -lc 'mkdir -p /opt/addperm && touch /opt/addperm/y && echo ok'","cwd":"/w","additionalPermissions":{"network":null,"fileSystem":{"read":null,"write":["/opt/addperm"],"entries":[{"path":{"type":"path","path":"/opt/addperm"},"access":"write"}]}},"proposedExecpolicyAmendment":["mkdir","-p","/opt/addperm"],"availableDecisions":["accept","cancel"]}`
	networkCommand   = `{"kind":"command","threadId":"T","turnId":"U","itemId":"network#http#example.com#80","approvalId":"network#http#example.com#80","startedAtMs":1,"reason":"example.com is not in the allowed_domains","command":"network-access http://example.com:80","cwd":"/w","networkApprovalContext":{"host":"example.com","protocol":"http"},"proposedNetworkPolicyAmendments":[{"host":"example.com","action":"allow"}],"availableDecisions":["accept","acceptForSession",{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"example.com","action":"allow"}}},"cancel"]}`
	fileChangeParams = `{"threadId":"T","turnId":"U","itemId":"call_resp_0","startedAtMs":1796009071374,"reason":null,"grantRoot":null}`
	permissionParams = `{"threadId":"T","turnId":"U","itemId":"call_resp_0","environmentId":"local","startedAtMs":1,"cwd":"/w","reason":"Need to write build output","permissions":{"network":{"enabled":true},"fileSystem":{"read":null,"write":["/opt/perm_a","/opt/perm_b"],"entries":[{"path":{"type":"path","path":"/opt/perm_a"},"access":"write"},{"path":{"type":"path","path":"/opt/perm_b"},"access":"write"}]}}}`
	questionParams   = `{"threadId":"T","turnId":"U","itemId":"call_resp_0","questions":[{"id":"db_choice","header":"Database","question":"Which database should I use?","isOther":true,"isSecret":false,"options":[{"label":"Postgres (Recommended)","description":"Mature"},{"label":"SQLite","description":"Simple"}]}],"isBlocking":false,"autoResolutionMs":null}`
	formElicitation  = `{"threadId":"T","turnId":"U","serverName":"tickets","mode":"form","message":"Create the ticket?","requestedSchema":{"type":"object","properties":{"title":{"type":"string","title":"Title"},"priority":{"type":"string","enum":["low","high"]},"count":{"type":"integer"},"urgent":{"type":"boolean"}},"required":["title"]},"_meta":null}`
	elicitationURL   = `{"threadId":"T","turnId":null,"serverName":"auth","mode":"url","message":"Sign in","url":"https://example.com/login","elicitationId":"e1","_meta":null}`
)

// workspace holds the files the file change cards of these tests read:
// main.go, which startedFileChange updates.
var workspace string

// startedFileChange adds new.txt and updates main.go in workspace.
var startedFileChange string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "approvals-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workspace = dir
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nvar x = 1\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	startedFileChange = `{"type":"fileChange","id":"call_resp_0","changes":[{"path":"` + dir + `/new.txt","kind":{"type":"add"},"diff":"hello outside\n"},{"path":"` + dir + `/main.go","kind":{"type":"update","move_path":null},"diff":"@@ -1,2 +1,2 @@\n package main\n-var x = 1\n+var x = 2\n"}],"status":"inProgress"}`
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func req(method, params, item string) Request {
	r := Request{Worker: "api", Session: 1, ID: "0", Method: method, Params: json.RawMessage(params)}
	if item != "" {
		r.Item = json.RawMessage(item)
	}
	return r
}

func schema(t *testing.T) *codextest.Schema {
	t.Helper()
	s, err := codextest.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuildCards(t *testing.T) {
	t.Parallel()
	sch := schema(t)
	for _, tc := range []struct {
		name      string
		req       Request
		kind      Kind
		decisions []Decision
		replies   map[Decision]string
		check     func(t *testing.T, c *Card)
	}{
		{
			name: "escalated command", req: req(MethodCommandApproval, escalatedCommand, ""), kind: KindCommand,
			decisions: []Decision{DecisionAllow, DecisionAllowPrefix, DecisionDeny, DecisionStop},
			replies: map[Decision]string{
				DecisionAllow:       `{"decision":"accept"}`,
				DecisionAllowPrefix: `{"decision":{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch","/opt/probe_escalated.txt"]}}}`,
				DecisionDeny:        `{"decision":"decline"}`, // not listed, and honoured all the same
				DecisionStop:        `{"decision":"cancel"}`,
			},
			check: func(t *testing.T, c *Card) {
				if c.Command != "/bin/bash -lc 'touch /opt/probe_escalated.txt && echo done'" || c.Cwd != "/w" || c.Reason != "Need to write outside the workspace?" {
					t.Errorf("card = %+v", c)
				}
				if !slices.Equal(c.Amendment, []string{"touch", "/opt/probe_escalated.txt"}) || len(c.Actions) != 1 {
					t.Errorf("amendment %q actions %q", c.Amendment, c.Actions)
				}
			},
		},
		{
			name: "command with additional permissions", req: req(MethodCommandApproval, withPermissions, ""), kind: KindCommand,
			decisions: []Decision{DecisionAllow, DecisionDeny, DecisionStop},
			replies:   map[Decision]string{DecisionAllow: `{"decision":"accept"}`, DecisionDeny: `{"decision":"decline"}`, DecisionStop: `{"decision":"cancel"}`},
			check: func(t *testing.T, c *Card) {
				if !slices.Equal(c.Permissions, []string{"write /opt/addperm"}) {
					t.Errorf("permissions %q", c.Permissions)
				}
			},
		},
		{
			name: "command without availableDecisions", kind: KindCommand,
			req:       req(MethodCommandApproval, `{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"ls","cwd":"/w"}`, ""),
			decisions: []Decision{DecisionAllow, DecisionAllowSession, DecisionDeny, DecisionStop},
			replies:   map[Decision]string{DecisionDeny: `{"decision":"decline"}`, DecisionAllowSession: `{"decision":"acceptForSession"}`},
		},
		{
			name: "network", req: req(MethodCommandApproval, networkCommand, ""), kind: KindNetwork,
			decisions: []Decision{DecisionAllow, DecisionAllowSession, DecisionAllowHost, DecisionDeny, DecisionStop},
			replies: map[Decision]string{
				DecisionAllowHost: `{"decision":{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"example.com","action":"allow"}}}}`,
			},
			check: func(t *testing.T, c *Card) {
				if c.Host != "example.com" || c.Protocol != "http" || !slices.Equal(c.HostRules, []string{"allow example.com"}) {
					t.Errorf("card = %+v", c)
				}
			},
		},
		{
			name: "file change", req: req(MethodFileChangeApproval, fileChangeParams, startedFileChange), kind: KindFileChange,
			decisions: []Decision{DecisionAllow, DecisionAllowSession, DecisionDeny, DecisionStop},
			replies:   map[Decision]string{DecisionAllow: `{"decision":"accept"}`, DecisionDeny: `{"decision":"decline"}`},
			check: func(t *testing.T, c *Card) {
				want := "*** add " + workspace + "/new.txt\n+hello outside\n*** update " + workspace + "/main.go (replaces an existing file)\n@@ -1,2 +1,2 @@\n package main\n-var x = 1\n+var x = 2\n"
				if c.Diff != want {
					t.Errorf("diff = %q\nwant %q", c.Diff, want)
				}
				if len(c.Changes) != 2 || c.Changes[1].Kind != "update" || c.DiffSHA256 == "" || c.Truncated {
					t.Errorf("card = %+v", c)
				}
			},
		},
		{
			name: "file change granting a root", kind: KindFileChange,
			req:       req(MethodFileChangeApproval, `{"threadId":"T","turnId":"U","itemId":"call_resp_0","startedAtMs":1,"reason":"more","grantRoot":"/srv/data"}`, startedFileChange),
			decisions: []Decision{DecisionAllow, DecisionAllowSession, DecisionDeny, DecisionStop},
			check: func(t *testing.T, c *Card) {
				if c.GrantRoot != "/srv/data" || c.Grants() != "grant writes under /srv/data" {
					t.Errorf("grantRoot %q, grants %q", c.GrantRoot, c.Grants())
				}
			},
		},
		{
			name: "permissions", req: req(MethodPermissions, permissionParams, ""), kind: KindPermissions,
			decisions: []Decision{DecisionAllow, DecisionAllowSession, DecisionDeny},
			replies: map[Decision]string{
				DecisionAllow: `{"permissions":{"fileSystem":{"entries":[{"path":{"type":"path","path":"/opt/perm_a"},"access":"write"},{"path":{"type":"path","path":"/opt/perm_b"},"access":"write"}],"write":["/opt/perm_a","/opt/perm_b"]},"network":{"enabled":true}},"scope":"turn"}`,
				DecisionDeny:  `{"permissions":{},"scope":"turn"}`,
			},
			check: func(t *testing.T, c *Card) {
				if !slices.Equal(c.Permissions, []string{"network access", "write /opt/perm_a", "write /opt/perm_b"}) || c.Grants() == "" {
					t.Errorf("permissions %q", c.Permissions)
				}
			},
		},
		{
			name: "question", req: req(MethodUserInput, questionParams, ""), kind: KindQuestion,
			decisions: []Decision{DecisionAllow, DecisionDeny},
			replies:   map[Decision]string{DecisionDeny: `{"answers":{}}`},
			check: func(t *testing.T, c *Card) {
				if !c.NeedsInput || len(c.Fields) != 1 || !slices.Equal(c.Fields[0].Options, []string{"Postgres (Recommended)", "SQLite"}) {
					t.Errorf("fields %+v", c.Fields)
				}
			},
		},
		{
			name: "elicitation form", req: req(MethodElicitation, formElicitation, ""), kind: KindElicitation,
			decisions: []Decision{DecisionAllow, DecisionDeny, DecisionStop},
			replies:   map[Decision]string{DecisionDeny: `{"_meta":null,"action":"decline","content":null}`, DecisionStop: `{"_meta":null,"action":"cancel","content":null}`},
			check: func(t *testing.T, c *Card) {
				if c.Server != "tickets" || len(c.Fields) != 4 || !c.NeedsInput {
					t.Errorf("card %+v", c)
				}
			},
		},
		{
			name: "elicitation url", req: req(MethodElicitation, elicitationURL, ""), kind: KindElicitation,
			decisions: []Decision{DecisionAllow, DecisionDeny, DecisionStop},
			replies:   map[Decision]string{DecisionAllow: `{"_meta":null,"action":"accept","content":null}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := build(tc.req, DefaultLimits)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			c := &b.card
			if c.Kind != tc.kind || !slices.Equal(c.Decisions, tc.decisions) {
				t.Errorf("kind %s decisions %v, want %s %v", c.Kind, c.Decisions, tc.kind, tc.decisions)
			}
			for d, want := range tc.replies {
				if got := string(b.replies[d]); got != want {
					t.Errorf("%s sends %s, want %s", d, got, want)
				}
			}
			for d, reply := range b.replies {
				if reply == nil {
					continue // built from a form
				}
				if err := sch.ValidateReply(tc.req.Method, reply); err != nil {
					t.Errorf("%s: %v", d, err)
				}
			}
			if err := sch.ValidateReply(tc.req.Method, denial(tc.req.Method)); err != nil {
				t.Error(err)
			}
			if c.SHA256 == "" || !strings.Contains(c.Body, "worker:     api") {
				t.Errorf("body %q", c.Body)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestFormReplies(t *testing.T) {
	t.Parallel()
	sch := schema(t)
	for _, tc := range []struct {
		name    string
		req     Request
		values  map[string]string
		want    string
		wantErr string
	}{
		{"question option", req(MethodUserInput, questionParams, ""), map[string]string{"db_choice": "SQLite"}, `{"answers":{"db_choice":{"answers":["SQLite"]}}}`, ""},
		{"question other", req(MethodUserInput, questionParams, ""), map[string]string{"db_choice": "MySQL"}, `{"answers":{"db_choice":{"answers":["MySQL"]}}}`, ""},
		{"question unanswered", req(MethodUserInput, questionParams, ""), nil, "", "needs an answer"},
		{"form", req(MethodElicitation, formElicitation, ""), map[string]string{"title": "Bug", "priority": "high", "count": "3", "urgent": "true"},
			`{"_meta":null,"action":"accept","content":{"count":3,"priority":"high","title":"Bug","urgent":true}}`, ""},
		{"form missing required", req(MethodElicitation, formElicitation, ""), map[string]string{"priority": "high"}, "", "required"},
		{"form bad enum", req(MethodElicitation, formElicitation, ""), map[string]string{"title": "x", "priority": "urgent"}, "", "must be one of"},
		{"form bad number", req(MethodElicitation, formElicitation, ""), map[string]string{"title": "x", "count": "many"}, "", "whole number"},
		{"form unknown field", req(MethodElicitation, formElicitation, ""), map[string]string{"title": "x", "nope": "1"}, "", "no field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := build(tc.req, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			got, err := formReply(b, tc.values)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("reply %s, %v; want %s", got, err, tc.want)
			}
			if err := sch.ValidateReply(tc.req.Method, got); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestDeclinedWithoutAsking(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  Request
		why  string
	}{
		{"file change never started", req(MethodFileChangeApproval, fileChangeParams, ""), "never started"},
		{"file change without changes", req(MethodFileChangeApproval, fileChangeParams, `{"type":"fileChange","id":"call_resp_0","changes":[]}`), "no changes"},
		{"file change item of another id", req(MethodFileChangeApproval, fileChangeParams, `{"type":"fileChange","id":"other","changes":[{"path":"/a","kind":{"type":"add"},"diff":"x"}]}`), "not the file change"},
		{"file change item of another type", req(MethodFileChangeApproval, fileChangeParams, `{"type":"commandExecution","id":"call_resp_0"}`), "not the file change"},
		{"file change of unknown kind", req(MethodFileChangeApproval, fileChangeParams, `{"type":"fileChange","id":"call_resp_0","changes":[{"path":"/a","kind":{"type":"chmod"},"diff":""}]}`), "unknown kind"},
		{"command missing", req(MethodCommandApproval, `{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"cwd":"/w"}`, ""), "without a command"},
		{"command empty", req(MethodCommandApproval, `{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"  ","cwd":"/w"}`, ""), "without a command"},
		{"sub-approval without its own command", req(MethodCommandApproval, `{"threadId":"T","turnId":"U","itemId":"i","approvalId":"a1","startedAtMs":1,"cwd":"/w"}`, `{"type":"commandExecution","id":"i","command":"ls"}`), "without a command"},
		{"writeStdin", req(MethodCommandApproval, `{"kind":"writeStdin","threadId":"T","turnId":"U","itemId":"i","approvalId":"a","startedAtMs":1,"command":"python","cwd":"/w"}`, ""), "writeStdin"},
		{"network without host", req(MethodCommandApproval, `{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"x","networkApprovalContext":{"host":"","protocol":"http"}}`, ""), "without a host"},
		{"unknown kind", req(MethodCommandApproval, `{"kind":"telepathy","threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"ls"}`, ""), "unknown command approval kind"},
		{"unknown method", req("item/unknown/requestApproval", `{}`, ""), "unknown request method"},
		{"params that do not parse", req(MethodCommandApproval, `{"command":42}`, ""), "do not parse"},
		{"params not an object", req(MethodPermissions, `[]`, ""), "do not parse"},
		{"permissions asking nothing", req(MethodPermissions, `{"threadId":"T","turnId":"U","itemId":"i","cwd":"/w","permissions":{"network":null,"fileSystem":null}}`, ""), "asks for nothing"},
		{"question without questions", req(MethodUserInput, `{"threadId":"T","turnId":"U","itemId":"i","questions":[]}`, ""), "without questions"},
		{"question option with hidden characters", req(MethodUserInput, `{"threadId":"T","turnId":"U","itemId":"i","questions":[{"id":"q","header":"h","question":"?","options":[{"label":"Yes\u202e","description":""}]}]}`, ""), "hidden characters"},
		{"elicitation of unknown mode", req(MethodElicitation, `{"threadId":"T","serverName":"s","mode":"telepathy","message":"m"}`, ""), "not supported"},
		{"legacy exec", req(MethodLegacyExec, `{"conversationId":"c","callId":"x","command":["rm","-rf","/"],"cwd":"/","parsedCmd":[]}`, ""), "legacy"},
		{"legacy patch", req(MethodLegacyPatch, `{"conversationId":"c","callId":"x","fileChanges":{}}`, ""), "legacy"},
		{"above the hard limit", req(MethodCommandApproval, `{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"`+strings.Repeat("a", 5<<20)+`"}`, ""), "above the"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(tc.req, DefaultLimits)
			var r *refusal
			if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("build = %v, want a refusal mentioning %q", err, tc.why)
			}
		})
	}
}

func TestCapAndTruncation(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("+line of an added file ✓\n", 10000)
	item := `{"type":"fileChange","id":"call_resp_0","changes":[{"path":"` + t.TempDir() + `/big.txt","kind":{"type":"add"},"diff":` + mustString(big) + `}]}`
	b, err := build(req(MethodFileChangeApproval, fileChangeParams, item), Limits{ShowBytes: 4096, MaxBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := &b.card
	if !c.Truncated || len(c.Body) > 4096 || len(c.Diff) > 4096 || c.FullBytes <= 4096 || len(b.full) != c.FullBytes {
		t.Errorf("truncated %v body %d diff %d full %d", c.Truncated, len(c.Body), len(c.Diff), c.FullBytes)
	}
	if !strings.HasSuffix(c.Body, "\n") || !strings.Contains(b.full, prefixLines(big, "+")) {
		t.Error("the cap does not end at a line, or the full text lost bytes")
	}
}

func mustString(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}
