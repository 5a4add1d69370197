package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/schedule"
)

const jitteredJobs = `jobs:
  - name: spread
    schedule: "* * * * *"
    jitterMs: 45000
    command: "true"
  - name: plain
    schedule: "* * * * *"
    command: "true"
`

// next prints each run's jittered start: within [slot, slot + jitterMs],
// schedule.Jitter's, and the slot itself for a job without jitter.
func TestNextShowsTheJitteredStart(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", jitteredJobs, 0o644)
	code, out, stderr := run(t, dir, "next", "--config", "c.yaml", "-n", "20", "--from", "2027-01-01T00:00:00Z", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var moved int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var s struct {
			Job     string `json:"job"`
			SlotMs  int64  `json:"slot_ms"`
			Start   string `json:"start"`
			StartMs int64  `json:"start_ms"`
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		limit := int64(0)
		if s.Job == "spread" {
			limit = 45000
		}
		if s.StartMs < s.SlotMs || s.StartMs > s.SlotMs+limit {
			t.Errorf("%s: start %d outside [slot %d, slot + %d]", s.Job, s.StartMs, s.SlotMs, limit)
		}
		if want := schedule.Jitter(s.Job, s.SlotMs, time.Duration(limit)*time.Millisecond).Milliseconds(); s.StartMs-s.SlotMs != want {
			t.Errorf("%s: jitter %d ms, want schedule.Jitter's %d", s.Job, s.StartMs-s.SlotMs, want)
		}
		if got := time.UnixMilli(s.StartMs).UTC().Format(time.RFC3339Nano); s.Start != got {
			t.Errorf("start %q, start_ms says %q", s.Start, got)
		}
		if s.StartMs != s.SlotMs {
			moved++
		}
	}
	if moved < 15 {
		t.Errorf("only %d of 20 jittered starts differ from their slot", moved)
	}
	// The slot at --from itself starts after it: its run is still to come.
	slot := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	start := schedule.Start("spread", slot, 45*time.Second).Format(time.RFC3339Nano)
	code, out, _ = run(t, dir, "next", "--config", "c.yaml", "-n", "1", "--job", "spread", "--from", "2027-01-01T00:00:00Z")
	if code != 0 || !strings.Contains(out, "START (UTC)") || !strings.Contains(out, "2027-01-01T00:00:00Z  "+start+"\n") {
		t.Errorf("next table:\n%s\nwant a START column with %s", out, start)
	}
	// Without a jittered job the table is as it was: the start is the slot.
	code, out, _ = run(t, dir, "next", "--config", "c.yaml", "-n", "1", "--job", "plain", "--from", "2027-01-01T00:00:00Z")
	if code != 0 || strings.Contains(out, "START") {
		t.Errorf("next table of a job without jitter:\n%s", out)
	}
}

// validate says which jobs this instance does not run for want of tags.
func TestValidateSaysWhereJobsDoNotRun(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", `tags: [web]
jobs:
  - name: render
    schedule: "@hourly"
    tags: [gpu, web]
    command: "true"
  - name: rotate
    schedule: "@daily"
    perInstance: true
    command: "true"
`, 0o644)
	code, out, stderr := run(t, dir, "validate", "--config", "c.yaml", "--offline")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "info: job render does not run on this instance: it needs tags [gpu, web]; this instance has [web]"
	if !strings.Contains(out, want) || strings.Contains(out, "job rotate does not run") {
		t.Errorf("validate printed:\n%s\nwant the line %q, and none for rotate", out, want)
	}
}
