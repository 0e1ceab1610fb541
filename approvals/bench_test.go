package approvals

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkOpenAnswer opens and answers one card while 1,000 others are
// open across 10 workers: the cost of the queue's bookkeeping per card.
func BenchmarkOpenAnswer(b *testing.B) {
	q := NewQueue(Options{Audit: nopAudit{}})
	reply := func(json.RawMessage) error { return nil }
	params := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"threadId":"T","turnId":"U","itemId":"i%d","startedAtMs":1,"command":"make test %d","cwd":"/w"}`, i, i))
	}
	for i := range 1000 {
		q.Open(Request{Worker: fmt.Sprintf("w%d", i%10), Session: 1, ID: fmt.Sprint(i), Method: MethodCommandApproval, Params: params(i), Reply: reply})
	}
	b.ReportAllocs()
	i := 1000
	for b.Loop() {
		i++
		q.Open(Request{Worker: "w0", Session: 1, ID: fmt.Sprint(i), Method: MethodCommandApproval, Params: params(i), Reply: reply})
		last := q.open[len(q.open)-1].card.ID
		if _, err := q.Answer(Answer{Card: last, Decision: DecisionDeny, By: ByCLI}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(q.Cards())), "open-cards")
}

// BenchmarkBuildLargeDiff builds a card from a 1 MiB diff (escape and cap)
// and reports its time as a ratio to a plain copy of the same bytes.
func BenchmarkBuildLargeDiff(b *testing.B) {
	var diff strings.Builder
	for diff.Len() < 1<<20 {
		fmt.Fprintf(&diff, "+\tfmt.Println(\"line %d of a generated file, with some ünïcödé\")\n", diff.Len())
	}
	item, _ := json.Marshal(map[string]any{"type": "fileChange", "id": "call_resp_0",
		"changes": []any{map[string]any{"path": b.TempDir() + "/big.go", "kind": map[string]any{"type": "add"}, "diff": diff.String()}}})
	r := Request{Worker: "w", Method: MethodFileChangeApproval, Params: json.RawMessage(fileChangeParams), Item: item}
	b.SetBytes(int64(diff.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := build(r, DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
	perBuild := b.Elapsed() / time.Duration(b.N)
	b.StopTimer()
	src := []byte(diff.String())
	dst := make([]byte, len(src))
	start := time.Now()
	for range b.N {
		copy(dst, src)
	}
	perCopy := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(perBuild)/float64(max(perCopy, 1)), "x-plain-copy")
}
