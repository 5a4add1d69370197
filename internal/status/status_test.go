package status

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/anarchon/anarchon/internal/claim"
)

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "hello world", "hello world"},
		{"newline and tab kept", "a\n\tb", "a\n\tb"},
		{"escape sequence", "red \x1b[31mX\x1b[0m", `red \x1b[31mX\x1b[0m`},
		{"bell and backspace", "a\x07b\x08", `a\x07b\x08`},
		{"carriage return", "ok\roverwritten", `ok\x0doverwritten`},
		{"delete", "a\x7fb", `a\x7fb`},
		{"8-bit CSI", "a\u009b31mb", `a\u009b31mb`},
		{"invalid utf-8", "a\xffb", "a\uFFFDb"},
		{"greek kept", "καλημέρα", "καλημέρα"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sanitize(tc.in); got != tc.want {
				t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J", "a\u009bb", "\xff\xfe", "line\nnext\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Sanitize(in)
		if !utf8.ValidString(out) {
			t.Fatalf("Sanitize(%q) = %q: invalid UTF-8", in, out)
		}
		for _, r := range out {
			if unicode.IsControl(r) && r != '\n' && r != '\t' {
				t.Fatalf("Sanitize(%q) = %q: control character %U left", in, out, r)
			}
		}
		if Sanitize(out) != out {
			t.Fatalf("Sanitize is not idempotent on %q", in)
		}
	})
}

func sampleRuns() []claim.Run {
	code := 0
	start := time.Date(2027, 3, 28, 1, 0, 0, 120_000_000, time.UTC)
	return []claim.Run{
		{Job: "sync", Slot: time.Date(2027, 3, 28, 1, 0, 10, 0, time.UTC).UnixMilli(), Status: claim.StatusRunning,
			Attempt: 2, Instance: "web-1", Token: "aa", StartedAt: start, LeaseUntil: start.Add(time.Minute)},
		{Job: "sync", Slot: time.Date(2027, 3, 28, 1, 0, 0, 0, time.UTC).UnixMilli(), Status: claim.StatusSucceeded,
			Attempt: 1, Instance: "web-2", Token: "bb", StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond),
			ExitCode: &code, OutputTail: "done\x1b[0m\n"},
	}
}

func TestWriteJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sampleRuns()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one line per run, got %d:\n%s", len(lines), buf.String())
	}
	var running, done map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &running); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &done); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"job", "slot", "slot_ms", "status", "attempt", "instance", "token",
		"started_at", "finished_at", "duration_ms", "exit_code", "output_tail"} {
		if _, ok := done[k]; !ok {
			t.Errorf("field %q missing from %s", k, lines[1])
		}
	}
	if done["slot"] != "2027-03-28T01:00:00Z" || done["slot_ms"] != float64(1806195600000) {
		t.Errorf("slot fields: %v %v", done["slot"], done["slot_ms"])
	}
	if done["duration_ms"] != float64(1500) || done["exit_code"] != float64(0) || done["status"] != "succeeded" {
		t.Errorf("result fields: %s", lines[1])
	}
	if done["output_tail"] != `done\x1b[0m`+"\n" {
		t.Errorf("output tail not sanitised: %q", done["output_tail"])
	}
	if running["finished_at"] != nil || running["exit_code"] != nil || running["duration_ms"] != nil {
		t.Errorf("a running run has no finish: %s", lines[0])
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, sampleRuns()); err != nil {
		t.Fatal(err)
	}
	want := `JOB   SLOT                  STATUS     ATTEMPT  INSTANCE  STARTED                   DURATION  EXIT
sync  2027-03-28T01:00:10Z  running    2        web-1     2027-03-28T01:00:00.120Z  -         -
sync  2027-03-28T01:00:00Z  succeeded  1        web-2     2027-03-28T01:00:00.120Z  1.5s      0
`
	if buf.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", buf.String(), want)
	}
}
