package approvals

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// blankRun is the length from which a run of spaces or tabs is shown as a
// count: a long run could push the rest of a line out of view.
const blankRun = 16

// Escape returns s as a person may safely see it: control characters, ANSI
// escape sequences (their ESC), bidi overrides and isolates, zero-width and
// other format or invisible characters, unusual spaces and invalid UTF-8 are
// shown as visible escapes such as \u{202e} or \x{ff}, and long runs of
// blanks as a count. Newlines are kept when multiline is set; tabs are kept
// when multiline is set (for diffs), and escaped otherwise.
func Escape(s string, multiline bool) string {
	if isPlain(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	plain := 0 // start of the run of bytes shown as they are
	for i := 0; i < len(s); {
		c := s[i]
		if c > ' ' && c < 0x7f || c == '\n' && multiline {
			i++
			continue
		}
		if c == ' ' || c == '\t' {
			n := blankLen(s[i:], c)
			if n < blankRun && (c == ' ' || multiline) {
				i += n
				continue
			}
			b.WriteString(s[plain:i])
			if n >= blankRun {
				fmt.Fprintf(&b, `\u{%x}×%d`, c, n)
			} else {
				b.WriteString(strings.Repeat(`\t`, n))
			}
			i += n
			plain = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(s[plain:i])
			fmt.Fprintf(&b, `\x{%02x}`, c)
		case hidden(r):
			b.WriteString(s[plain:i])
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			i += size
			continue
		}
		i += size
		plain = i
	}
	b.WriteString(s[plain:])
	return b.String()
}

// isPlain reports whether s needs no escaping: the fast path for the
// printable ASCII that most commands and diffs are.
func isPlain(s string, multiline bool) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ':
			if run++; run >= blankRun {
				return false
			}
			continue
		case c == '\n' && multiline:
		case c < 0x20 || c >= 0x7f:
			return false
		}
		run = 0
	}
	return true
}

func blankLen(s string, c byte) int {
	n := 0
	for n < len(s) && s[n] == c {
		n++
	}
	return n
}

// hidden reports whether r is shown escaped.
func hidden(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f: // C0 (ESC among them), DEL, C1
		return true
	case unicode.Is(unicode.Cf, r): // format: bidi controls, zero-width, soft hyphen, tags
		return true
	case unicode.In(r, unicode.Zl, unicode.Zp): // line and paragraph separators
		return true
	case unicode.Is(unicode.Zs, r) && r != ' ': // spaces that look like ' '
		return true
	case r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0100 && r <= 0xe01ef: // variation selectors
		return true
	case r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0, r == 0x2800: // blank letters
		return true
	case r == utf8.RuneError: // a real U+FFFD hides what it replaced
		return true
	}
	return false
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

// FirstLine is the first line of an escaped text, capped to limit bytes,
// for labels and notifications.
func FirstLine(s string, limit int) string {
	line, rest, more := strings.Cut(s, "\n")
	line, cut := Cap(line, limit)
	if cut || (more && rest != "") {
		line += " …"
	}
	return line
}
