package panel

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"codexgate/approvals"
	"codexgate/approvals/approvalstest"
	"codexgate/supervisor"
	"codexgate/ui/panel/wire"
)

// backend is a Backend over a real approvals queue.
type backend struct {
	q       *approvals.Queue
	mu      sync.Mutex
	answers []approvals.Answer
}

func newBackend(t *testing.T, limits approvals.Limits) *backend {
	return &backend{q: approvals.NewQueue(approvals.Options{Audit: &approvalstest.Audit{}, Limits: limits})}
}

func (b *backend) open(t *testing.T, id, method, params, item string) {
	req, _ := approvalstest.Request(t, "api", 1, id, method, params, item)
	open := len(b.q.Cards())
	b.q.Open(req)
	if len(b.q.Cards()) != open+1 {
		t.Fatalf("request %s was declined", id)
	}
}

func (b *backend) state(settle time.Duration) wire.State {
	return wire.State{Cards: b.q.Cards(), Workers: b.workers(), SettleDelay: settle}
}

func (b *backend) Full(id string, _ int) (string, approvals.Card, error) { return b.q.Full(id) }
func (b *backend) Shown(id string, rev int) error {
	return b.q.MarkShownInFull(id, rev, approvals.ByPanel)
}
func (b *backend) Answer(id string, rev int, d approvals.Decision, values map[string]string) (string, error) {
	a := approvals.Answer{Card: id, Revision: rev, Decision: d, Values: values, By: approvals.ByPanel}
	b.mu.Lock()
	b.answers = append(b.answers, a)
	b.mu.Unlock()
	_, err := b.q.Answer(a)
	return "sent", err
}
func (b *backend) answered() []approvals.Answer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]approvals.Answer(nil), b.answers...)
}

func (b *backend) workers() []supervisor.Status {
	return []supervisor.Status{{Name: "api", Cwd: "/w", State: supervisor.StateWaiting}}
}
func (b *backend) StartTask(string, string) (string, error) { return "", nil }
func (b *backend) Worker(string, string) error              { return errors.New("no") }
func (b *backend) Ready()                                   {}

const (
	commandParams = `{"threadId":"T","turnId":"U","itemId":"c1","startedAtMs":1,"reason":"Remove the stale fixture","command":"/bin/bash -lc 'rm a.txt'","cwd":"/home/me/api","commandActions":[{"type":"unknown","command":"rm a.txt"}],"proposedExecpolicyAmendment":["rm","a.txt"],"availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["rm","a.txt"]}},"decline","cancel"]}`
	rloParams     = `{"threadId":"T","turnId":"U","itemId":"c2","startedAtMs":1,"command":"/bin/bash -lc 'mv notes.txt invoice\u202efdp.exe'","cwd":"/home/me/api","availableDecisions":["accept","decline","cancel"]}`
	patchParams   = `{"threadId":"T","turnId":"U","itemId":"p1","startedAtMs":1,"reason":"Fix the greeting","grantRoot":null}`
)

// home is where the fixtures' files are said to be. A file change is shown
// as it will land, read from disk, so the files it updates are written into
// a directory of the test's own (workspace) and the item names them there.
const home = "/home/me/api"

