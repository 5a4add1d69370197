package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/schedule"
)

// A job with keepRuns has its history cut to its keepRuns newest slots at
// start, sparing the slots younger than maxLate + lease, and again every
// PruneEvery.
func TestKeepRunsPrunesAtStartAndEvery(t *testing.T) {
	h := newHarness(t)
	j := job("kept", "0 0 1 1 *") // yearly: no run of its own in the test
	j.KeepRuns = 2
	for _, age := range []time.Duration{5 * time.Hour, 4 * time.Hour, 3 * time.Hour, 2 * time.Hour} {
		h.record(j, h.clk.Now().Add(-age))
	}
	h.record(j, h.clk.Now().Add(-time.Second)) // younger than maxLate + lease
	other := job("other", "0 0 1 1 *")
	h.record(other, h.clk.Now().Add(-5*time.Hour))
	h.fresh = true
	h.start("a", h.store, false, j, other)
	list := func(job string) []claim.Run {
		runs, err := h.store.ListRuns(context.Background(), claim.ListQuery{Job: job, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	awaitRuns := func(want int) []claim.Run {
		t.Helper()
		deadline := time.Now().Add(waitFor)
		for {
			runs := list("kept")
			if len(runs) == want {
				return runs
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d runs of kept, want %d: %+v", len(runs), want, runs)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// At start: the two newest (1s and 2h old) stay; 3h, 4h, 5h go.
	runs := awaitRuns(2)
	if runs[0].Slot != h.clk.Now().Add(-time.Second).UnixMilli() || runs[1].Slot != h.clk.Now().Add(-2*time.Hour).UnixMilli() {
		t.Fatalf("kept %+v, want the 1s and 2h old runs", runs)
	}
	if n := len(list("other")); n != 1 {
		t.Fatalf("a job without keepRuns lost runs: %d left", n)
	}
	// A new run (recorded by another instance), then the next prune,
	// PruneEvery (1m, the default without retention) later.
	h.record(j, h.clk.Now().Add(-500*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := h.clk.WaitTimerAt(ctx, t0.Add(time.Minute)); err != nil {
		t.Fatalf("no prune is due PruneEvery after the first: %v", err)
	}
	h.clk.Set(t0.Add(time.Minute))
	runs = awaitRuns(2)
	if runs[0].Slot != t0.Add(-500*time.Millisecond).UnixMilli() || runs[1].Slot != t0.Add(-time.Second).UnixMilli() {
		t.Fatalf("kept %+v after the second prune, want the two newest", runs)
	}
}

// keepAge spares what a claim may still find: maxLate + lease on a lease
// store, and for overlap: queue the job's period too.
func TestKeepAge(t *testing.T) {
	h := newHarness(t)
	s, err := New(Options{Backend: h.store, Clock: h.clk, Instance: "a", Executor: newFakeExec("a", h.got, h.store)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := job("k", "*/10 * * * * *")
	sc, err := schedule.Parse(j.Schedule, j.Location)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.keepAge(kept{job: j, sched: sc}, t0), j.MaxLate+j.Lease; got != want {
		t.Fatalf("keepAge %v, want maxLate + lease %v", got, want)
	}
	j.Overlap = string(claim.OverlapQueue)
	if got, want := s.keepAge(kept{job: j, sched: sc}, t0), j.MaxLate+j.Lease+10*time.Second; got != want {
		t.Fatalf("queue: keepAge %v, want maxLate + lease + the period %v", got, want)
	}
}
