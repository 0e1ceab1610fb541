package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"codexgate/approvals"
	"codexgate/supervisor/codexrpc"
	"codexgate/supervisor/codextest"
)

// realWorker runs the pinned codex against a fake Responses endpoint that
// plays steps, in a fresh workspace holding a.txt.
func realWorker(t *testing.T, steps ...codextest.Step) (w *Worker, rec *recorder, ws, outside string) {
	t.Helper()
	dir := codextest.TempDir(t)
	ws, outside = filepath.Join(dir, "ws"), filepath.Join(dir, "outside")
	home := filepath.Join(dir, "codex-home")
	for _, d := range []string{ws, outside, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	responses := codextest.NewResponses(t, steps...)
	rec = newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	s := New(ctx, Options{Approver: rec, Log: testLog(t), Version: "test", Backoff: Backoff{Min: 100 * time.Millisecond, Max: time.Second, MaxFailures: 3, StableAfter: time.Hour}})
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		cancel()
	})
	spec := Spec{Name: "real", Cwd: ws, Codex: codextest.Codex(t), Args: responses.Args(), Env: codextest.Env(home)}
	if err := s.Apply(ctx, []Spec{spec}); err != nil {
		t.Fatal(err)
	}
	w, _ = s.Worker("real")
	waitState(t, w, StateIdle)
	return w, rec, ws, outside
}

func itemStatus(t *testing.T, rec *recorder, itemID string) string {
	t.Helper()
	for {
		ev := rec.event(t, approvals.ItemCompleted)
		if ev.ItemID != itemID {
			continue
		}
		var item struct{ Status string }
		json.Unmarshal(ev.Item, &item)
		return item.Status
	}
}

func TestRealCodexCommandApproval(t *testing.T) {
	for _, tc := range []struct {
		decision   string
		fileStays  bool
		itemStatus string
	}{
		{"accept", false, "completed"},
		{"decline", true, "declined"},
	} {
		t.Run(tc.decision, func(t *testing.T) {
			w, rec, ws, _ := realWorker(t, codextest.Exec("rm a.txt", true))
			if _, err := w.StartTurn(context.Background(), "delete a.txt"); err != nil {
				t.Fatal(err)
			}
			req := rec.request(t)
			var p struct{ Command, Cwd, ItemID string }
			json.Unmarshal(req.Params, &p)
			if req.Method != approvals.MethodCommandApproval || !strings.Contains(p.Command, "rm a.txt") || p.Cwd != ws {
				t.Fatalf("request %s: %s", req.Method, req.Params)
			}
			if _, err := os.Stat(filepath.Join(ws, "a.txt")); err != nil {
				t.Fatal("a.txt is gone before the answer")
			}
			if err := req.Reply(json.RawMessage(`{"decision":"` + tc.decision + `"}`)); err != nil {
				t.Fatal(err)
			}
			if got := itemStatus(t, rec, p.ItemID); got != tc.itemStatus {
				t.Errorf("item status = %q, want %q", got, tc.itemStatus)
			}
			rec.event(t, approvals.TurnCompleted)
			_, err := os.Stat(filepath.Join(ws, "a.txt"))
			if stays := err == nil; stays != tc.fileStays {
				t.Errorf("a.txt stays = %v, want %v", stays, tc.fileStays)
			}
		})
	}
}

func TestRealCodexFileChangeApproval(t *testing.T) {
	dir := codextest.TempDir(t) // neither the workspace nor /tmp: writing here needs approval
	target := filepath.Join(dir, "new.txt")
	w, rec, _, _ := realWorker(t, codextest.Patch("*** Begin Patch\n*** Add File: "+target+"\n+hello from the patch\n*** End Patch\n"))
	if _, err := w.StartTurn(context.Background(), "add a file"); err != nil {
		t.Fatal(err)
	}
	req := rec.request(t)
	if req.Method != approvals.MethodFileChangeApproval {
		t.Fatalf("request %s", req.Method)
	}
	var item struct {
		Type    string
		Changes []struct{ Path, Diff string }
	}
	if err := json.Unmarshal(req.Item, &item); err != nil || item.Type != "fileChange" || len(item.Changes) != 1 ||
		item.Changes[0].Path != target || !strings.Contains(item.Changes[0].Diff, "hello from the patch") {
		t.Fatalf("started item handed on = %s", req.Item)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the file exists before the answer")
	}
	req.Reply(json.RawMessage(`{"decision":"accept"}`))
	rec.event(t, approvals.TurnCompleted)
	if got, err := os.ReadFile(target); err != nil || string(got) != "hello from the patch\n" {
		t.Errorf("after accept: %q, %v", got, err)
	}
}

func TestRealCodexCrashResumesTheThread(t *testing.T) {
	w, rec, ws, _ := realWorker(t, codextest.Exec("rm a.txt", true))
	before := w.Status()
	if _, err := w.StartTurn(context.Background(), "delete a.txt"); err != nil {
		t.Fatal(err)
	}
	req := rec.request(t)
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rec.event(t, approvals.WorkerExited)
	if err := req.Reply(json.RawMessage(`{"decision":"accept"}`)); !errors.Is(err, codexrpc.ErrClosed) {
		t.Errorf("reply after crash: %v, want ErrClosed", err)
	}
	after := waitState(t, w, StateIdle)
	if after.ThreadID != before.ThreadID || after.PID == before.PID {
		t.Fatalf("after restart %+v, before %+v", after, before)
	}
	if _, err := os.Stat(filepath.Join(ws, "a.txt")); err != nil {
		t.Error("a.txt was removed although the request was never answered")
	}
	// The resumed thread takes a new turn.
	if _, err := w.StartTurn(context.Background(), "go on"); err != nil {
		t.Fatal(err)
	}
	rec.event(t, approvals.TurnCompleted)
}