// workspace writes the files that patchItem and bigPatch update, with the
// content their diffs apply to, and returns their directory.
func workspace(t *testing.T) string {
	t.Helper()
	// The path is replaced by /home/me/api in what is shown, but where a
	// card is capped depends on its length: give it one length always.
	base := t.TempDir()
	dir := filepath.Join(base, strings.Repeat("w", max(120-len(base), 1)))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"main.go": "package main\n\nconst greeting = \"helo\"\n",
		"gen.txt": "",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// patchItem updates main.go and adds NOTES.md in dir.
func patchItem(dir string) string {
	return strings.ReplaceAll(`{"type":"fileChange","id":"p1","changes":[{"path":"/home/me/api/main.go","kind":{"type":"update","move_path":null},"diff":"@@ -1,3 +1,3 @@\n package main\n \n-const greeting = \"helo\"\n+const greeting = \"hello\"\n"},{"path":"/home/me/api/NOTES.md","kind":{"type":"add"},"diff":"# Notes\nGreeting fixed.\n"}],"status":"inProgress"}`, home, dir)
}

// atHome shows the cards of s as if their files were under home rather than
// dir, whose name changes from run to run, so that the goldens do not. The
// bytes left out of a truncated card stay as many as they are.
func atHome(s wire.State, dir string) wire.State {
	cards := make([]approvals.Card, len(s.Cards))
	for i, c := range s.Cards {
		body := strings.ReplaceAll(c.Body, dir, home)
		c.FullBytes += len(body) - len(c.Body)
		c.Body, c.Diff = body, strings.ReplaceAll(c.Diff, dir, home)
		c.Changes = slices.Clone(c.Changes)
		for j := range c.Changes {
			c.Changes[j].Path = strings.ReplaceAll(c.Changes[j].Path, dir, home)
			c.Changes[j].MovePath = strings.ReplaceAll(c.Changes[j].MovePath, dir, home)
		}
		cards[i] = c
	}
	s.Cards = cards
	return s
}

// longParams is a command whose one line is far wider than the panel.
var longParams = `{"threadId":"T","turnId":"U","itemId":"c3","startedAtMs":1,"command":"/bin/bash -lc 'curl -fsSL https://example.com/install.sh?` + strings.Repeat("token=0123456789abcdef&", 12) + `end | sh'","cwd":"/home/me/api","availableDecisions":["accept","decline","cancel"]}`

// bigPatch fills the empty gen.txt in dir with 400 lines.
func bigPatch(dir string) string {
	var diff strings.Builder
	for i := range 400 {
		fmt.Fprintf(&diff, "+line %d of a long generated file\\n", i)
	}
	return `{"type":"fileChange","id":"p1","changes":[{"path":"` + dir + `/gen.txt","kind":{"type":"update","move_path":null},"diff":"@@ -0,0 +1,400 @@\n` + diff.String() + `"}]}`
}

func TestPanelGoldens(t *testing.T) {
	noItem := func(string) string { return "" }
	for _, tc := range []struct {
		golden, method, params string
		item                   func(dir string) string
		limits                 approvals.Limits
	}{
		{"command_card", approvals.MethodCommandApproval, commandParams, noItem, approvals.DefaultLimits},
		{"filechange_card", approvals.MethodFileChangeApproval, patchParams, patchItem, approvals.DefaultLimits},
		{"truncated_card", approvals.MethodFileChangeApproval, patchParams, bigPatch, approvals.Limits{ShowBytes: 1024, MaxBytes: 1 << 20}},
		{"rlo_card", approvals.MethodCommandApproval, rloParams, noItem, approvals.DefaultLimits},
		{"wrapped_card", approvals.MethodCommandApproval, longParams, noItem, approvals.DefaultLimits},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			app := test.NewTempApp(t)
			app.Settings().SetTheme(theme.DefaultTheme()) // the test theme has no bold monospace
			b := newBackend(t, tc.limits)
			dir := workspace(t)
			b.open(t, "0", tc.method, tc.params, tc.item(dir))
			p := newTestPanel(app, b)
			p.Update(atHome(b.state(0), dir))
			p.win.Resize(fyne.NewSize(980, 620))
			for _, o := range p.buttons.Objects {
				if right := o.Position().X + o.Size().Width; right > p.buttons.Size().Width {
					t.Errorf("button %q ends at %v, past the edge at %v", o.(*widget.Button).Text, right, p.buttons.Size().Width)
				}
			}
			if *update {
				writeGolden(t, tc.golden+".png", p.win.Canvas().Capture())
			}
			test.AssertRendersToImage(t, tc.golden+".png", p.win.Canvas())
		})
	}
}

var update = flag.Bool("update", false, "write the goldens under testdata/ (and the README's screenshot) from what is rendered")

// screenshot is the golden that the README shows as docs/panel.png.
const screenshot = "filechange_card.png"

