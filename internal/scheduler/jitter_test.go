package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/schedule"
)

// jitteredJob is a job of every minute with jitterMs 50 s and maxLate 10 s,
// named so that the slot at t0's minute (before t0) starts more than 20 s
// after it: later than maxLate after it, and after t0, so it is the first
// run an instance started at t0 claims.
func jitteredJob(t *testing.T) (config.Job, time.Time) {
	t.Helper()
	slot := t0.Truncate(time.Minute)
	for i := range 100 {
		j := job(fmt.Sprintf("jit%d", i), "0 * * * * *")
		j.MaxLate, j.Jitter = 10*time.Second, 50*time.Second
		if schedule.Jitter(j.Name, slot.UnixMilli(), j.Jitter) > 20*time.Second {
			return j, slot
		}
	}
	t.Fatal("no job name with a jitter over 20 s")
	return config.Job{}, time.Time{}
}

// A jittered run starts at its slot plus its jitter, on whichever instance
// wins it; its claim names the slot and is not answered late although its
// start is later than maxLate after the slot.
func TestJitteredRunStartsAtItsStartAndIsNotLate(t *testing.T) {
	h := newHarness(t)
	h.fresh = true
	j, slot := jitteredJob(t)
	h.start("a", h.store, false, j)
	h.start("b", h.store, false, j)
	start := schedule.Start(j.Name, slot, j.Jitter)

	h.awaitTimers(2)
	h.clk.Set(start.Add(-time.Millisecond))
	h.none(2)
	h.clk.Set(start)
	e := h.next()
	if e.e.Fence.Slot != slot.UnixMilli() || e.e.Fence.Job != j.Name || e.e.Fence.Attempt != 1 {
		t.Fatalf("ran %s, want %s at slot %v, attempt 1", e.e.Fence, j.Name, slot)
	}
	if now := h.clk.Now(); !now.Equal(start) {
		t.Fatalf("started at %v, want the jittered start %v (slot %v)", now, start, slot)
	}
	h.none(2)
}

// A slot whose jittered start is more than maxLate in the past is missed;
// one whose start has not come yet at the start of an instance is claimed.
func TestPlanStartJittered(t *testing.T) {
	j, _ := jitteredJob(t)
	j.Jitter, j.CatchUp = 40*time.Second, config.CatchUpLatest
	e := entryOf(t, j)
	s := t0.Truncate(time.Minute).Add(time.Hour) // a slot
	prev := s.Add(-time.Minute)
	begin := schedule.Start(j.Name, s, j.Jitter)
	newest := &claim.Run{Slot: prev.UnixMilli()}
	for _, tc := range []struct {
		name  string
		at    time.Time
		first time.Time
		late  span
		run   span
	}{
		{"slot passed, start to come", s.Add(begin.Sub(s) / 2), s, span{}, span{}},
		{"started within maxLate", begin.Add(j.MaxLate / 2), s, span{}, span{1, s, s}},
		{"started longer than maxLate ago", begin.Add(j.MaxLate + time.Millisecond), s.Add(time.Minute), span{1, s, s}, span{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.at.Equal(s) {
				t.Skip("the slot's jitter is 0")
			}
			p := planStart(e, newest, tc.at)
			if !p.first.Equal(tc.first) || p.late != tc.late || p.run != tc.run || p.skipped.n != 0 {
				t.Errorf("plan at %v: %+v\nwant first %v late %+v run %+v", tc.at, p, tc.first, tc.late, tc.run)
			}
		})
	}
}

// lateFor, the maxLate a claim carries, counts maxLate from the start.
func TestLateForCountsFromTheStart(t *testing.T) {
	j, slot := jitteredJob(t)
	want := j.MaxLate + schedule.Jitter(j.Name, slot.UnixMilli(), j.Jitter)
	if got := lateFor(j, slot); got != want {
		t.Fatalf("lateFor = %v, want %v", got, want)
	}
	j.Jitter = 0
	if got := lateFor(j, slot); got != j.MaxLate {
		t.Fatalf("lateFor without jitter = %v, want maxLate %v", got, j.MaxLate)
	}
}

