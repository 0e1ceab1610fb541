package approvals

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/bidi"
)

// blankMax is the longest run of blanks shown as it is. A longer run
// inside a line is shown as one marker with its count, so that no run of
// spaces, tabs or invisible code points can push the rest of a line out of
// view.
const blankMax = 8

// marksMax is the most combining marks shown stacked on one character, as
// many as real text has. More are escaped: a tall stack of marks is drawn
// over the lines above and below and covers them.
const marksMax = 4

// escapeMode says which line structure a text keeps.
type escapeMode int

const (
	oneLine   escapeMode = iota // newlines and tabs are escaped
	multiLine                   // newlines and tabs are kept
	// diffLines is multiLine, and the indentation of each line after its
	// first column (+, - or space) is kept as it is, however long.
	diffLines
)

// Escape returns s as a person may safely see it: every code point that
// does not show as itself (controls and ANSI escapes, format characters
// such as bidi controls and zero-width marks, private-use, unassigned and
// default-ignorable code points, variation selectors, line and paragraph
// separators, spaces other than U+0020) is shown as a visible escape such as
// \u{202e}, invalid UTF-8 as \x{ff}, a run of more than 8 blanks
// (spaces, tabs and such code points) as one marker such as ⟨15 tabs⟩, and
// the combining marks past the fourth on one character as escapes too.
// Newlines and tabs are kept when multiline is set, and escaped otherwise.
func Escape(s string, multiline bool) string {
	if multiline {
		return escape(s, multiLine)
	}
	return escape(s, oneLine)
}

func escape(s string, mode escapeMode) string {
	if isPlain(s, mode) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	plain := 0 // start of the run of bytes shown as they are
	marks := 0 // combining marks on the current base
	lineStart := true
	for i := 0; i < len(s); {
		if lineStart && mode == diffLines {
			i += indentLen(s[i:])
			lineStart = false
			continue
		}
		c := s[i]
		if c > ' ' && c < 0x7f {
			marks = 0
			i++
			continue
		}
		if c == '\n' && mode != oneLine {
			marks = 0
			i++
			lineStart = true
			continue
		}
		n, count := blankRun(s[i:], mode)
		if n == 0 { // a code point that shows as itself
			r, size := utf8.DecodeRuneInString(s[i:])
			if !unicode.In(r, unicode.Mn, unicode.Me) {
				marks = 0
			} else if marks++; marks > marksMax {
				b.WriteString(s[plain:i])
				writeEscape(&b, r)
				plain = i + size
			}
			i += size
			continue
		}
		marks = 0
		run := s[i : i+n]
		if count <= blankMax && !needsEscape(run, mode) {
			i += n
			continue
		}
		b.WriteString(s[plain:i])
		if count > blankMax {
			writeMarker(&b, run, count)
		} else {
			writeEscaped(&b, run, mode)
		}
		i += n
		plain = i
	}
	b.WriteString(s[plain:])
	return b.String()
}

// isPlain reports whether s needs no escaping: the fast path for the
// printable ASCII that most commands and diffs are.
func isPlain(s string, mode escapeMode) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ':
			if run++; run > blankMax {
				return false
			}
			continue
		case c == '\n' && mode != oneLine:
		case c < 0x20 || c >= 0x7f:
			return false
		}
		run = 0
	}
	return true
}

// indentLen is the length of a diff line's first column and the spaces and
// tabs that follow it.
func indentLen(s string) int {
	if s == "" || s[0] != '+' && s[0] != '-' && s[0] != ' ' {
		return 0
	}
	n := 1
	for n < len(s) && (s[n] == ' ' || s[n] == '\t') {
		n++
	}
	return n
}

// blankRun measures the run of blanks at the start of s: its length in
// bytes and in code points (an invalid byte counts as one). A blank is a
// space, a tab, or anything that does not show as itself, and a combining
// mark within the run; a newline ends the run unless it is escaped too.
func blankRun(s string, mode escapeMode) (n, count int) {
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		// A combining mark on a blank is part of the run: a space under a
		// small accent is still a blank that pushes the rest of a line.
		if !blank(r, size, mode) && (n == 0 || !unicode.In(r, unicode.Mn, unicode.Me)) {
			break
		}
		n += size
		count++
	}
	return n, count
}