func writeGolden(t *testing.T, name string, img image.Image) {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join("testdata", name)}
	if name == screenshot {
		paths = append(paths, filepath.Join("..", "..", "docs", "panel.png"))
	}
	for _, path := range paths {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPanelRowsAreColouredAndEscaped(t *testing.T) {
	b := newBackend(t, approvals.DefaultLimits)
	dir := workspace(t)
	b.open(t, "0", approvals.MethodFileChangeApproval, patchParams, patchItem(dir))
	b.open(t, "1", approvals.MethodCommandApproval, rloParams, "")
	cards := b.q.Cards()
	rows := gridRows(cards[0].Body, "")
	styles := map[string]widget.TextGridStyle{}
	for _, r := range rows {
		styles[rowText(r)] = r.Style
	}
	for line, want := range map[string]widget.TextGridStyle{
		`+const greeting = "hello"`: styleAdded,
		`-const greeting = "helo"`:  styleRemoved,
		"@@ -1,3 +1,3 @@":           styleHunk,
		"*** update " + dir + "/main.go (replaces an existing file)": styleFile,
		"+# Notes": styleAdded,
	} {
		if styles[line] != want {
			t.Errorf("row %q has style %v", line, styles[line])
		}
	}
	for _, r := range gridRows(cards[1].Body, "") {
		for _, c := range r.Cells {
			if c.Rune == '\u202e' {
				t.Fatal("the right-to-left override reached the grid")
			}
		}
	}
	if !strings.Contains(cards[1].Body, `invoice\u{202e}fdp.exe`) {
		t.Errorf("body %q", cards[1].Body)
	}
}

func rowText(r widget.TextGridRow) string {
	var b strings.Builder
	for _, c := range r.Cells {
		b.WriteRune(c.Rune)
	}
	return b.String()
}

// TestLongRuleKeepsThePanelOnScreen: a button naming a long rule is cut
// with a mark, so that it neither widens the window past the screen nor
// pushes the card's text past its edge; the rule is in the card whole.
func TestLongRuleKeepsThePanelOnScreen(t *testing.T) {
	app := test.NewTempApp(t)
	b := newBackend(t, approvals.DefaultLimits)
	rule := `"echo",` + strings.Repeat(`"this-is-a-long-argument",`, 8) + `"end"`
	params := `{"threadId":"T","turnId":"U","itemId":"c4","startedAtMs":1,"command":"/bin/bash -lc 'echo` + strings.Repeat(" this-is-a-long-argument", 8) + ` end'","cwd":"/home/me/api","proposedExecpolicyAmendment":[` + rule + `],"availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":[` + rule + `]}},"decline","cancel"]}`
	b.open(t, "0", approvals.MethodCommandApproval, params, "")
	p := newTestPanel(app, b)
	p.Update(b.state(0))
	if width := p.win.Content().MinSize().Width; width > 980 {
		t.Errorf("the panel needs %v wide, more than its 980", width)
	}
	btn := p.buttons.Objects[1].(*widget.Button)
	if !strings.HasPrefix(btn.Text, "Allow, and always allow commands starting with: echo this-is-a-long-argument") || !strings.HasSuffix(btn.Text, " …") {
		t.Errorf("the rule's button says %q", btn.Text)
	}
	if !strings.Contains(p.current.Body, "this-is-a-long-argument end") {
		t.Errorf("the card does not show the rule whole:\n%s", p.current.Body)
	}
}

func TestPanelButtonsFollowTheCard(t *testing.T) {
	app := test.NewTempApp(t)
	b := newBackend(t, approvals.Limits{ShowBytes: 1024, MaxBytes: 1 << 20})
	b.open(t, "0", approvals.MethodCommandApproval, commandParams, "")
	p := newTestPanel(app, b)
	p.Update(b.state(time.Hour))
	var labels []string
	for _, o := range p.buttons.Objects {
		btn := o.(*widget.Button)
		labels = append(labels, btn.Text)
		if strings.HasPrefix(btn.Text, "Allow") != btn.Disabled() {
			t.Errorf("%q disabled = %v during the settle delay", btn.Text, btn.Disabled())
		}
	}
	if want := "Allow this once|Allow, and always allow commands starting with: rm a.txt|Deny (the turn goes on)|Deny and stop the turn"; strings.Join(labels, "|") != want {
		t.Errorf("buttons %q, want %q", labels, want)
	}
	// Deny is never held back.
	test.Tap(p.buttons.Objects[2].(*widget.Button))
	approvalstest.WaitFor(t, func() bool { return len(b.q.Cards()) == 0 })
	if a := b.answered()[0]; a.Decision != approvals.DecisionDeny || a.By != approvals.ByPanel || a.Revision != 1 {
		t.Errorf("answer %+v", a)
	}

	// A truncated card can be allowed only after Show all.
	b.open(t, "1", approvals.MethodFileChangeApproval, patchParams, bigPatch(workspace(t)))
	p.Update(b.state(0))
	allow := p.buttons.Objects[0].(*widget.Button)
	if !allow.Disabled() || !p.showAll.Visible() {
		t.Fatal("a truncated card can be allowed before Show all")
	}
	full := func() fyne.Window {
		for _, w := range app.Driver().AllWindows() {
			if strings.Contains(w.Title(), " · all ") {
				return w
			}
		}
		return nil
	}
	test.Tap(p.showAll)
	approvalstest.WaitFor(t, func() bool { return full() != nil })
	// Opened, but not read to its end: not shown in full yet.
	if b.q.Cards()[0].ShownInFull {
		t.Fatal("Show all counted the card shown before its last row was in view")
	}
	full().Content().(*fyne.Container).Objects[0].(*container.Scroll).ScrollToBottom()
	approvalstest.WaitFor(t, func() bool { return b.q.Cards()[0].ShownInFull })
	// Ctrl+W closes the Show all window, as it closes the panel.
	full().Canvas().(fyne.Shortcutable).TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyW, Modifier: fyne.KeyModifierControl})
	approvalstest.WaitFor(t, func() bool { return full() == nil })
	p.Update(b.state(0))
	allow = p.buttons.Objects[0].(*widget.Button)
	if allow.Disabled() {
		t.Fatal("allow stays disabled after Show all")
	}
	test.Tap(allow)
	approvalstest.WaitFor(t, func() bool { return len(b.q.Cards()) == 0 })
}

