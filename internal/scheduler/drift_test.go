package scheduler

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

// A job with onDrift: pause is not claimed while the instances' records say
// its definitions disagree: each of its slots is recorded skipped (drift);
// a job with onDrift: run keeps running; once they agree, the paused job's
// next slot runs.
func TestDriftPausesOnlyOnDriftPause(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	drift := map[string]bool{"tick": true, "other": true}
	h.drifting = func(job string) bool {
		mu.Lock()
		defer mu.Unlock()
		return drift[job]
	}
	tick, other := job("tick", "* * * * * *"), job("other", "* * * * * *")
	tick.OnDrift, other.OnDrift = config.OnDriftPause, config.OnDriftRun
	h.start("a", h.store, false, tick, other)
	for sec := 0; sec <= 2; sec++ {
		if sec > 0 {
			h.awaitTimers(1)
			h.clk.Advance(time.Second)
		}
		if e := h.next(); e.e.Job.Name != "other" || e.e.Fence.Slot != slotOf(sec) {
			t.Fatalf("slot %d ran %s, want other's", sec, e.e.Fence)
		}
	}
	h.awaitDriftNotes(t, "tick", 0, 1, 2)
	mu.Lock()
	drift["tick"] = false
	mu.Unlock()
	h.awaitTimers(1)
	h.clk.Advance(time.Second)
	got := []string{h.next().e.Job.Name, h.next().e.Job.Name}
	slices.Sort(got)
	if !slices.Equal(got, []string{"other", "tick"}) {
		t.Fatalf("slot 3 after the drift ran %v, want both jobs", got)
	}
	h.awaitDriftNotes(t, "tick", 0, 1, 2)
}

// awaitDriftNotes waits until job's slots skipped (drift) are exactly secs.
func (h *harness) awaitDriftNotes(t *testing.T, job string, secs ...int) {
	t.Helper()
	var want []int64
	for _, s := range secs {
		want = append(want, slotOf(s))
	}
	deadline := time.Now().Add(waitFor)
	for {
		runs, err := h.store.ListRuns(context.Background(), claim.ListQuery{Job: job, Limit: 100,
			Statuses: []claim.Status{claim.StatusSkipped}})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, r := range runs {
			if r.Reason != ReasonDrift {
				t.Fatalf("a skipped slot of a drifting job: reason %q, want %q", r.Reason, ReasonDrift)
			}
			got = append(got, r.Slot)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's slots skipped (drift): %v, want %v", job, got, want)
		}
		time.Sleep(time.Millisecond)
	}
}
