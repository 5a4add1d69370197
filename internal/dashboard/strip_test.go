package dashboard

import (
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

// TestStripShowsGaps: a slot of the schedule with no record is a gap once
// maxLate is past, pending before; recorded slots show their outcome.
func TestStripShowsGaps(t *testing.T) {
	j := config.Job{Name: "m", Schedule: "* * * * *", Location: time.UTC, MaxLate: 90 * time.Second}
	t0 := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	min := func(n int) int64 { return t0.Add(time.Duration(n) * time.Minute).UnixMilli() }
	recent := []claim.Run{ // newest first
		{Job: "m", Slot: min(3), Status: claim.StatusRunning},
		{Job: "m", Slot: min(2), Status: claim.StatusSkipped, Reason: "paused"},
		{Job: "m", Slot: min(0), Status: claim.StatusSucceeded},
	}
	now := t0.Add(4*time.Minute + 30*time.Second)
	got := stripOf(j, recent, now, 10)
	want := []string{"succeeded", cellNone, "skipped", "running", cellPending}
	if len(got) != len(want) {
		t.Fatalf("strip %+v, want %v", got, want)
	}
	for i, c := range got {
		if c.Status != want[i] || !c.Slot.Equal(time.UnixMilli(min(i)).UTC()) {
			t.Errorf("cell %d: %s at %s, want %s at %s", i, c.Status, c.Slot, want[i], time.UnixMilli(min(i)).UTC())
		}
	}
	if got := stripOf(j, recent, now, 2); len(got) != 2 || got[0].Status != "running" {
		t.Errorf("last 2: %+v", got)
	}
	if got := stripOf(j, nil, now, 10); got != nil {
		t.Errorf("no record: %+v", got)
	}
}
