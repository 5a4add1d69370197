package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// hookRecord is what hookcheck reads of a line of status --all --json.
type hookRecord struct {
	Job        string `json:"job"`
	SlotMs     int64  `json:"slot_ms"`
	Status     string `json:"status"`
	Instance   string `json:"instance"`
	ExitCode   *int   `json:"exit_code"`
	OutputTail string `json:"output_tail"`
}

// hookcheck statusfile hooksfile job status min: every record of job with
// status in statusfile (status --all --json) has exactly one line in
// hooksfile, written by its hook, and hooksfile has no line of job and
// status that the store has no record of; at least min records. A hook's
// line is job|slot|status|exit code|instance|output file's content: the
// slot (ANARCHON_SLOT) is the record's, the instance is the one that
// recorded the outcome, the exit code and the output are the run's as
// recorded (empty for a missed slot).
func cmdHookCheck(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 5 {
		ts.Fatalf("usage: hookcheck statusfile hooksfile job status min")
	}
	job, status := args[2], args[3]
	min, err := strconv.Atoi(args[4])
	ts.Check(err)
	lines := map[string][]string{} // by slot
	for line := range strings.Lines(ts.ReadFile(args[1])) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "|", 6)
		if len(f) != 6 {
			ts.Fatalf("%s: malformed line %q", args[1], line)
		}
		if f[0] == job && f[2] == status {
			lines[f[1]] = append(lines[f[1]], line)
		}
	}
	n := 0
	for line := range strings.Lines(ts.ReadFile(args[0])) {
		var r hookRecord
		ts.Check(json.Unmarshal([]byte(line), &r))
		if r.Job != job || r.Status != status {
			continue
		}
		n++
		slot := time.UnixMilli(r.SlotMs).UTC().Format(time.RFC3339)
		got := lines[slot]
		if len(got) != 1 {
			ts.Fatalf("%s %s at %s (by %s): %d hook lines, want 1: %q", job, status, slot, r.Instance, len(got), got)
		}
		code := ""
		if r.ExitCode != nil {
			code = strconv.Itoa(*r.ExitCode)
		}
		want := strings.Join([]string{job, slot, status, code, r.Instance, strings.TrimRight(r.OutputTail, "\n")}, "|") + "\n"
		if got[0] != want {
			ts.Fatalf("%s %s at %s: hook line\n%q\nwant\n%q", job, status, slot, got[0], want)
		}
		delete(lines, slot)
	}
	if len(lines) > 0 {
		ts.Fatalf("hook lines of %s %s with no such record in the store: %v", job, status, lines)
	}
	if n < min {
		ts.Fatalf("%d records of %s %s, want at least %d", n, job, status, min)
	}
	ts.Logf("%s %s: %d records, each with exactly one hook line", job, status, n)
}
