package approvals

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

type nopAudit struct{}

func (nopAudit) Write(Record) error { return nil }

var fuzzMethods = []string{MethodCommandApproval, MethodFileChangeApproval, MethodPermissions, MethodElicitation, MethodUserInput, MethodLegacyExec, "x/unknown"}

// FuzzBuild builds cards from arbitrary params and items: never a panic,
// nothing hidden in what is shown, and never a yes without an answer.
func FuzzBuild(f *testing.F) {
	for i, seed := range []struct{ params, item string }{
		{escalatedCommand, ""}, {withPermissions, ""}, {networkCommand, ""},
		{fileChangeParams, startedFileChange}, {permissionParams, ""}, {formElicitation, ""}, {questionParams, ""},
		{`{"command":"rm \u202e\u001b[31m x","cwd":"\u200b/w"}`, ""},
		{fileChangeParams, `{"type":"fileChange","id":"call_resp_0","changes":[{"path":"/a\u2066","kind":{"type":"update","move_path":"/b\r"},"diff":"\u202e+x\xff"}]}`},
	} {
		f.Add(uint8(i), []byte(seed.params), []byte(seed.item))
	}
	f.Fuzz(func(t *testing.T, m uint8, params, item []byte) {
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		var replies []json.RawMessage
		r := Request{Worker: "w", Session: 1, ID: "0", Method: method, Params: params, Item: item,
			Reply: func(res json.RawMessage) error { replies = append(replies, res); return nil }}
		if len(item) == 0 {
			r.Item = nil
		}
		b, err := build(r, Limits{ShowBytes: 2048, MaxBytes: 1 << 20})
		if err == nil {
			checkShown(t, &b.card)
		}
		q := NewQueue(Options{Audit: nopAudit{}, Limits: Limits{ShowBytes: 2048, MaxBytes: 1 << 20}})
		q.Open(r)
		for _, res := range replies {
			if string(res) != string(denial(method)) {
				t.Fatalf("%s was answered %s without a person", method, res)
			}
		}
		if len(q.Cards()) == 1 {
			q.Event(Event{Kind: WorkerStopping, Worker: "w", Session: 1})
			for _, res := range replies {
				if strings.Contains(string(res), "accept") || strings.Contains(string(res), `"permissions":{"`) {
					t.Fatalf("stop answered %s", res)
				}
			}
		}
	})
}

// checkShown fails when a text of the card would show a hidden character.
func checkShown(t *testing.T, c *Card) {
	t.Helper()
	texts := []string{c.Body, c.Command, c.Cwd, c.Reason, c.Host, c.Protocol, c.GrantRoot, c.Diff, c.Server, c.Message, c.URL}
	texts = append(texts, c.Actions...)
	texts = append(texts, c.Permissions...)
	for _, ch := range c.Changes {
		texts = append(texts, ch.Path, ch.MovePath)
	}
	for _, f := range c.Fields {
		texts = append(texts, f.Name, f.Label)
		texts = append(texts, f.Options...)
	}
	for _, s := range texts {
		if !utf8.ValidString(s) {
			t.Fatalf("shown text is not valid UTF-8: %q", s)
		}
		for _, r := range s {
			if r != '\n' && r != '\t' && hidden(r) {
				t.Fatalf("shown text holds %U: %q", r, s)
			}
		}
	}
}
