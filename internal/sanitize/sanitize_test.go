package sanitize

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "hello world", "hello world"},
		{"empty", "", ""},
		{"greek kept", "καλημέρα", "καλημέρα"},
		{"emoji kept", "ok 👍", "ok 👍"},
		{"newline and tab kept", "a\n\tb", "a\n\tb"},
		{"CSI sequence", "red \x1b[31mX\x1b[0m", `red \x1b[31mX\x1b[0m`},
		{"OSC title", "\x1b]0;TITLE\x07", `\x1b]0;TITLE\x07`},
		{"bell and backspace", "a\x07b\x08", `a\x07b\x08`},
		{"carriage return", "ok\roverwritten", `ok\x0doverwritten`},
		{"NUL", "a\x00b", `a\x00b`},
		{"delete", "a\x7fb", `a\x7fb`},
		{"C1 8-bit CSI", "a\u009b31mb", `a\u009b31mb`},
		{"C1 next line", "a\u0085b", `a\u0085b`},
		{"C1 OSC and ST", "\u009d0;x\u009c", `\u009d0;x\u009c`},
		{"right-to-left override", "file\u202egnp.exe", `file\u202egnp.exe`},
		{"bidi embeddings", "\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`},
		{"bidi isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"bidi marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"zero width", "a\u200bb\u200cc\u200dd", `a\u200bb\u200cc\u200dd`},
		{"invisible operators", "\u2060\u2061\u2062\u2063\u2064", `\u2060\u2061\u2062\u2063\u2064`},
		{"byte order mark", "\ufeffx", `\ufeffx`},
		{"soft hyphen (Cf)", "a\u00adb", `a\u00adb`},
		{"tag character beyond the BMP", "a\U000e0041b", `a\U000e0041b`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"invalid utf-8", "a\xffb", "a\uFFFDb"},
		{"cut rune", "a\xe2\x80", "a\uFFFD\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text(tc.in); got != tc.want {
				t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestLine(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "web-1", "web-1"},
		{"line feed", "web-1\nweb-2", `web-1\x0aweb-2`},
		{"tab", "a\tb", `a\x09b`},
		{"CRLF", "a\r\n", `a\x0d\x0a`},
		{"escape and bidi as Text", "\x1b[2J\u202e", `\x1b[2J\u202e`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Line(tc.in); got != tc.want {
				t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestUnsafe(t *testing.T) {
	for _, r := range []rune{0, '\t', '\n', '\r', 0x1b, 0x7f, 0x80, 0x9b, 0x9f, 0xad,
		0x200b, 0x200f, 0x202a, 0x202e, 0x2060, 0x2064, 0x2066, 0x2069, 0xfeff, 0x2028, 0x2029, 0xe0001} {
		if !Unsafe(r) {
			t.Errorf("Unsafe(%U) = false", r)
		}
	}
	for _, r := range []rune{' ', 'a', '~', '\\', 0xa0, 'é', 0x2010, 0x2070, 0x202f, 0xfe0f, 0x1f44d, utf8.RuneError} {
		if Unsafe(r) {
			t.Errorf("Unsafe(%U) = true", r)
		}
	}
}

// terminal is a model of a terminal's input parser (after ECMA-48 and the
// DEC VT500 state machine): it records every control function the text
// would make the terminal perform. Safe text performs none, except line
// feeds and tabs when they are allowed.
type terminal struct {
	state     int
	functions []string
}

const (
	atGround = iota
	inEscape // after ESC
	inCSI    // a control sequence, until its final byte
	inString // a control string (OSC, DCS, SOS, PM, APC), until ST or BEL
)

func (t *terminal) feed(s string, allowed func(rune) bool) {
	for _, r := range s {
		t.rune(r, allowed)
	}
}

func (t *terminal) rune(r rune, allowed func(rune) bool) {
	switch {
	case r == 0x1b:
		t.state = inEscape
		return
	case r == 0x9b:
		t.enter(inCSI, "CSI")
		return
	case r == 0x90 || r == 0x98 || r == 0x9d || r == 0x9e || r == 0x9f:
		t.enter(inString, fmt.Sprintf("control string %U", r))
		return
	case r == 0x07 && t.state == inString, r == 0x9c:
		t.state = atGround
		return
	case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		if !allowed(r) {
			t.functions = append(t.functions, fmt.Sprintf("control %U", r))
		}
		return
	}
	switch t.state {
	case inEscape:
		switch r {
		case '[':
			t.enter(inCSI, "ESC [")
		case ']', 'P', 'X', '^', '_':
			t.enter(inString, "ESC "+string(r))
		default:
			t.enter(atGround, "ESC "+string(r))
		}
	case inCSI:
		if r >= 0x40 && r <= 0x7e {
			t.state = atGround
		}
	}
}

func (t *terminal) enter(state int, function string) {
	t.state = state
	t.functions = append(t.functions, function)
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J", "\x1b]0;TITLE\x07\x1b[2J\x1b[1;1H", "a\u009bb",
		"\xff\xfe", "line\nnext\r", "file\u202egnp.exe", "\u2066x\u2069", "\ufeff\u200b", "\U000e0041"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, tc := range []struct {
			name     string
			sanitize func(string) string
			allowed  func(rune) bool
		}{
			{"Text", Text, func(r rune) bool { return r == '\n' || r == '\t' }},
			{"Line", Line, func(rune) bool { return false }},
		} {
			out := tc.sanitize(in)
			if !utf8.ValidString(out) {
				t.Fatalf("%s(%q) = %q: invalid UTF-8", tc.name, in, out)
			}
			var term terminal
			term.feed(out, tc.allowed)
			if term.state != atGround || len(term.functions) > 0 {
				t.Fatalf("%s(%q) = %q drives the terminal: %v (ends in state %d)", tc.name, in, out, term.functions, term.state)
			}
			for _, r := range out {
				if Unsafe(r) && !tc.allowed(r) {
					t.Fatalf("%s(%q) = %q: %U left", tc.name, in, out, r)
				}
			}
			if tc.sanitize(out) != out {
				t.Fatalf("%s is not idempotent on %q", tc.name, in)
			}
			if safe(in, tc.allowed) && out != in {
				t.Fatalf("%s(%q) = %q changed safe text", tc.name, in, out)
			}
		}
	})
}

// safe reports whether s is valid UTF-8 with no rune to escape.
func safe(s string, allowed func(rune) bool) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return Unsafe(r) && !allowed(r) })
}

func BenchmarkLineClean(b *testing.B) {
	s := strings.Repeat("an ordinary line of job output, ", 8)
	for b.Loop() {
		_ = Line(s)
	}
}

// The model sees what an unsanitised job would do to a terminal.
func TestTerminalModel(t *testing.T) {
	var term terminal
	term.feed("\x1b]0;TITLE\x07\x1b[2J\x1b[1;1H\u009b0m\r", func(rune) bool { return false })
	want := []string{"ESC ]", "ESC [", "ESC [", "CSI", "control U+000D"}
	if fmt.Sprint(term.functions) != fmt.Sprint(want) || term.state != atGround {
		t.Fatalf("functions %q (state %d), want %q", term.functions, term.state, want)
	}
}
