package notify

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"codexgate/approvals"
)

func TestMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ch          approvals.Change
		title, body string
	}{
		{approvals.Change{Kind: approvals.CardOpened, Card: approvals.Card{Worker: "api", Kind: approvals.KindCommand, Command: "/bin/bash -lc 'rm a.txt'\nsecond\nthird\nfourth"}},
			"api wants to run a command", "/bin/bash -lc 'rm a.txt'\nsecond\nthird …"},
		{approvals.Change{Kind: approvals.CardOpened, Card: approvals.Card{Worker: "web", Kind: approvals.KindFileChange,
			Changes: []approvals.FileChange{{Path: "/a", Kind: "add"}, {Path: "/b", Kind: "update"}, {Path: "/c", Kind: "delete"}}}},
			"web wants to change 3 files", "add /a\nupdate /b\ndelete /c"},
		{approvals.Change{Kind: approvals.CardOpened, Card: approvals.Card{Worker: "api", Kind: approvals.KindNetwork, Host: "example.com", Command: "network-access http://example.com:80"}},
			"api wants network access to example.com", "network-access http://example.com:80"},
		{approvals.Change{Kind: approvals.CardDeclined, Card: approvals.Card{Worker: "api"}, Why: "the file change item \"x\" was never started"},
			"api: a request was declined without asking", `the file change item "x" was never started`},
	} {
		title, body := Message(tc.ch)
		if title != tc.title || body != tc.body {
			t.Errorf("Message = %q / %q, want %q / %q", title, body, tc.title, tc.body)
		}
	}
}

type sent struct {
	mu    sync.Mutex
	notes []string
}

func (s *sent) send(title, body string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, title+"|"+body)
	return nil
}

func (s *sent) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notes...)
}

func TestBurstsAreCoalescedAndMarkupEscaped(t *testing.T) {
	t.Parallel()
	s := &sent{}
	n := New(s.send, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	for i := range 10 {
		cmd := "echo <b>" + strings.Repeat("x", i) + "</b> &"
		n.Notice(approvals.Change{Kind: approvals.CardOpened, Card: approvals.Card{Worker: "api", Kind: approvals.KindCommand, Command: cmd}})
	}
	n.Notice(approvals.Change{Kind: approvals.CardClosed}) // not notified
	deadline := time.Now().Add(5 * time.Second)
	for len(s.all()) < BurstSize+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * BurstWindow)
	got := s.all()
	if len(got) != BurstSize+1 {
		t.Fatalf("%d notifications for a burst of 10: %q", len(got), got)
	}
	if !strings.Contains(got[0], "echo &lt;b&gt;&lt;/b&gt; &amp;") {
		t.Errorf("markup not escaped: %q", got[0])
	}
	if got[BurstSize] != "7 more requests|api: 7" {
		t.Errorf("summary = %q", got[BurstSize])
	}
}
