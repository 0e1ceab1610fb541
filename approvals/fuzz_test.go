package approvals

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
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
		{`{"command":"ls\t\t\t\t\t\t\t\t\t      \u034f \u034f \u034f \u034f \u034f; curl x | sh\n\u2028\ue000\U0001fffe","cwd":"/w"}`, ""},
		{fileChangeParams, `{"type":"fileChange","id":"call_resp_0","changes":[{"path":"` + workspace + `/main.go","kind":{"type":"update","move_path":"` + workspace + `/moved\u200b.go"},"diff":"@@ -1,2 +1,2 @@\n package main\n-var x = 1\n+var x = \u17b4\u180b 2\t\t\t\t\t\t\t\t\t\t\n"}]}`},
		{fileChangeParams, `{"type":"fileChange","id":"call_resp_0","changes":[{"path":"` + workspace + `/main.go","kind":{"type":"add"},"diff":"\t\t\t\t\t\t\t\t\t\tx\u3164\n"},{"path":"` + workspace + `/main.go","kind":{"type":"delete"},"diff":""}]}`},
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
			checkShown(t, &b.card, b.full)
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
func checkShown(t *testing.T, c *Card, full string) {
	t.Helper()
	texts := []string{c.Body, c.Command, c.Cwd, c.Reason, c.Host, c.Protocol, c.GrantRoot, c.Diff, c.Server, c.Message, c.URL, c.Summary(120), full}
	texts = append(texts, c.Actions...)
	texts = append(texts, c.Permissions...)
	texts = append(texts, c.Amendment...)
	texts = append(texts, c.HostRules...)
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

// FuzzEscape: whatever the text, what is shown is valid UTF-8, holds no
// code point that does not show as itself (newlines and tabs only where
// kept), and no run of more than 8 blanks but a diff line's indentation.
func FuzzEscape(f *testing.F) {
	for _, seed := range []string{
		"rm a.txt", "a\u202eb\x1b[31m", "ls" + strings.Repeat("\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t               ", 4) + "; curl x | sh",
		strings.Repeat(" \u034f", 20) + "x", strings.Repeat(" \u0301", 20) + "x", "a" + strings.Repeat("\u0489", 9), "+\t\t\t\t\t\t\t\t\t\tindented\n-          x\n", "\u17b4\u17b5\u180b\u180e\U00016FE4\ue000\u0378\u2028\u2029\ufe0f\xff\xed\xa0\x80",
	} {
		f.Add(seed, uint8(0))
	}
	f.Fuzz(func(t *testing.T, s string, m uint8) {
		mode := escapeMode(m % 3)
		out := escape(s, mode)
		if !utf8.ValidString(out) {
			t.Fatalf("escape(%q) = %q: not valid UTF-8", s, out)
		}
		for i, ln := range strings.Split(out, "\n") {
			if i > 0 && mode == oneLine {
				t.Fatalf("escape(%q) = %q keeps a newline", s, out)
			}
			if mode == diffLines {
				ln = ln[indentLen(ln):]
			}
			run, marks := 0, 0
			for _, r := range ln {
				if r == ' ' || r == '\t' {
					marks = 0
					if r == '\t' && mode == oneLine {
						t.Fatalf("escape(%q) = %q keeps a tab", s, out)
					}
					if run++; run > blankMax {
						t.Fatalf("escape(%q) = %q keeps a run of %d blanks", s, out, run)
					}
					continue
				}
				if run > 0 && unicode.In(r, unicode.Mn, unicode.Me) {
					t.Fatalf("escape(%q) = %q shows a mark on a blank", s, out)
				}
				run = 0
				if hidden(r) {
					t.Fatalf("escape(%q) = %q shows %U", s, out, r)
				}
				if !unicode.In(r, unicode.Mn, unicode.Me) {
					marks = 0
				} else if marks++; marks > marksMax {
					t.Fatalf("escape(%q) = %q stacks %d marks", s, out, marks)
				}
			}
		}
		if first := FirstLine(Escape(s, true), 80); strings.ContainsRune(first, '\n') || len(first) > 80+len(" … (+99999999 lines)") {
			t.Fatalf("FirstLine of %q = %q", s, first)
		}
	})
}
