package ui

import (
	"image/color"
	"strings"

	"fyne.io/fyne/v2"
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