func blank(r rune, size int, mode escapeMode) bool {
	switch {
	case r == ' ', r == '\t':
		return true
	case r == '\n':
		return mode == oneLine
	case r == utf8.RuneError && size == 1:
		return true
	}
	return hidden(r)
}

// needsEscape reports whether a short run of blanks has anything but the
// spaces (and, in multiline text, tabs) that are shown as they are.
func needsEscape(run string, mode escapeMode) bool {
	for i := 0; i < len(run); i++ {
		if run[i] != ' ' && (run[i] != '\t' || mode == oneLine) {
			return true
		}
	}
	return false
}

// writeEscaped writes a short run of blanks, each code point as itself or
// as its escape.
func writeEscaped(b *strings.Builder, run string, mode escapeMode) {
	for i := 0; i < len(run); {
		r, size := utf8.DecodeRuneInString(run[i:])
		switch {
		case r == ' ', r == '\t' && mode != oneLine:
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		default:
			writeEscape(b, kindOf(r, size, run[i]))
		}
		i += size
	}
}

// kindOf is r, or for an invalid byte c, -1-c.
func kindOf(r rune, size int, c byte) rune {
	if r == utf8.RuneError && size == 1 {
		return -1 - rune(c)
	}
	return r
}

// writeEscape writes the visible escape of a code point, \u{202e}, or of
// an invalid byte (a kind below 0), \x{ff}.
func writeEscape(b *strings.Builder, kind rune) {
	if kind < 0 {
		fmt.Fprintf(b, `\x{%02x}`, -1-kind)
		return
	}
	b.WriteString(`\u{`)
	b.WriteString(strconv.FormatInt(int64(kind), 16))
	b.WriteByte('}')
}

// markerKinds is how many kinds of blank a marker names at most.
const markerKinds = 4

// writeMarker writes a long run of blanks as one marker: ⟨15 tabs⟩,
// ⟨30 spaces⟩, ⟨30 blanks⟩ for spaces and tabs, and, when the run holds
// anything else, the kinds it holds: ⟨40 blanks: spaces, \u{34f}⟩.
func writeMarker(b *strings.Builder, run string, count int) {
	var kinds []rune
	more := false
	for i := 0; i < len(run); {
		r, size := utf8.DecodeRuneInString(run[i:])
		kind := kindOf(r, size, run[i])
		i += size
		switch {
		case slices.Contains(kinds, kind):
		case len(kinds) == markerKinds:
			more = true
		default:
			kinds = append(kinds, kind)
		}
	}
	spaces, tabs := slices.Contains(kinds, ' '), slices.Contains(kinds, '\t')
	fmt.Fprintf(b, "⟨%d ", count)
	switch {
	case len(kinds) == 1 && spaces:
		b.WriteString("spaces")
	case len(kinds) == 1 && tabs:
		b.WriteString("tabs")
	case len(kinds) == 2 && spaces && tabs:
		b.WriteString("blanks")
	default:
		b.WriteString("blanks: ")
		for i, k := range kinds {
			if i > 0 {
				b.WriteString(", ")
			}
			switch k {
			case ' ':
				b.WriteString("spaces")
			case '\t':
				b.WriteString("tabs")
			default:
				writeEscape(b, k)
			}
		}
		if more {
			b.WriteString(", …")
		}
	}
	b.WriteString("⟩")
}

// blankLetters are code points that show as nothing, or as a space, and
// that the unicode tables do not list as default-ignorable: the braille
// blank, the Khitan filler (default-ignorable since Unicode 13, but
// missing from Go's Other_Default_Ignorable_Code_Point) and the musical
// null notehead (a symbol drawn as nothing).
var blankLetters = &unicode.RangeTable{
	R16: []unicode.Range16{{Lo: 0x2800, Hi: 0x2800, Stride: 1}},
	R32: []unicode.Range32{{Lo: 0x16fe4, Hi: 0x16fe4, Stride: 1}, {Lo: 0x1d159, Hi: 0x1d159, Stride: 1}},
}

