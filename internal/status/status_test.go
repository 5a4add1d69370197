package status

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sanitize"
)

// The output tail is escaped as sanitize.Text does: lines kept.
func TestSanitize(t *testing.T) {
	if got, want := sanitize.Text("ok\x1b[2J\n\tfile\u202egnp.exe"), `ok\x1b[2J`+"\n\t"+`file\u202egnp.exe`; got != want {
		t.Errorf("sanitize.Text = %q, want %q", got, want)
	}
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
	want := `JOB   SLOT                  STATUS     ATTEMPT  INSTANCE  STARTED                   DURATION  EXIT  KIND
sync  2027-03-28T01:00:10Z  running    2        web-1     2027-03-28T01:00:00.120Z  -         -     scheduled
sync  2027-03-28T01:00:00Z  succeeded  1        web-2     2027-03-28T01:00:00.120Z  1.5s      0     scheduled
`
	if buf.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// A store row's strings cannot forge a second row or reorder the table.
func TestWriteTableOneRowPerRun(t *testing.T) {
	runs := sampleRuns()
	runs[0].Instance = "web-1\nsync  2027-03-28T01:00:20Z  succeeded"
	runs[0].Job = "sy\tnc"
	runs[1].Instance = "\u202eweb-2"
	var buf bytes.Buffer
	if err := WriteTable(&buf, runs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1+len(runs) {
		t.Fatalf("want a header and one row per run, got %d lines:\n%s", len(lines), buf.String())
	}
	if !strings.HasPrefix(lines[1], `sy\x09nc  `) || !strings.Contains(lines[1], `web-1\x0async  2027-03-28T01:00:20Z  succeeded  `) {
		t.Errorf("row 1 not escaped: %q", lines[1])
	}
	if !strings.Contains(lines[2], `  \u202eweb-2  `) {
		t.Errorf("row 2 not escaped: %q", lines[2])
	}
}

// status --json escapes bidirectional overrides and line feeds outside the
// output tail; the tail keeps its lines.
func TestWriteJSONEscapesBidi(t *testing.T) {
	runs := sampleRuns()[1:]
	runs[0].Instance = "web-2\u202e\n"
	runs[0].OutputTail = "line 1\n\u202eevil\u2066\n"
	var buf bytes.Buffer
	if err := WriteJSON(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(buf.String(), 0x202e) || strings.ContainsRune(buf.String(), 0x2066) {
		t.Fatalf("raw bidi control in %q", buf.String())
	}
	var rec Record
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Instance != `web-2\u202e\x0a` {
		t.Errorf("instance %q", rec.Instance)
	}
	if rec.OutputTail != "line 1\n"+`\u202eevil\u2066`+"\n" {
		t.Errorf("output tail %q", rec.OutputTail)
	}
}
