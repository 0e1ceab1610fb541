package panel

import (
	"image/color"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Diff colours, chosen to read on both light and dark themes.
var (
	colorAdded   = color.NRGBA{R: 0x2e, G: 0x9e, B: 0x44, A: 0xff}
	colorRemoved = color.NRGBA{R: 0xd7, G: 0x3a, B: 0x49, A: 0xff}
	colorHunk    = color.NRGBA{R: 0x1f, G: 0x7a, B: 0xc4, A: 0xff}
	colorFile    = color.NRGBA{R: 0x8a, G: 0x5c, B: 0xd1, A: 0xff}
	colorNotice  = color.NRGBA{R: 0xe0, G: 0x7b, B: 0x00, A: 0xff}
)

var (
	styleAdded   = &widget.CustomTextGridStyle{FGColor: colorAdded}
	styleRemoved = &widget.CustomTextGridStyle{FGColor: colorRemoved}
	styleHunk    = &widget.CustomTextGridStyle{FGColor: colorHunk}
	styleFile    = &widget.CustomTextGridStyle{FGColor: colorFile, TextStyle: fyne.TextStyle{Bold: true}}
	styleLabel   = &widget.CustomTextGridStyle{TextStyle: fyne.TextStyle{Bold: true}}
	styleNotice  = &widget.CustomTextGridStyle{FGColor: colorNotice, TextStyle: fyne.TextStyle{Bold: true}}
	styleWrap    = &widget.CustomTextGridStyle{FGColor: colorNotice}
)

// labelWidth is the width of the "name:" column of a card body.
const labelWidth = 11

// gridRows lays out a card's text, already escaped and capped by approvals,
// as monospaced rows: labelled lines, then the diff with added lines,
// removed lines, hunk headers and file headers in their colours. notice, if
// set, is a last line saying what is not shown.
func gridRows(body, notice string) []widget.TextGridRow {
	head, diff, hasDiff := strings.Cut(body, "\n\n")
	var rows []widget.TextGridRow
	for _, line := range strings.Split(strings.TrimSuffix(head, "\n"), "\n") {
		row := textRow(line, nil)
		if len(line) > labelWidth && line[0] != ' ' {
			for i := range labelWidth {
				row.Cells[i].Style = styleLabel
			}
		}
		rows = append(rows, row)
	}
	if hasDiff {
		rows = append(rows, widget.TextGridRow{})
		for _, line := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
			rows = append(rows, textRow(line, diffStyle(line)))
		}
	}
	if notice != "" {
		rows = append(rows, widget.TextGridRow{}, textRow(notice, styleNotice))
	}
	return rows
}

func diffStyle(line string) widget.TextGridStyle {
	switch {
	case strings.HasPrefix(line, "*** "):
		return styleFile
	case strings.HasPrefix(line, "@@"):
		return styleHunk
	case strings.HasPrefix(line, "+"):
		return styleAdded
	case strings.HasPrefix(line, "-"):
		return styleRemoved
	}
	return nil
}

func textRow(line string, style widget.TextGridStyle) widget.TextGridRow {
	cells := make([]widget.TextGridCell, 0, len(line))
	for _, r := range line {
		cells = append(cells, widget.TextGridCell{Rune: r})
	}
	return widget.TextGridRow{Cells: cells, Style: style}
}

// wrapMark ends a row that goes on in the next one, and contMark starts
// that next one: no text from codex can begin a row of its own, where it
// could pass for a field of the card ("command:") or a line of the diff.
const (
	wrapMark = '↩'
	contMark = '↪'
)

// minColumns keeps a very narrow view readable: it scrolls instead.
const minColumns = 16

