// Package sanitize makes text that came from a job or a store safe to print
// on a terminal: in the daemon's log, in the status table and in
// `status --json`. Whatever could drive the terminal (move the cursor, clear
// the screen, set its title) or hide or reorder what the reader sees is
// replaced by a visible escape.
//
// The escaped classes are the Unicode categories Cc (C0 controls, DEL and
// the C1 controls, among them ESC and the 8-bit CSI and OSC), Cf (the
// bidirectional embeddings, overrides and isolates such as U+202E, the zero
// width characters U+200B–U+200D, U+2060–U+2064, the byte order mark U+FEFF,
// the soft hyphen and the tag characters) and Zl and Zp (U+2028 and U+2029,
// which some terminals and viewers break lines at). A whole category rather
// than a list of code points: a Cf character has no glyph of its own, so
// escaping one costs a little beauty in scripts that join letters with
// U+200C or U+200D, while missing one lets a job make a line read other
// than it is. Invalid UTF-8 becomes U+FFFD.
//
// The escapes are \xHH for ASCII controls, \uHHHH and \UHHHHHHHH otherwise.
// Backslashes are kept as they are, so the result is for reading, not for
// reversing; escaping escaped text changes nothing.
package sanitize

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r is escaped by Line: a control character (C0,
// DEL, C1), a format character (category Cf: bidirectional controls, zero
// width and invisible characters) or a line or paragraph separator.
func Unsafe(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7f
	}
	return (r >= 0x80 && r <= 0x9f) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Text escapes what Unsafe reports except line feeds and tabs, for text
// that has lines: a job's output tail.
func Text(s string) string { return escape(s, true) }

// Line escapes what Unsafe reports, line feeds and tabs included, for a
// value that must stay on its line: a table cell, a log line.
func Line(s string) string { return escape(s, false) }

func escape(s string, keepLines bool) string {
	if clean(s, keepLines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteRune(utf8.RuneError)
		case keepLines && (r == '\n' || r == '\t'), !Unsafe(r):
			b.WriteRune(r)
		default:
			b.WriteString(Escape(r))
		}
	}
	return b.String()
}

// clean reports whether s is valid UTF-8 without runes to escape.
func clean(s string, keepLines bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if Unsafe(rune(c)) && !(keepLines && (c == '\n' || c == '\t')) {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || Unsafe(r) {
			return false
		}
		i += size
	}
	return true
}

// Escape is the visible form of r: \x1b, \u009b, \u202e, \U000e0001.
func Escape(r rune) string {
	var digits, prefix = 8, `\U`
	switch {
	case r < utf8.RuneSelf:
		digits, prefix = 2, `\x`
	case r <= 0xffff:
		digits, prefix = 4, `\u`
	}
	h := strconv.FormatInt(int64(r), 16)
	return prefix + strings.Repeat("0", max(digits-len(h), 0)) + h
}
