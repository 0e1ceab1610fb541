package approvals

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkOpenAnswer opens and answers one card while 1,000 others are
// open across 10 workers: the cost of the queue's bookkeeping per card.
func BenchmarkOpenAnswer(b *testing.B) {
	q := NewQueue(Options{Audit: nopAudit{}, Limits: Limits{OpenCards: 1001}})
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

// largeCommand is a command request of about size bytes, with code points
// that are escaped and runs that are marked.
func largeCommand(id, size int) Request {
	var cmd strings.Builder
	for cmd.Len() < (size-200)*65/75 { // a line is 65 bytes, 75 in JSON
		cmd.WriteString("echo 'a line of a very long script \u202e with ünïcödé'\t\t\t\t\t\t\t\t\t\t;\n")
	}
	params, _ := json.Marshal(map[string]any{"threadId": "T", "turnId": "U", "itemId": fmt.Sprint("i", id), "startedAtMs": 1, "command": cmd.String(), "cwd": "/w"})
	return Request{Worker: "w", Session: 1, ID: fmt.Sprint(id), Method: MethodCommandApproval, Params: params, Reply: func(json.RawMessage) error { return nil }}
}

func TestCardsKeepNoRawRequest(t *testing.T) {
	t.Parallel()
	q := NewQueue(Options{Audit: nopAudit{}})
	r := largeCommand(0, 1<<20)
	q.Open(r)
	q.Open(req(MethodFileChangeApproval, fileChangeParams, startedFileChange))
	if len(q.open) != 2 {
		t.Fatalf("%d cards", len(q.open))
	}
	big, small := q.open[0], q.open[1]
	if big.req.Params != nil || big.req.Item != nil || big.req.Reply == nil {
		t.Error("a command card keeps its raw request")
	}
	if len(big.card.Command) > DefaultLimits.ShowBytes || len(big.card.Body) > DefaultLimits.ShowBytes || !big.card.Truncated {
		t.Errorf("capped texts: command %d, body %d", len(big.card.Command), len(big.card.Body))
	}
	// "Show all" still has every byte of what is shown.
	full, c, err := q.Full(big.card.ID)
	var p struct{ Command string }
	json.Unmarshal(r.Params, &p)
	if err != nil || len(full) != c.FullBytes || !strings.Contains(full, strings.ReplaceAll(Escape(p.Command, true), "\n", "\n            ")) {
		t.Errorf("full text: %d bytes of %d, %v", len(full), c.FullBytes, err)
	}
	// A small file change keeps what building it again needs.
	if small.req.Params == nil || small.req.Item == nil || len(small.files) != 2 {
		t.Errorf("file change keeps params %v, item %v, files %d", small.req.Params != nil, small.req.Item != nil, len(small.files))
	}
}

// BenchmarkOpenLargeRequests opens 40 requests of 4 MB and reports how
// much the heap and the resident set grew, beside the caps on open cards
// that bound it.
func BenchmarkOpenLargeRequests(b *testing.B) {
	reqs := make([]Request, 40)
	for i := range reqs {
		reqs[i] = largeCommand(i, 4_000_000)
	}
	lim := DefaultLimits
	var heap, rss float64
	var open int
	for b.Loop() {
		debug.FreeOSMemory()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rssBefore := residentBytes()
		q := NewQueue(Options{Audit: nopAudit{}, Limits: lim})
		for _, r := range reqs {
			q.Open(r)
		}
		debug.FreeOSMemory() // what the cards keep, not garbage the runtime has yet to return
		runtime.ReadMemStats(&after)
		heap = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		rss = float64(residentBytes() - rssBefore)
		open = len(q.Cards())
		runtime.KeepAlive(q)
	}
	b.ReportMetric(heap/(1<<20), "heap-growth-MiB")
	b.ReportMetric(rss/(1<<20), "rss-growth-MiB")
	b.ReportMetric(float64(open), "open-cards")
	b.ReportMetric(float64(lim.OpenBytes)/(1<<20), "cap-MiB")
	b.ReportMetric(float64(lim.OpenCards), "cap-cards")
	b.Logf("40 requests of 4 MB: heap +%.0f MiB, resident +%.0f MiB, %d cards open; caps %d cards, %d MiB",
		heap/(1<<20), rss/(1<<20), open, lim.OpenCards, lim.OpenBytes>>20)
}

// residentBytes is the process's resident set (VmRSS), 0 where /proc has none.
func residentBytes() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kb, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")))
			return n << 10
		}
	}
	return 0
}

// TestRevisionsKeepToTheCaps: a card opened small cannot grow past the
// caps on open cards by its revisions, from its files on disk (which the
// sandbox can grow) or a patch update.
func TestRevisionsKeepToTheCaps(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.txt")
	q := NewQueue(Options{Audit: nopAudit{}, Limits: Limits{ShowBytes: 4096, MaxBytes: 1 << 20, OpenCards: 10, OpenBytes: 64 << 10}})
	var sent []string
	r := fileChangeRequest(mkChange("add", path, "hello\n"))
	r.Reply = func(res json.RawMessage) error { sent = append(sent, string(res)); return nil }
	q.Open(r)
	if len(q.open) != 1 {
		t.Fatalf("%d cards", len(q.open))
	}
	id := q.open[0].card.ID
	os.WriteFile(path, []byte(strings.Repeat("written by the sandbox\n", 30000)), 0o600)
	_, err := q.Answer(Answer{Card: id, Decision: DecisionAllow, Revision: 1, By: ByPanel})
	if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "cards.max_open_bytes") {
		t.Errorf("allow after the file grew: %v", err)
	}
	kept := 0
	for _, e := range q.open {
		kept += e.size()
	}
	if kept > 64<<10 || len(sent) != 1 || sent[0] != `{"decision":"decline"}` {
		t.Errorf("open cards keep %d bytes (cap %d); sent %q", kept, 64<<10, sent)
	}
}