// wrapRows breaks every row longer than cols into rows of cols cells, the
// last cell of each broken part being wrapMark and the first cell of each
// part after the first contMark; the parts keep their row's and their
// cells' styles.
func wrapRows(rows []widget.TextGridRow, cols int) []widget.TextGridRow {
	cols = max(cols, 3)
	out := make([]widget.TextGridRow, 0, len(rows))
	for _, r := range rows {
		cells, lead := r.Cells, []widget.TextGridCell(nil)
		for len(lead)+len(cells) > cols {
			n := cols - 1 - len(lead)
			part := append(append(lead, cells[:n:n]...), widget.TextGridCell{Rune: wrapMark, Style: styleWrap})
			out = append(out, widget.TextGridRow{Cells: part, Style: r.Style})
			cells, lead = cells[n:], []widget.TextGridCell{{Rune: contMark, Style: styleWrap}}
		}
		if lead != nil {
			cells = append(lead, cells...)
		}
		out = append(out, widget.TextGridRow{Cells: cells, Style: r.Style})
	}
	return out
}

// wrapped is a TextGrid in a vertical scroll whose rows are wrapped at the
// width of the view, so that no text lies past its right edge; it wraps
// again when its width changes. It is a fyne.Layout of its own box, which is
// what goes into a window. It belongs to Fyne's goroutine.
type wrapped struct {
	rows   []widget.TextGridRow // unbroken
	cols   int                  // the width rows are wrapped at; 0: not yet
	grid   *widget.TextGrid
	scroll *container.Scroll
	box    *fyne.Container
	// seen is called once, when the last row has been in view: only then
	// has the whole text been on screen. nil once called.
	seen func()
}

func newWrapped() *wrapped {
	w := &wrapped{grid: widget.NewTextGrid()}
	// The grid scrolls inside a container of its own, which clips it.
	w.grid.Scroll = fyne.ScrollNone
	w.scroll = container.NewVScroll(w.grid)
	w.scroll.OnScrolled = func(fyne.Position) { w.checkSeen() }
	w.box = container.New(w, w.scroll)
	return w
}

// setRows shows rows, wrapped at the current width; seen (if not nil) is
// called once their last row has been in view.
func (w *wrapped) setRows(rows []widget.TextGridRow, seen func()) {
	w.rows, w.cols, w.seen = rows, 0, seen
	w.reflow(w.box.Size().Width)
	w.checkSeen()
}

// checkSeen calls seen if the last row is in view now. Before the first
// layout nothing is in view.
func (w *wrapped) checkSeen() {
	if w.seen == nil || w.cols == 0 || w.scroll.Size().Height <= 0 {
		return
	}
	if w.scroll.Offset.Y+w.scroll.Size().Height >= w.grid.MinSize().Height-1 {
		seen := w.seen
		w.seen = nil
		seen()
	}
}

// cellSize is the size of one monospaced cell, measured as TextGrid does.
func (w *wrapped) cellSize() fyne.Size {
	return fyne.MeasureText("M", w.grid.Theme().Size(theme.SizeNameText), fyne.TextStyle{Monospace: true})
}

func (w *wrapped) reflow(width float32) {
	if width <= 0 {
		w.grid.Rows = w.rows
		w.grid.Refresh()
		return
	}
	cols := max(int(width/w.cellSize().Width), minColumns)
	if cols == w.cols {
		return
	}
	w.cols = cols
	w.grid.Rows = wrapRows(w.rows, cols)
	w.grid.Refresh()
	w.grid.Resize(w.grid.MinSize().Max(w.scroll.Size()))
	w.scroll.Refresh()
}

// Layout is fyne.Layout: the scroll fills the box, and rows are wrapped at
// its width.
func (w *wrapped) Layout(_ []fyne.CanvasObject, size fyne.Size) {
	w.scroll.Resize(size)
	w.reflow(size.Width)
	w.checkSeen()
}

// MinSize is fyne.Layout: a few columns and rows, so that the window can
// shrink; what does not fit is wrapped, then scrolled.
func (w *wrapped) MinSize([]fyne.CanvasObject) fyne.Size {
	cell := w.cellSize()
	return fyne.NewSize(cell.Width*minColumns, cell.Height*3)
}
