package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// With overlap: queue, a slot that finds the job's previous run live
// waits past maxLate, until the job's next slot is claimed, and runs as
// soon as that run ends: its claims carry a maxLate that reaches the end
// of the wait, so the store does not answer late. (With skip the same
// slot is skipped at maxLate: TestOverlapSkippedAfterTheHold.)
func TestQueueWaitsPastMaxLate(t *testing.T) {
	h := newHarness(t)
	r := runAhead(t, h, true, "queue")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	j, sc := r.s.jobs[0].job, r.s.jobs[0].sched
	slot := overlapAtTheSlot(t, h, ctx)
	next := time.UnixMilli(slotOf(2)).UTC()
	if got := overlapHold(j, sc, slot); !got.Equal(next.Add(-j.ClaimAhead)) {
		t.Fatalf("queue holds until %v, want the next slot's claim at %v", got, next.Add(-j.ClaimAhead))
	}
	// Past maxLate (400 ms): still waiting, and while slot 0 is live (by
	// a plain read) the claim is not sent again.
	r.cc.mu.Lock()
	claims := r.cc.calls[slotOf(1)]
	r.cc.mu.Unlock()
	past := slot.Add(j.MaxLate + 200*time.Millisecond)
	h.clk.Set(past)
	if err := h.clk.WaitTimerAt(ctx, past.Add(2*overlapPoll)); err != nil {
		t.Fatalf("a queued slot past maxLate does not wait on: %v", err)
	}
	r.cc.mu.Lock()
	counted, again := len(r.cc.counted[slotOf(1)]), r.cc.calls[slotOf(1)]-claims
	r.cc.mu.Unlock()
	if counted != 0 || again != 0 {
		t.Fatalf("while slot 0 ran: %d answers counted, %d claims sent again; want none", counted, again)
	}
	r.ex.release <- struct{}{} // slot 0 ends
	awaitFinal(t, ctx, h, slotOf(0))
	h.clk.Set(past.Add(2 * overlapPoll))
	if e := h.next(); e.e.Fence.Slot != slotOf(1) {
		t.Fatalf("ran %s, want the queued slot 1 once slot 0 had ended", e.e.Fence)
	}
	r.cc.mu.Lock()
	defer r.cc.mu.Unlock()
	if got := r.cc.counted[slotOf(1)]; len(got) != 1 || got[0] != claim.Won {
		t.Fatalf("claims of slot 1 reported %v, want [won]", got)
	}
	if again := r.cc.calls[slotOf(1)] - claims; again != 1 {
		t.Fatalf("%d claims of slot 1 after slot 0 ended, want 1", again)
	}
}

// A queued slot still waiting when the job's next slot is claimed is
// displaced by it: recorded skipped (overlap), held by the running slot.
func TestQueueDisplacedByTheNextSlot(t *testing.T) {
	h := newHarness(t)
	r := runAhead(t, h, true, "queue")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_ = overlapAtTheSlot(t, h, ctx)
	h.clk.Set(overlapHold(r.s.jobs[0].job, r.s.jobs[0].sched, time.UnixMilli(slotOf(1)).UTC()))
	for {
		run, _, err := h.store.Read(ctx, "tick", slotOf(1))
		if err == nil && run.Status == claim.StatusSkipped {
			if run.Reason != "overlap" || run.HeldBy != slotOf(0) {
				t.Fatalf("slot 1 recorded %+v, want skipped (overlap) held by slot 0", run)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the displaced slot 1 was never recorded skipped")
		case <-time.After(time.Millisecond):
		}
	}
}

// claimMaxLate stretches only a queued first claim, not a takeover.
func TestQueueClaimMaxLate(t *testing.T) {
	j := job("q", "* * * * * *")
	slot := time.UnixMilli(slotOf(1)).UTC()
	hold := slot.Add(900 * time.Millisecond)
	if got := claimMaxLate(j, slot, hold); got != j.MaxLate {
		t.Fatalf("allow: maxLate %v, want the job's %v", got, j.MaxLate)
	}
	j.Overlap = string(claim.OverlapQueue)
	if got := claimMaxLate(j, slot, hold); got != 900*time.Millisecond+j.MaxLate {
		t.Fatalf("queue: maxLate %v, want the wait (900ms) + the job's maxLate", got)
	}
	if got := claimMaxLate(j, slot, time.Time{}); got != j.MaxLate {
		t.Fatalf("queue takeover: maxLate %v, want the job's", got)
	}
}

// A job with overlap: replace gives its executions the job's slot clock:
// the next slot, and whether it is to run (not when paused).
func TestReplacerOf(t *testing.T) {
	h := newHarness(t)
	j := job("r", "*/2 * * * * *")
	s, err := New(Options{Backend: h.store, Clock: h.clk, Instance: "a", Executor: newFakeExec("a", h.got, h.store)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.replacerOf(j) != nil {
		t.Fatal("overlap allow has a replacer")
	}
	j.Overlap = string(claim.OverlapReplace)
	rp := s.replacerOf(j)
	slot := time.UnixMilli(slotOf(0)).UTC().Truncate(2 * time.Second)
	if got := rp.Next(slot); !got.Equal(slot.Add(2 * time.Second)) {
		t.Fatalf("next slot %v, want %v", got, slot.Add(2*time.Second))
	}
	if !rp.Runs(slot) {
		t.Fatal("a slot of a job not paused is not to run")
	}
	s.pauses.set([]claim.Control{{Job: "r", Version: 1, Paused: true}})
	if rp.Runs(slot) {
		t.Fatal("a paused slot is to run")
	}
}
