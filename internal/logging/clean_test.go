package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/sanitize"
)

// hostile holds one character of each class a log line must not carry raw.
var hostile = map[string]string{
	"OSC title":      "\x1b]0;TITLE\x07",
	"CSI clear":      "\x1b[2J\x1b[1;1H",
	"carriage ret":   "\rforged",
	"line feed":      "a\nforged line",
	"delete":         "\x7f",
	"C1 CSI":         "\u009b2J",
	"C1 next line":   "\u0085",
	"RLO":            "\u202e",
	"bidi isolate":   "\u2066x\u2069",
	"zero width":     "\u200b\u200d",
	"word joiner":    "\u2060",
	"byte order":     "\ufeff",
	"tag":            "\U000e0041",
	"line separator": "\u2028",
	"invalid utf-8":  "\xff",
}

// logAll logs s as the message and in each kind of field, and through With.
func logAll(l *zap.Logger, s string) {
	l.With(zap.String("with", s)).Info(s,
		zap.String("string", s),
		zap.ByteString("bytes", []byte(s)),
		zap.Error(errors.New(s)),
		zap.Stringer("stringer", stringer(s)),
		zap.Strings("strings", []string{s}),
		zap.Any("struct", struct{ V string }{s}),
		zap.String(s, "as a key"),
	)
}

type stringer string

func (s stringer) String() string { return string(s) }

// rawUnsafe returns the first character in out a terminal must not get
// (invalid UTF-8 as utf8.RuneError).
func rawUnsafe(out string, allowed func(rune) bool) (rune, bool) {
	if !utf8.ValidString(out) {
		return utf8.RuneError, true
	}
	for _, r := range out {
		if sanitize.Unsafe(r) && !allowed(r) {
			return r, true
		}
	}
	return 0, false
}

func TestConsoleEscapes(t *testing.T) {
	for name, s := range hostile {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := New(&buf, "info", "console")
			if err != nil {
				t.Fatal(err)
			}
			logAll(l, s)
			out := buf.String()
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
				t.Fatalf("want one line, got %q", out)
			}
			if r, bad := rawUnsafe(out, func(r rune) bool { return r == '\t' || r == '\n' }); bad {
				t.Fatalf("%U reaches the terminal: %q", r, out)
			}
			if msg := strings.Split(out, "\t")[2]; msg != sanitize.Line(s) {
				t.Errorf("message %q, want %q", msg, sanitize.Line(s))
			}
		})
	}
}

func TestJSONEscapes(t *testing.T) {
	for name, s := range hostile {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := New(&buf, "info", "json")
			if err != nil {
				t.Fatal(err)
			}
			logAll(l, s)
			out := buf.String()
			if r, bad := rawUnsafe(out, func(r rune) bool { return r == '\n' }); bad {
				t.Fatalf("%U left raw in %q", r, out)
			}
			var entry map[string]any
			if err := json.Unmarshal(buf.Bytes(), &entry); err != nil {
				t.Fatalf("not JSON: %v: %q", err, out)
			}
			want := sanitize.Text(s)
			for _, k := range []string{"msg", "with", "string", "bytes", "error", "stringer"} {
				if entry[k] != want {
					t.Errorf("%s = %q, want %q", k, entry[k], want)
				}
			}
		})
	}
}

// The separators beyond the BMP are written as surrogate pairs.
func TestJSONEscapeBeyondBMP(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("tag", zap.Any("v", []string{"\U000e0041"}))
	var entry struct{ V []string }
	if err := json.Unmarshal(buf.Bytes(), &entry); err != nil || len(entry.V) != 1 || entry.V[0] != "\U000e0041" {
		t.Fatalf("decoded %+v (%v) from %q", entry, err, buf.String())
	}
	if !strings.Contains(buf.String(), `\udb40\udc41`) {
		t.Errorf("no surrogate pair in %q", buf.String())
	}
}
