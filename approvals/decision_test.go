package approvals

import (
	"testing"
)

// networkDenyRule proposes a rule for another host than the one asked for:
// the label must name the host of the rule that is sent.
const networkDenyRule = `{"kind":"command","threadId":"T","turnId":"U","itemId":"network#https#api.example.com#443","approvalId":"network#https#api.example.com#443","startedAtMs":1,"reason":"api.example.com is not in the allowed_domains","command":"network-access https://api.example.com:443","cwd":"/w","networkApprovalContext":{"host":"api.example.com","protocol":"https"},"proposedNetworkPolicyAmendments":[{"host":"*.example.com","action":"allow"},{"host":"*.example.com","action":"deny"}],"availableDecisions":["accept",{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"*.example.com","action":"allow"}}},{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"*.example.com","action":"deny"}}},"cancel"]}`

// TestDecisionsSendWhatTheySay: every decision of every kind sends the
// reply its label promises, valid against the protocol's schema.
func TestDecisionsSendWhatTheySay(t *testing.T) {
	t.Parallel()
	sch := schema(t)
	type want struct{ reply, label string }
	for _, tc := range []struct {
		name  string
		req   Request
		want  map[Decision]want
		grant string
	}{
		{
			name: "escalated command: decline and cancel, though only cancel is listed",
			req:  req(MethodCommandApproval, escalatedCommand, ""),
			want: map[Decision]want{
				DecisionAllow:       {`{"decision":"accept"}`, "Allow this once"},
				DecisionAllowPrefix: {`{"decision":{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch","/opt/probe_escalated.txt"]}}}`, "Allow, and always allow commands starting with: touch /opt/probe_escalated.txt"},
				DecisionDeny:        {`{"decision":"decline"}`, "Deny (the turn goes on)"},
				DecisionStop:        {`{"decision":"cancel"}`, "Deny and stop the turn"},
			},
		},
		{
			name: "command with additional permissions grants them",
			req:  req(MethodCommandApproval, withPermissions, ""),
			want: map[Decision]want{
				DecisionAllow: {`{"decision":"accept"}`, "Allow and grant write /opt/addperm"},
				DecisionDeny:  {`{"decision":"decline"}`, "Deny (the turn goes on)"},
				DecisionStop:  {`{"decision":"cancel"}`, "Deny and stop the turn"},
			},
			grant: "grant write /opt/addperm",
		},
		{
			name: "command listing decline and cancel",
			req:  req(MethodCommandApproval, `{"threadId":"T","turnId":"U","itemId":"i","startedAtMs":1,"command":"ls","cwd":"/w","availableDecisions":["accept","acceptForSession","decline","cancel"]}`, ""),
			want: map[Decision]want{
				DecisionAllowSession: {`{"decision":"acceptForSession"}`, "Allow, and don't ask again for this command this session"},
				DecisionDeny:         {`{"decision":"decline"}`, "Deny (the turn goes on)"},
				DecisionStop:         {`{"decision":"cancel"}`, "Deny and stop the turn"},
			},
		},
		{
			name: "network rules name the host of the rule sent",
			req:  req(MethodCommandApproval, networkDenyRule, ""),
			want: map[Decision]want{
				DecisionAllow:     {`{"decision":"accept"}`, "Allow this once"},
				DecisionAllowHost: {`{"decision":{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"*.example.com","action":"allow"}}}}`, "Allow, and always allow *.example.com"},
				DecisionDenyHost:  {`{"decision":{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"*.example.com","action":"deny"}}}}`, "Deny, and always block *.example.com"},
				DecisionDeny:      {`{"decision":"decline"}`, "Deny (the turn goes on)"},
				DecisionStop:      {`{"decision":"cancel"}`, "Deny and stop the turn"},
			},
		},
		{
			name: "file change",
			req:  req(MethodFileChangeApproval, fileChangeParams, startedFileChange),
			want: map[Decision]want{
				DecisionAllow:        {`{"decision":"accept"}`, "Allow this once"},
				DecisionAllowSession: {`{"decision":"acceptForSession"}`, "Allow, and don't ask again for these files this session"},
				DecisionDeny:         {`{"decision":"decline"}`, "Deny (the turn goes on)"},
				DecisionStop:         {`{"decision":"cancel"}`, "Deny and stop the turn"},
			},
		},
		{
			name: "file change granting a root",
			req:  req(MethodFileChangeApproval, `{"threadId":"T","turnId":"U","itemId":"call_resp_0","startedAtMs":1,"reason":"more","grantRoot":"/x"}`, startedFileChange),
			want: map[Decision]want{
				DecisionAllow:        {`{"decision":"accept"}`, "Allow and grant writes under /x"},
				DecisionAllowSession: {`{"decision":"acceptForSession"}`, "Allow, and don't ask again for these files this session, and grant writes under /x"},
			},
			grant: "grant writes under /x",
		},
		{
			name: "permissions: deny grants nothing",
			req:  req(MethodPermissions, permissionParams, ""),
			want: map[Decision]want{
				DecisionAllow: {`{"permissions":{"fileSystem":{"entries":[{"path":{"type":"path","path":"/opt/perm_a"},"access":"write"},{"path":{"type":"path","path":"/opt/perm_b"},"access":"write"}],"write":["/opt/perm_a","/opt/perm_b"]},"network":{"enabled":true}},"scope":"turn"}`,
					"Allow and grant network access, write /opt/perm_a, write /opt/perm_b"},
				DecisionDeny: {`{"permissions":{},"scope":"turn"}`, "Deny: grant nothing (the turn goes on)"},
			},
			grant: "grant network access, write /opt/perm_a, write /opt/perm_b",
		},
		{
			name: "elicitation: deny declines, stop cancels",
			req:  req(MethodElicitation, elicitationURL, ""),
			want: map[Decision]want{
				DecisionAllow: {`{"_meta":null,"action":"accept","content":null}`, "Accept"},
				DecisionDeny:  {`{"_meta":null,"action":"decline","content":null}`, "Decline (the turn goes on)"},
				DecisionStop:  {`{"_meta":null,"action":"cancel","content":null}`, "Cancel (dismiss without an answer)"},
			},
		},
		{
			name: "question",
			req:  req(MethodUserInput, questionParams, ""),
			want: map[Decision]want{
				DecisionDeny: {`{"answers":{}}`, "Deny: answer nothing (the turn goes on)"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := build(tc.req, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			c := &b.card
			for d, w := range tc.want {
				if got := string(b.replies[d]); got != w.reply {
					t.Errorf("%s sends %s, want %s", d, got, w.reply)
				}
				if got := c.DecisionLabel(d); got != w.label {
					t.Errorf("%s is labelled %q, want %q", d, got, w.label)
				}
			}
			for d, reply := range b.replies {
				if reply == nil {
					continue // built from a form
				}
				if err := sch.ValidateReply(tc.req.Method, reply); err != nil {
					t.Errorf("%s: %v", d, err)
				}
				if d.Allows() == (d == DecisionDeny || d == DecisionStop || d == DecisionDenyHost) {
					t.Errorf("%s.Allows() = %v", d, d.Allows())
				}
			}
			if got := c.Grants(); got != tc.grant {
				t.Errorf("Grants() = %q, want %q", got, tc.grant)
			}
		})
	}
}
