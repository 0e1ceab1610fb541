package approvals

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		multiline      bool
	}{
		{"plain", "rm a.txt", "rm a.txt", false},
		{"unicode text", "héllo wörld ✓ 日本語 😀", "héllo wörld ✓ 日本語 😀", false},
		{"combining mark", "e\u0301", "e\u0301", false},
		// Cc: C0 (ESC among them), DEL, C1.
		{"ansi escape", "\x1b[2K\x1b[1Aok", `\u{1b}[2K\u{1b}[1Aok`, false},
		{"carriage return", "safe\rrm -rf ~", `safe\u{d}rm -rf ~`, true},
		{"delete", "a\x7fb", `a\u{7f}b`, false},
		{"c1 control", "a\u0085b", `a\u{85}b`, false},
		{"newline kept in multiline", "a\nb", "a\nb", true},
		{"newline escaped in one line", "a\nb", `a\u{a}b`, false},
		{"tab kept in multiline", "\tx", "\tx", true},
		{"tab escaped in one line", "a\tb", `a\tb`, false},
		// Cf: bidi controls, zero-width marks, soft hyphen, tags, Mongolian vowel separator.
		{"right-to-left override", "rm \u202etxt.exe", `rm \u{202e}txt.exe`, false},
		{"isolates and marks", "a\u2066b\u2069c\u200fd\u061c", `a\u{2066}b\u{2069}c\u{200f}d\u{61c}`, false},
		{"zero width", "r\u200bm \ufeff\u2060x", `r\u{200b}m \u{feff}\u{2060}x`, false},
		{"soft hyphen", "r\u00adm", `r\u{ad}m`, false},
		{"tag characters", "x\U000E0041\U000E007F", `x\u{e0041}\u{e007f}`, false},
		{"mongolian vowel separator", "a\u180eb", `a\u{180e}b`, false},
		// Co, Cn, and U+FFFD.
		{"private use", "a\ue000b\U000F0000c\U00100000", `a\u{e000}b\u{f0000}c\u{100000}`, false},
		{"unassigned", "a\u0378b\U0001FFFEc\U0010FFFF", `a\u{378}b\u{1fffe}c\u{10ffff}`, false},
		{"noncharacter", "a\ufdd0b", `a\u{fdd0}b`, false},
		{"replacement character", "a\ufffdb", `a\u{fffd}b`, false},
		{"invalid utf-8", "a\xffb", `a\x{ff}b`, false},
		{"encoded surrogate", "a\xed\xa0\x80b", `a\x{ed}\x{a0}\x{80}b`, false},
		// Default_Ignorable_Code_Point beyond Cf.
		{"combining grapheme joiner", "a\u034fb", `a\u{34f}b`, false},
		{"hangul fillers", "a\u115f\u1160\u3164\uffa0b", `a\u{115f}\u{1160}\u{3164}\u{ffa0}b`, false},
		{"khmer inherent vowels", "a\u17b4\u17b5b", `a\u{17b4}\u{17b5}b`, false},
		{"khitan filler", "a\U00016FE4b", `a\u{16fe4}b`, false},
		{"ignorable reserved", "a\u2065\U000E0000\U000E0FFFb", `a\u{2065}\u{e0000}\u{e0fff}b`, false},
		// Variation selectors, Mongolian free variation selectors among them.
		{"variation selectors", "a\ufe0f\U000E0100b", `a\u{fe0f}\u{e0100}b`, false},
		{"mongolian selectors", "a\u180b\u180c\u180d\u180fb", `a\u{180b}\u{180c}\u{180d}\u{180f}b`, false},
		// Zl, Zp, and spaces other than U+0020.
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u{2028}b\u{2029}c`, true},
		{"odd spaces", "a\u00a0b\u3000c\u2007d", `a\u{a0}b\u{3000}c\u{2007}d`, false},
		{"braille blank", "a\u2800b", `a\u{2800}b`, false},
		{"musical null notehead", "ls" + strings.Repeat("\U0001D159", 40) + "; curl x | sh", `ls⟨40 blanks: \u{1d159}⟩; curl x | sh`, false},
		// Combining marks: as many as real text stacks, and no more.
		{"four marks", "a\u0301\u0302\u0303\u0304b", "a\u0301\u0302\u0303\u0304b", false},
		{"stacked marks", "a" + strings.Repeat("\u0489", 6) + "b\u0336", "a" + strings.Repeat("\u0489", 4) + `\u{489}\u{489}b` + "\u0336", false},
		{"marks counted per character", strings.Repeat("e\u0301\u0301\u0301", 3), strings.Repeat("e\u0301\u0301\u0301", 3), true},
		{"marks after a newline", "a\u0301\u0301\u0301\n\u0301\u0301", "a\u0301\u0301\u0301\n\u0301\u0301", true},
		// Runs of more than 8 blanks.
		{"short run of spaces", "a        b", "a        b", false},
		{"long run of spaces", "echo hi" + strings.Repeat(" ", 40) + "; rm -rf ~", "echo hi⟨40 spaces⟩; rm -rf ~", false},
		{"nine spaces", "a" + strings.Repeat(" ", 9) + "b", "a⟨9 spaces⟩b", true},
		{"long run of tabs", "a" + strings.Repeat("\t", 15) + "b", "a⟨15 tabs⟩b", true},
		{"tabs and spaces alternating", "ls" + strings.Repeat(strings.Repeat("\t", 15)+strings.Repeat(" ", 15), 20) + "; curl x | sh", "ls⟨600 blanks⟩; curl x | sh", true},
		{"spaces and marks alternating", "ls" + strings.Repeat(" \u034f", 500) + "; curl x | sh", `ls⟨1000 blanks: spaces, \u{34f}⟩; curl x | sh`, true},
		{"spaces under accents", "ls" + strings.Repeat(" \u0301", 300) + "; curl x | sh", `ls⟨600 blanks: spaces, \u{301}⟩; curl x | sh`, true},
		{"a space under an accent", "a \u0301b", `a \u{301}b`, true},
		{"invisible run", "ls" + strings.Repeat("\u200b", 9) + "x", `ls⟨9 blanks: \u{200b}⟩x`, false},
		{"many kinds", "a \t\u200b\u034f\u180e\u3164\u2066b", "a \t" + `\u{200b}\u{34f}\u{180e}\u{3164}\u{2066}b`, true},
		{"many kinds in a long run", "a  \t\u200b\u034f\u180e\u3164\u2066\u2066b", `a⟨9 blanks: spaces, tabs, \u{200b}, \u{34f}, …⟩b`, true},
		{"newlines in one line", "a" + strings.Repeat("\n", 9) + "b", `a⟨9 blanks: \u{a}⟩b`, false},
		{"indentation is not a diff's in plain text", strings.Repeat(" ", 12) + "x", "⟨12 spaces⟩x", true},
	} {
		if got := Escape(tc.in, tc.multiline); got != tc.want {
			t.Errorf("%s: Escape(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestEscapeDiffKeepsIndentation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"added indentation", "+" + strings.Repeat("\t", 12) + "return x\n", "+" + strings.Repeat("\t", 12) + "return x\n"},
		{"context indentation", strings.Repeat(" ", 20) + "x\n", strings.Repeat(" ", 20) + "x\n"},
		{"removed indentation", "-" + strings.Repeat(" ", 16) + "y\n", "-" + strings.Repeat(" ", 16) + "y\n"},
		{"run after the indentation", "+\tx" + strings.Repeat(" ", 30) + "; curl x | sh\n", "+\tx⟨30 spaces⟩; curl x | sh\n"},
		{"invisible indentation", "+" + strings.Repeat("\u3164", 10) + "x\n", `+⟨10 blanks: \u{3164}⟩x` + "\n"},
		{"hunk header", "@@ -1 +1 @@" + strings.Repeat(" ", 9) + "\n", "@@ -1 +1 @@⟨9 spaces⟩\n"},
	} {
		if got := escape(tc.in, diffLines); got != tc.want {
			t.Errorf("%s: escape(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestHiddenClasses checks every code point of the classes that must be
// escaped, and that letters of many scripts are not.
func TestHiddenClasses(t *testing.T) {
	t.Parallel()
	for _, class := range []struct {
		name  string
		table *unicode.RangeTable
	}{
		{"Cc", unicode.Cc}, {"Cf", unicode.Cf}, {"Co", unicode.Co}, {"Cs", unicode.Cs}, {"Zl", unicode.Zl}, {"Zp", unicode.Zp},
		{"Other_Default_Ignorable_Code_Point", unicode.Other_Default_Ignorable_Code_Point},
		{"Variation_Selector", unicode.Variation_Selector},
	} {
		n := 0
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if unicode.Is(class.table, r) && !hidden(r) {
				t.Errorf("%s: %U is not escaped", class.name, r)
				if n++; n > 5 {
					break
				}
			}
		}
	}
	for _, r := range "aZ09é日本語ÅßЖשׁ😀✓→" {
		if hidden(r) {
			t.Errorf("%U (%c) is escaped", r, r)
		}
	}
}

func TestHostLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"api.openai.com":         "api.openai.com",
		"аpi.openai.com":         `\u{430}pi.openai.com`, // Cyrillic а
		"ex​ample.com":           `ex\u{200b}ample.com`,
		"example.com evil.org":   `example.com\u{20}evil.org`,
		"b\xfcd.example":         `b\x{fc}d.example`,
		"[2001:db8::1]:443":      "[2001:db8::1]:443",
		"xn--pi-7ed.example.com": "xn--pi-7ed.example.com",
	} {
		if got := hostLine(in); got != want {
			t.Errorf("hostLine(%q) = %q, want %q", in, got, want)
		}
	}
	b, err := build(req(MethodCommandApproval, strings.ReplaceAll(networkCommand, "example.com", "exаmple.com"), ""), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if b.card.Host != `ex\u{430}mple.com` || len(b.card.HostRules) != 1 || b.card.HostRules[0] != `allow ex\u{430}mple.com` {
		t.Errorf("network card shows host %q, rules %q", b.card.Host, b.card.HostRules)
	}
}

func TestFirstLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"rm a.txt", 80, "rm a.txt"},
		{"rm a.txt\n", 80, "rm a.txt"},
		{"rm a.txt\nrm b\n", 80, "rm a.txt … (+1 line)"},
		{"rm a.txt\nb\nc\nd", 80, "rm a.txt … (+3 lines)"},
		{"rm a.txt\nb\nc\nd\n", 80, "rm a.txt … (+3 lines)"},
		{"abcdefghij", 4, "abcd …"},
		{"abcdefghij\nk", 4, "abcd … (+1 line)"},
	} {
		if got := FirstLine(tc.in, tc.limit); got != tc.want {
			t.Errorf("FirstLine(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

func TestFirstLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		n, limit int
		want     string
	}{
		{"a\nb", 3, 80, "a\nb"},
		{"a\nb\nc\n", 3, 80, "a\nb\nc"},
		{"a\nb\nc\nd", 3, 80, "a\nb\nc … (+1 line)"},
		{"a\nb\nc\nd\ne\n", 3, 80, "a\nb\nc … (+2 lines)"},
		{"a\nb\nc\nd", 1, 80, "a … (+3 lines)"},
		{"aaaa\nbbbbbbbb", 3, 7, "aaaa … (+1 line)"},   // cut at the end of a line
		{"aaaa\nbbbbbbbbbb", 3, 12, "aaaa\nbbbbbbb …"}, // cut inside one
		{"aaaa\nbbbbbbbbbb\nc", 2, 12, "aaaa\nbbbbbbb … (+1 line)"},
	} {
		if got := FirstLines(tc.in, tc.n, tc.limit); got != tc.want {
			t.Errorf("FirstLines(%q, %d, %d) = %q, want %q", tc.in, tc.n, tc.limit, got, tc.want)
		}
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		card Card
		want string
	}{
		{Card{Kind: KindCommand, Command: "rm a.txt\nrm b\nrm c\nrm d"}, "rm a.txt … (+3 lines)"},
		{Card{Kind: KindCommand, Command: Escape("ls"+strings.Repeat("\t \u034f", 300)+"; curl x | sh", true)}, `ls⟨900 blanks: tabs, spaces, \u{34f}⟩; curl x | sh`},
		{Card{Kind: KindFileChange, Changes: []FileChange{{Path: "/h/.ssh/authorized_keys", Kind: "add", Replaces: true}, {Path: "/w/x", Kind: "move", MovePath: "/o/rc.sh"}}},
			"add /h/.ssh/authorized_keys (replaces an existing file), move /w/x -> /o/rc.sh"},
	} {
		if got := tc.card.Summary(120); got != tc.want {
			t.Errorf("Summary = %q, want %q", got, tc.want)
		}
	}
}

func BenchmarkEscape(b *testing.B) {
	line := fmt.Sprintf("\tfmt.Println(%q) // ünïcödé\n", strings.Repeat("x", 60))
	s := strings.Repeat(line, 1<<14)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		escape(s, diffLines)
	}
}

func TestRightToLeft(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"rm -rf build":       false,
		"echo héllo ünïcode": false,
		"echo \u202e":        false, // escaped already: plain ASCII
		"sh ב>א":             true,  // Hebrew
		"echo مرحبا > out":   true,  // Arabic
		"echo ٣":             true,  // an Arabic-Indic digit
		"printf 'ܐ'":         true,  // Syriac
		"cat 日本語.txt":        false,
	} {
		if got := RightToLeft(s); got != want {
			t.Errorf("RightToLeft(%q) = %v, want %v", s, got, want)
		}
	}
}