// A perInstance job runs on every instance, once per slot each, claimed
// under its key; the command gets the job's own name.
func TestPerInstanceRunsOncePerInstance(t *testing.T) {
	h := newHarness(t)
	h.fresh = true
	j := job("each", "* * * * * *")
	j.PerInstance = true
	h.start("a", h.store, false, j)
	h.start("b", h.store, false, j)
	seen := map[string]int{}
	for sec := 1; sec <= 3; sec++ {
		h.awaitTimers(2)
		h.clk.Advance(time.Second)
		for range 2 {
			e := h.next()
			if e.e.Job.Name != "each" || e.e.Fence.Job != "each@"+e.instance || e.e.Fence.Attempt != 1 {
				t.Fatalf("ran job %q fence %s on %s, want job each under key each@%s", e.e.Job.Name, e.e.Fence, e.instance, e.instance)
			}
			seen[fmt.Sprintf("%s/%d", e.instance, e.e.Fence.Slot)]++
		}
	}
	h.none(2)
	for sec := 1; sec <= 3; sec++ {
		for _, in := range []string{"a", "b"} {
			if n := seen[fmt.Sprintf("%s/%d", in, slotOf(sec))]; n != 1 {
				t.Errorf("instance %s ran slot %d %d times, want once: %v", in, slotOf(sec), n, seen)
			}
		}
	}
}

// With overlap skip, a jittered slot whose previous run is still live at
// its start waits for that run, as an unjittered one does at its slot:
// the two runs never overlap, and the slot runs once the previous ends.
func TestJitteredOverlapHeldUntilThePreviousRunEnds(t *testing.T) {
	h := newHarness(t)
	h.fresh = true
	j, slot0 := jitteredJob(t)
	j.Overlap, j.Lease = "skip", time.Hour // slot 0's lease outlives the test
	a := h.start("a", h.store, true, j)
	slot1 := slot0.Add(time.Minute)
	start0, start1 := startOf(j, slot0), startOf(j, slot1)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	h.awaitTimers(1)
	h.clk.Set(start0)
	if e := h.next(); e.e.Fence.Slot != slot0.UnixMilli() { // held: its lease is live
		t.Fatalf("ran %s, want slot %v", e.e.Fence, slot0)
	}
	for h.clk.Now().Before(start1.Add(-time.Second)) { // a wait is at most MaxWait
		h.awaitTimers(1)
		next := h.clk.Now().Add(20 * time.Second)
		if next.After(start1.Add(-time.Second)) {
			next = start1.Add(-time.Second)
		}
		h.clk.Set(next)
	}
	if err := h.clk.WaitTimerAt(ctx, start1); err != nil {
		t.Fatalf("slot 1's claim is not due at its jittered start %v: %v", start1, err)
	}
	h.clk.Set(start1) // slot 1's claim finds slot 0 live: asked again
	if err := h.clk.WaitTimerAt(ctx, start1.Add(overlapPoll)); err != nil {
		t.Fatalf("a jittered slot that found its previous run live is not asked again: %v", err)
	}
	select {
	case e := <-h.got:
		t.Fatalf("%s ran while slot 0 was live", e.e.Fence)
	default:
	}
	a.exec.release <- struct{}{} // slot 0 ends, after slot 1's start
	readFinal(t, ctx, h, j.Name, slot0.UnixMilli())
	h.clk.Set(start1.Add(overlapPoll))
	if e := h.next(); e.e.Fence.Slot != slot1.UnixMilli() {
		t.Fatalf("ran %s, want slot 1 once slot 0 had ended", e.e.Fence)
	}
}

// readFinal awaits the recorded result of (job, slot).
func readFinal(t *testing.T, ctx context.Context, h *harness, job string, slot int64) {
	t.Helper()
	for {
		run, _, err := h.store.Read(ctx, job, slot)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status.Final() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the result of %s@%d was not recorded", job, slot)
		case <-time.After(time.Millisecond):
		}
	}
}