func TestButtonLabelsNameWhatTheyGrant(t *testing.T) {
	b := newBackend(t, approvals.DefaultLimits)
	b.open(t, "0", approvals.MethodFileChangeApproval, `{"threadId":"T","turnId":"U","itemId":"p1","startedAtMs":1,"grantRoot":"/srv/data"}`, patchItem(workspace(t)))
	b.open(t, "1", approvals.MethodPermissions, `{"threadId":"T","turnId":"U","itemId":"i","cwd":"/w","permissions":{"network":{"enabled":true},"fileSystem":{"write":["/opt/out"]}}}`, "")
	cards := b.q.Cards()
	if got := cards[0].DecisionLabel(approvals.DecisionAllow); got != "Allow and grant writes under /srv/data" {
		t.Errorf("grantRoot allow: %q", got)
	}
	if got := cards[1].DecisionLabel(approvals.DecisionAllow); got != "Allow and grant network access, write /opt/out" {
		t.Errorf("permissions allow: %q", got)
	}
}

func TestPanelFormsSendTheirValues(t *testing.T) {
	app := test.NewTempApp(t)
	b := newBackend(t, approvals.DefaultLimits)
	b.open(t, "0", approvals.MethodUserInput,
		`{"threadId":"T","turnId":"U","itemId":"q1","questions":[{"id":"db","header":"Database","question":"Which one?","isOther":false,"isSecret":false,"options":[{"label":"Postgres","description":""},{"label":"SQLite","description":""}]}]}`, "")
	p := newTestPanel(app, b)
	p.Update(b.state(0))
	allow := p.buttons.Objects[0].(*widget.Button)
	// Nothing chosen: the answer is refused and the card stays.
	test.Tap(allow)
	approvalstest.WaitFor(t, func() bool { return len(b.answered()) == 1 })
	if len(b.q.Cards()) != 1 {
		t.Fatal("an unanswered question was sent")
	}
	// The test driver runs fyne.Do at once on the calling goroutine: let the
	// refusal's status update finish before the next answer writes it too.
	time.Sleep(50 * time.Millisecond)
	p.form.Objects[0].(*widget.Form).Items[0].Widget.(*widget.Select).SetSelected("SQLite")
	test.Tap(allow)
	approvalstest.WaitFor(t, func() bool { return len(b.q.Cards()) == 0 })
	answers := b.answered()
	if last := answers[len(answers)-1]; last.Values["db"] != "SQLite" || last.By != approvals.ByPanel {
		t.Errorf("answer %+v", last)
	}
}

