package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// A job's pause shows while it holds: a pause whose until has passed reads
// as not paused, with no pause fields.
func TestJobRecordPause(t *testing.T) {
	now := time.Date(2027, 3, 28, 6, 0, 0, 0, time.UTC)
	until := now.Add(time.Hour)
	j := Job{Name: "a", Schedule: "@hourly", Timezone: "UTC", Next: now.Add(time.Minute), Now: now,
		Control: claim.Control{Job: "a", Version: 3, Paused: true, Until: until.UnixMilli(), Reason: "r", By: "u@h"}}
	rec := JobRecordOf(j)
	if !rec.Paused || rec.PausedUntil == nil || *rec.PausedUntil != "2027-03-28T07:00:00Z" || rec.PausedReason != "r" ||
		rec.PausedBy != "u@h" || *rec.NextSlotMs != now.Add(time.Minute).UnixMilli() || rec.LastStatus != nil {
		t.Fatalf("a job paused for an hour: %+v", rec)
	}
	j.Now = until
	if rec = JobRecordOf(j); rec.Paused || rec.PausedUntil != nil || rec.PausedReason != "" || rec.PausedBy != "" {
		t.Fatalf("a pause at its until: %+v", rec)
	}
	var out bytes.Buffer
	if err := WriteJobsTable(&out, []Job{j, {Name: "b", Schedule: "0 0 31 2 *", Timezone: "UTC", Drift: []string{"command/args/shell"}}}); err != nil {
		t.Fatal(err)
	}
	want := "JOB  SCHEDULE    ZONE  NEXT                  PAUSED  LAST  DRIFT\n" +
		"a    @hourly     UTC   2027-03-28T06:01:00Z  -       -     -\n" +
		"b    0 0 31 2 *  UTC   -                     -       -     command/args/shell\n"
	if out.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	if strings.Contains(out.String(), "\t") {
		t.Fatal("the table holds a tab")
	}
}
