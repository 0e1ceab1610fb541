package codexrpc

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"
)

// testdata/stream.jsonl is what codex 0.171.0 sent during one turn that ran a
// command printing 400 lines (initialize without opt-outs, so every delta).

func loadStream(b *testing.B) ([]byte, int) {
	raw, err := os.ReadFile("testdata/stream.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	return raw, bytes.Count(raw, []byte("\n"))
}

type discard struct{}

func (discard) Notification(string, json.RawMessage) {}
func (discard) Request(r *Request)                   { r.ReplyError(CodeDenied, "bench") }

func connPass(stream []byte) {
	c := New(bytes.NewReader(stream), io.Discard, discard{}, slog.New(slog.DiscardHandler))
	c.Run()
}

// bareDecodePass is the baseline: a json.Decoder over the same bytes into
// the same envelope, with no dispatch.
func bareDecodePass(stream []byte) {
	dec := json.NewDecoder(bytes.NewReader(stream))
	for {
		var m message
		if dec.Decode(&m) != nil {
			return
		}
	}
}

// BenchmarkReadDispatch reports the messages per second of the connection's
// read-and-dispatch path, and its ratio to a bare json.Decoder loop measured
// in the same run (aim: at least 0.7).
func BenchmarkReadDispatch(b *testing.B) {
	stream, n := loadStream(b)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		connPass(stream)
	}
	perSec := float64(n) * float64(b.N) / b.Elapsed().Seconds()
	b.StopTimer()
	start := time.Now()
	for range b.N {
		bareDecodePass(stream)
	}
	barePerSec := float64(n) * float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(perSec, "msgs/s")
	b.ReportMetric(barePerSec, "bare-msgs/s")
	b.ReportMetric(perSec/barePerSec, "ratio-to-bare")
}