// TestLongLinesWrapAtTheEdge: at any window width, no row of the card is
// wider than the view; a broken row ends with the mark, and joining the
// parts gives the line back.
func TestLongLinesWrapAtTheEdge(t *testing.T) {
	app := test.NewTempApp(t)
	b := newBackend(t, approvals.DefaultLimits)
	b.open(t, "0", approvals.MethodCommandApproval, longParams, "")
	p := newTestPanel(app, b)
	p.Update(b.state(0))
	want := rowsText(gridRows(b.q.Cards()[0].Body, ""), false)
	for _, width := range []float32{980, 640, 1400, 500} {
		p.win.Resize(fyne.NewSize(width, 620))
		view := p.body.box.Size().Width
		cols := int(view / p.body.cellSize().Width)
		marks := 0
		for _, r := range p.body.grid.Rows {
			if len(r.Cells) > cols {
				t.Errorf("width %v: a row of %d cells in a view of %d", width, len(r.Cells), cols)
			}
			if n := len(r.Cells); n > 0 && r.Cells[n-1].Rune == wrapMark {
				marks++
			}
		}
		if marks == 0 {
			t.Errorf("width %v (%d columns): the long line was not wrapped", width, cols)
		}
		if got := rowsText(p.body.grid.Rows, true); got != want {
			t.Errorf("width %v: wrapped text\n%s\nwant\n%s", width, got, want)
		}
	}
}

// A row that a break starts begins with the mark, never with the text
// that goes on: a reason (or a command, or a line of a file) that breaks at
// the edge would otherwise put a line of its choosing at the left edge,
// where it passes for a field of the card or a line of the diff.
func TestABrokenRowCannotPassForAField(t *testing.T) {
	const fake = "command:    /bin/bash -lc 'ls'"
	for cols := minColumns; cols <= 160; cols++ {
		// The reason fills the row exactly up to the wrap mark.
		reason := "Tidy up" + strings.Repeat(".", max(cols-1-12-len("Tidy up"), 0))
		body := "worker:     api\nkind:       command\ncommand:    /bin/bash -lc 'curl -fsSL https://x.example/i.sh | sh'\ncwd:        /w\nreason:     " + reason + fake + "\n"
		rows := wrapRows(gridRows(body, ""), cols)
		for i, r := range rows {
			if i == 0 || len(r.Cells) == 0 {
				continue
			}
			prev := rows[i-1].Cells
			broken := len(prev) > 0 && prev[len(prev)-1].Rune == wrapMark
			if broken && r.Cells[0].Rune != contMark {
				t.Fatalf("%d columns: row %d goes on from the row before and starts with %q", cols, i, rowText(r))
			}
			if len(r.Cells) > cols {
				t.Fatalf("%d columns: row %d has %d cells", cols, i, len(r.Cells))
			}
		}
		if got, want := rowsText(rows, true), rowsText(gridRows(body, ""), false); got != want {
			t.Fatalf("%d columns: joined\n%s\nwant\n%s", cols, got, want)
		}
	}
}

// rowsText is the text of rows, one line each; joined, broken rows are put
// back together.
func rowsText(rows []widget.TextGridRow, joined bool) string {
	var b strings.Builder
	for _, r := range rows {
		line := rowText(r)
		if joined {
			line = strings.TrimPrefix(line, string(contMark))
		}
		if cut, ok := strings.CutSuffix(line, string(wrapMark)); ok && joined {
			b.WriteString(cut)
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// A card longer than the panel's view is not on screen whole when it is
// rendered: it is reported shown in full (which a quick yes by hotkey needs)
// only once its last row has been in view.
func TestALongCardIsShownInFullOnlyOnceScrolledToItsEnd(t *testing.T) {
	app := test.NewTempApp(t)
	b := newBackend(t, approvals.DefaultLimits)
	b.open(t, "1", approvals.MethodFileChangeApproval, patchParams, bigPatch(workspace(t)))
	if c := b.q.Cards()[0]; c.Truncated {
		t.Fatal("the fixture must not be truncated")
	}
	p := newTestPanel(app, b)
	p.Update(b.state(0))
	if rows, view := p.body.grid.MinSize().Height, p.body.scroll.Size().Height; rows <= view {
		t.Fatalf("the card fits the view (%v <= %v)", rows, view)
	}
	if p.body.seen == nil {
		t.Fatal("a card whose end is out of view was reported shown in full")
	}
	p.body.scroll.ScrollToBottom()
	approvalstest.WaitFor(t, func() bool { return b.q.Cards()[0].ShownInFull })
}

// newTestPanel is a panel whose calls to codexgate run in place: the test
// driver runs fyne.Do on the calling goroutine, so a call left to run
// beside the test would touch widgets beside it.
func newTestPanel(app fyne.App, b Backend) *Panel {
	p := New(app, b)
	p.background = func(f func()) { f() }
	return p
}