// hidden reports whether r does not show as itself, and so is escaped:
// controls (Cc), format characters (Cf: bidi controls, zero-width marks,
// soft hyphen, tags), private use (Co), surrogates (Cs), unassigned code
// points (Cn: nothing to show, and a later Unicode may give them any
// shape), line and paragraph separators (Zl, Zp), spaces other than U+0020
// (Zs), and the letters, marks and symbols that are default-ignorable
// (U+034F, U+115F, U+1160, U+17B4/5, U+3164, U+FFA0, ...), variation
// selectors (U+180B–U+180D, U+180F, U+FE00–U+FE0F, U+E0100–U+E01EF) or
// blank (U+2800).
func hidden(r rune) bool {
	switch {
	case r < 0x7f:
		return r < 0x20 // C0, ESC among them
	case r <= 0x9f: // DEL, C1
		return true
	case r == utf8.RuneError: // a real U+FFFD hides what it replaced
		return true
	case unicode.IsLetter(r), unicode.IsNumber(r), unicode.IsPunct(r), unicode.IsSymbol(r):
		return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, blankLetters)
	case unicode.IsMark(r):
		return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector, blankLetters)
	}
	return true // C, Z and unassigned
}

// hostLine is a host name as a person may safely compare it: printable
// ASCII as it is, and every other code point (a space, a Cyrillic а that
// looks like a Latin a) or invalid byte as its escape.
func hostLine(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r > ' ' && r < 0x7f {
			b.WriteRune(r)
		} else {
			writeEscape(&b, kindOf(r, size, s[i]))
		}
		i += size
	}
	return b.String()
}

// Cap cuts s to at most limit bytes at a rune boundary, preferring the end
// of a line, and reports whether it cut.
func Cap(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl > cut/2 {
		cut = nl + 1
	}
	return s[:cut], true
}

// OneLine is s, as codex or a worker wrote it, escaped and cut to its first
// line of at most limit bytes: for labels, menus and one-line messages.
func OneLine(s string, limit int) string { return FirstLine(Escape(s, false), limit) }

// FirstLine is the first line of an escaped text, capped to limit bytes,
// for labels and notifications. When the text has more lines it says how
// many: "rm a.txt … (+3 lines)".
func FirstLine(s string, limit int) string { return FirstLines(s, 1, limit) }

// FirstLines is the first n lines of an escaped text, capped together to
// limit bytes, for notifications; what is left out is marked as FirstLine
// marks it: "… (+3 lines)" for whole lines, "…" for the end of a line.
func FirstLines(s string, n, limit int) string {
	head, rest := strings.TrimSuffix(s, "\n"), ""
	for i, at := 0, 0; i < n; i++ {
		nl := strings.IndexByte(s[at:], '\n')
		if nl < 0 {
			break
		}
		if at += nl + 1; i == n-1 {
			head, rest = s[:at-1], strings.TrimSuffix(s[at:], "\n")
		}
	}
	shown, cut := Cap(head, limit)
	shown = strings.TrimSuffix(shown, "\n") // Cap cut at the end of a line
	more := strings.Count(head, "\n") - strings.Count(shown, "\n")
	if rest != "" {
		more += strings.Count(rest, "\n") + 1
	}
	switch {
	case more == 1:
		return shown + " … (+1 line)"
	case more > 1:
		return fmt.Sprintf("%s … (+%d lines)", shown, more)
	case cut:
		return shown + " …"
	}
	return shown
}

// RightToLeft reports whether s holds a right-to-left letter or an Arabic
// digit. Where a line is laid out by the Unicode bidi algorithm (notification
// servers, many terminals) the characters around them move: `sh ב>א` can
// read as `sh א<ב`. Such a view does not show the text in the order that
// runs, so it cannot count as having shown a card whole; the panel lays out
// one character a cell, in the order that runs.
func RightToLeft(s string) bool {
	for _, r := range s {
		if r < 0x590 { // below Hebrew: no right-to-left class
			continue
		}
		p, _ := bidi.LookupRune(r)
		switch p.Class() {
		case bidi.R, bidi.AL, bidi.AN:
			return true
		}
	}
	return false
}
