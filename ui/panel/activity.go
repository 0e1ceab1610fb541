package panel

import (
	"fmt"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"codexgate/approvals"
	"codexgate/supervisor"
	"codexgate/ui/panel/wire"
)

// activityView shows, while no card is open, each worker with its state,
// its current or last turn, and a box to start a new task. Every text in
// it comes escaped and capped from the supervisor's history.
type activityView struct {
	p        *Panel
	box      *fyne.Container
	scroll   *container.Scroll
	activity []supervisor.Activity
	entries  map[string]*widget.Entry // the task box of each worker, kept across redraws
	notes    map[string]*widget.Label // what became of each worker's last task
}

func newActivityView(p *Panel) *activityView {
	v := &activityView{p: p, box: container.NewVBox(), entries: map[string]*widget.Entry{}, notes: map[string]*widget.Label{}}
	v.scroll = container.NewVScroll(container.NewPadded(v.box))
	return v
}

// update shows a new state; it redraws only when the workers or their
// activity changed, and keeps what is being typed.
func (v *activityView) update(workers []supervisor.Status, activity []supervisor.Activity, workersChanged bool) {
	same := slices.EqualFunc(v.activity, activity, func(a, b supervisor.Activity) bool { return a.Worker == b.Worker && a.Seq == b.Seq })
	if same && !workersChanged && len(v.box.Objects) > 0 {
		return
	}
	v.activity = activity
	v.box.RemoveAll()
	title := widget.NewLabel("No cards waiting · what each worker is doing")
	title.TextStyle.Bold = true
	v.box.Add(title)
	if len(workers) == 0 {
		v.box.Add(wrappedLabel("No workers are configured: add a project folder to the config, and its worker shows here."))
		return
	}
	if !slices.ContainsFunc(activity, func(a supervisor.Activity) bool { return len(a.Turns) > 0 }) {
		v.box.Add(wrappedLabel("Nothing has happened yet. Give a worker a task below: its messages, the commands it runs and the files it changes show here."))
	}
	for _, w := range workers {
		v.box.Add(v.worker(w, wire.ActivityOf(activity, w.Name)))
	}
}

// worker is one worker's part: its state, its current or last turn, and
// its task box.
func (v *activityView) worker(st supervisor.Status, a supervisor.Activity) fyne.CanvasObject {
	var rows []fyne.CanvasObject
	subtitle := ""
	if st.LastError != "" {
		rows = append(rows, wrappedLabel("Last error: "+approvals.Escape(st.LastError, true)))
	}
	if t, ok := a.Last(); ok {
		subtitle = turnSummary(t)
		rows = append(rows, turnRows(t)...)
	}
	rows = append(rows, v.taskBox(st.Name), widget.NewSeparator())
	// The title is cut with an ellipsis rather than widening the view: the
	// whole last message is in the rows below.
	title := widget.NewLabel(wire.WorkerLine(st, a))
	title.TextStyle.Bold = true
	title.Truncation = fyne.TextTruncateEllipsis
	head := []fyne.CanvasObject{title}
	if subtitle != "" {
		sub := widget.NewLabel(subtitle)
		sub.Truncation = fyne.TextTruncateEllipsis
		head = append(head, sub)
	}
	return container.NewVBox(append(head, rows...)...)
}

// turnSummary is a turn's status and size in one line.
func turnSummary(t supervisor.Turn) string {
	status := "Turn " + t.Status
	if t.Status == supervisor.TurnWorking {
		status = "Turn in progress"
	}
	tokens := "tokens not reported"
	if t.Tokens > 0 {
		tokens = fmt.Sprintf("%d tokens", t.Tokens)
	}
	return fmt.Sprintf("%s · %s · %s · %s · %s", status,
		count(len(t.Messages), "message"), count(len(t.Commands), "command"), count(len(t.Files), "file change"), tokens)
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// turnRows lays out a turn: the task, what the agent said, the commands
// with their exit codes, the files changed, and codex's error.
func turnRows(t supervisor.Turn) []fyne.CanvasObject {
	var rows []fyne.CanvasObject
	if t.Prompt != "" {
		rows = append(rows, labelled("Task", t.Prompt))
	}
	for _, m := range t.Messages {
		rows = append(rows, labelled("Agent", m))
	}
	for _, c := range t.Commands {
		l := wrappedLabel("$ " + c.Command + "   " + commandOutcome(c))
		l.TextStyle.Monospace = true
		rows = append(rows, l)
	}
	for _, f := range t.Files {
		l := wrappedLabel(fmt.Sprintf("%-6s %s   %s", f.Kind, f.Path, f.Status))
		l.TextStyle.Monospace = true
		rows = append(rows, l)
	}
	if t.Omitted > 0 {
		rows = append(rows, wrappedLabel(fmt.Sprintf("… %d earlier items are not kept.", t.Omitted)))
	}
	if t.Error != "" {
		rows = append(rows, labelled("Error", t.Error))
	}
	return rows
}

// commandOutcome is how a command ended: its exit code, or codex's status.
func commandOutcome(c supervisor.Command) string {
	switch {
	case c.ExitCode != nil:
		return fmt.Sprintf("→ exit %d", *c.ExitCode)
	case c.Status == "inProgress" || c.Status == "":
		return "→ running"
	}
	return "→ " + c.Status
}

// labelled is "Name: text", the name in bold, the text wrapped.
func labelled(name, text string) fyne.CanvasObject {
	rt := widget.NewRichText(
		&widget.TextSegment{Text: name + ": ", Style: widget.RichTextStyle{Inline: true, TextStyle: fyne.TextStyle{Bold: true}}},
		&widget.TextSegment{Text: strings.TrimRight(text, "\n"), Style: widget.RichTextStyleInline},
	)
	rt.Wrapping = fyne.TextWrapWord
	return rt
}

func wrappedLabel(text string) *widget.Label {
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	return l
}

// taskBox is a worker's box to start a new task: Enter or Start sends it.
func (v *activityView) taskBox(worker string) fyne.CanvasObject {
	e := v.entries[worker]
	if e == nil {
		e = widget.NewEntry()
		e.SetPlaceHolder("A new task for " + worker + "…")
		v.entries[worker] = e
		v.notes[worker] = widget.NewLabel("")
	}
	start := widget.NewButton("Start", nil)
	start.Importance = widget.HighImportance
	send := func() { v.start(worker, e, start) }
	start.OnTapped = send
	e.OnSubmitted = func(string) { send() }
	note := v.notes[worker]
	note.Hidden = note.Text == ""
	return container.NewVBox(container.NewBorder(nil, nil, nil, start, e), note)
}

// start sends the task in e to the worker.
func (v *activityView) start(worker string, e *widget.Entry, start *widget.Button) {
	note := v.notes[worker]
	note.Show()
	text := e.Text
	if strings.TrimSpace(text) == "" {
		note.SetText("Write a task first.")
		return
	}
	start.Disable()
	note.SetText("Starting…")
	v.p.background(func() {
		turn, err := v.p.b.StartTask(worker, text)
		fyne.Do(func() {
			start.Enable()
			if err != nil {
				note.SetText("Not started: " + err.Error())
				return
			}
			e.SetText("")
			note.SetText("Started turn " + turn + ".")
		})
	})
}
