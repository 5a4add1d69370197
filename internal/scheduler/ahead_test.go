package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
)

// clockedExec is an executor that notes the clock's reading when each
// execution begins (the command's start), then behaves as fakeExec.
type clockedExec struct {
	*fakeExec
	clk *clock.Fake
	mu  sync.Mutex
	at  map[int64]time.Time // slot (ms) -> clock at the execution's start
}

func (c *clockedExec) Run(ctx context.Context, e runner.Execution) runner.Report {
	c.mu.Lock()
	c.at[e.Fence.Slot] = c.clk.Now()
	c.mu.Unlock()
	return c.fakeExec.Run(ctx, e)
}

// claimClock notes the request's clock reading (its Now) of every claim;
// it is a claim.Leaser as its store is.
type claimClock struct {
	*memclaim.Backend
	mu   sync.Mutex
	sent map[int64]time.Time // slot (ms) -> req.Now of its first claim
	// calls counts the claims of each slot (ms).
	calls map[int64]int
	// counted are the answers the scheduler reported (Hooks.Claimed).
	counted map[int64][]claim.Outcome
}

func (c *claimClock) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	c.mu.Lock()
	if _, ok := c.sent[req.Slot]; !ok {
		c.sent[req.Slot] = req.Now
	}
	if c.calls != nil {
		c.calls[req.Slot]++
	}
	c.mu.Unlock()
	return c.Backend.Claim(ctx, req)
}

// aheadRun is an instance started by runAhead.
type aheadRun struct {
	cc     *claimClock
	ex     *clockedExec
	s      *Scheduler
	cancel context.CancelFunc
	done   chan struct{}
}

// runAhead starts instance "a" with a job claimed 50 ms ahead of its
// every-second slots (spread 20 ms), noting when each claim was sent and
// each execution began.
func runAhead(t *testing.T, h *harness, hold bool, overlap string) *aheadRun {
	t.Helper()
	j := job("tick", "* * * * * *")
	j.ClaimAhead = 50 * time.Millisecond
	j.ClaimSpread = 20 * time.Millisecond
	j.Overlap = overlap
	cc := &claimClock{Backend: h.store, sent: map[int64]time.Time{}, counted: map[int64][]claim.Outcome{},
		calls: map[int64]int{}}
	hooks := Hooks{Claimed: func(_ string, slot time.Time, res claim.Result, _ time.Duration) {
		cc.mu.Lock()
		cc.counted[slot.UnixMilli()] = append(cc.counted[slot.UnixMilli()], res.Outcome)
		cc.mu.Unlock()
	}}
	fe := newFakeExec("a", h.got, h.store)
	fe.hold = hold
	ex := &clockedExec{fakeExec: fe, clk: h.clk, at: map[int64]time.Time{}}
	h.seed(j)
	s, err := New(Options{Backend: cc, Clock: h.clk, Instance: "a", Executor: ex, ShutdownGrace: time.Second, Unbatched: true, Hooks: hooks}, []config.Job{j})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	awaitDecided(t, s)
	t.Cleanup(func() {
		cancel()
		close(fe.release)
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Error("scheduler did not stop")
		}
	})
	return &aheadRun{cc: cc, ex: ex, s: s, cancel: cancel, done: done}
}

// A run is claimed claimAhead before its slot (plus the spread's delay)
// and its command starts at the slot, not before: the claim's round trip
// and the spread are paid before the slot instead of after it.
func TestClaimAheadStartsTheJobAtTheSlot(t *testing.T) {
	h := newHarness(t)
	r := runAhead(t, h, false, "allow")
	cc, ex := r.cc, r.ex
	h.next() // the start's catch-up of slot 0, claimed and run at once
	// It must have ended before slot 1's delay is computed: a running
	// execution weights the delay (weightedDelay).
	awaitIdle(t, r.s)
	slot := time.UnixMilli(slotOf(1)).UTC()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	// The scheduler's timer is set for the claim, 50 ms before the slot.
	if err := h.clk.WaitTimerAt(ctx, slot.Add(-50*time.Millisecond)); err != nil {
		t.Fatalf("no timer for the claim 50 ms ahead of the slot: %v", err)
	}
	h.clk.Set(slot.Add(-50 * time.Millisecond))
	// The spread's delay (this instance alone: its own, within 20 ms) is
	// counted from the claim's due time too.
	delay := SpreadDelay("a", "tick", slotOf(1), 20*time.Millisecond)
	if delay > 0 {
		if err := h.clk.WaitTimerAt(ctx, slot.Add(delay-50*time.Millisecond)); err != nil {
			t.Fatalf("no timer for the spread's delay: %v", err)
		}
		h.clk.Advance(delay)
	}
	// Won before the slot; the execution waits for the slot.
	if err := h.clk.WaitTimerAt(ctx, slot); err != nil {
		t.Fatalf("the won run does not wait for its slot: %v", err)
	}
	select {
	case e := <-h.got:
		t.Fatalf("%s started before its slot, at %v", e.e.Fence, h.clk.Now())
	default:
	}
	h.clk.Set(slot)
	e := h.next()
	if e.e.Fence.Slot != slotOf(1) {
		t.Fatalf("ran %s, want slot %d", e.e.Fence, slotOf(1))
	}
	cc.mu.Lock()
	sent := cc.sent[slotOf(1)]
	cc.mu.Unlock()
	ex.mu.Lock()
	began := ex.at[slotOf(1)]
	ex.mu.Unlock()
	if want := slot.Add(delay - 50*time.Millisecond); !sent.Equal(want) {
		t.Errorf("claim sent at %v, want %v (50 ms ahead, plus the spread's %v)", sent, want, delay)
	}
	if !began.Equal(slot) {
		t.Errorf("command started at %v, want the slot %v", began, slot)
	}
}

// A run won ahead of its slot whose slot the stop reaches first is not
// started: its lease is released at once, for another instance to take.
func TestStopBeforeTheSlotReleasesARunWonAhead(t *testing.T) {
	h := newHarness(t)
	r := runAhead(t, h, true, "allow")
	ex, cancel, done := r.ex, r.cancel, r.done
	h.next() // slot 0, held running
	slot := time.UnixMilli(slotOf(1)).UTC()
	ctx, cancelWait := context.WithTimeout(context.Background(), waitFor)
	defer cancelWait()
	if err := h.clk.WaitTimerAt(ctx, slot.Add(-50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	h.clk.Set(slot.Add(-30 * time.Millisecond)) // past the claim and its spread
	if err := h.clk.WaitTimerAt(ctx, slot); err != nil {
		t.Fatalf("the won run does not wait for its slot: %v", err)
	}
	cancel()
	ex.release <- struct{}{} // slot 0 ends within the grace
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
	}
	select {
	case e := <-h.got:
		t.Fatalf("%s started after the stop began", e.e.Fence)
	default:
	}
	run, now, err := h.store.Read(context.Background(), "tick", slotOf(1))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != claim.StatusRunning || run.LeaseUntil.After(now) {
		t.Fatalf("run %s %v lease until %v at %v: want its lease released", run.Status, run.Attempt, run.LeaseUntil, now)
	}
}

// With overlap: skip, a claim sent ahead that finds the job's previous run
// live is asked again at the slot: a previous run that ends between the
// claim and the slot does not cost the slot its run, as it would not
// without the head start, and the first answer is not counted as an
// overlap (metrics, logs).
func TestClaimedAheadOverlapIsDecidedAtTheSlot(t *testing.T) {
	h := newHarness(t)
	r := runAhead(t, h, true, "skip")
	cc, ex := r.cc, r.ex
	h.next() // slot 0 runs, held: its lease is live
	slot := time.UnixMilli(slotOf(1)).UTC()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := h.clk.WaitTimerAt(ctx, slot.Add(-50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	h.clk.Set(slot.Add(-30 * time.Millisecond)) // the claim (past its spread) finds slot 0 live
	if err := h.clk.WaitTimerAt(ctx, slot); err != nil {
		t.Fatalf("a claim answered overlap ahead of its slot is not asked again at the slot: %v", err)
	}
	ex.release <- struct{}{} // slot 0 ends before slot 1's time
	awaitFinal(t, ctx, h, slotOf(0))
	h.clk.Set(slot)
	if e := h.next(); e.e.Fence.Slot != slotOf(1) {
		t.Fatalf("ran %s, want slot 1 once slot 0 had ended", e.e.Fence)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if got := cc.counted[slotOf(1)]; len(got) != 1 || got[0] != claim.Won {
		t.Fatalf("claims of slot 1 reported %v, want [won]: the answer ahead of the slot is not the slot's", got)
	}
}

// overlapAtTheSlot drives r (slot 0 running, held) to slot 1's instant,
// where its claim finds slot 0 live, and waits until the scheduler polls
// again (overlapPoll later). It returns slot 1.
func overlapAtTheSlot(t *testing.T, h *harness, ctx context.Context) time.Time {
	t.Helper()
	h.next() // slot 0 runs, held: its lease is live
	slot := time.UnixMilli(slotOf(1)).UTC()
	if err := h.clk.WaitTimerAt(ctx, slot.Add(-50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	h.clk.Set(slot.Add(-30 * time.Millisecond)) // the claim sent ahead: overlap
	if err := h.clk.WaitTimerAt(ctx, slot); err != nil {
		t.Fatal(err)
	}
	h.clk.Set(slot) // asked at the slot: overlap still
	if err := h.clk.WaitTimerAt(ctx, slot.Add(overlapPoll)); err != nil {
		t.Fatalf("a slot that found its job's previous run live is not asked again: %v", err)
	}
	return slot
}

// With overlap skip, a previous run that ends a moment after the next slot
// (a slow fork, a result recorded late on a loaded machine) delays that
// slot instead of costing it: the slot's claim is asked again until the
// run ends, and only its final answer is counted.
func TestOverlapHeldUntilThePreviousRunEnds(t *testing.T) {
	h := newHarness(t)
	r := runAhead(t, h, true, "skip")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	slot := overlapAtTheSlot(t, h, ctx)
	r.ex.release <- struct{}{} // slot 0 ends, after slot 1's instant
	awaitFinal(t, ctx, h, slotOf(0))
	h.clk.Set(slot.Add(overlapPoll))
	if e := h.next(); e.e.Fence.Slot != slotOf(1) {
		t.Fatalf("ran %s, want slot 1 once slot 0 had ended", e.e.Fence)
	}
	r.cc.mu.Lock()
	defer r.cc.mu.Unlock()
	if got := r.cc.counted[slotOf(1)]; len(got) != 1 || got[0] != claim.Won {
		t.Fatalf("claims of slot 1 reported %v, want [won]: overlaps asked again are not the slot's answer", got)
	}
}

// A previous run still live when the job's next slot is claimed skips the
// slot for good: one overlap counted, nothing run.
func TestOverlapSkippedAfterTheHold(t *testing.T) {
	h := newHarness(t)
	r := runAhead(t, h, true, "skip")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	slot := overlapAtTheSlot(t, h, ctx)
	// Slot 1's hold ends when slot 2 is claimed (50 ms ahead), or at
	// maxLate after the slot if that comes first.
	hold := time.UnixMilli(slotOf(2)).Add(-50 * time.Millisecond)
	if late := slot.Add(r.s.jobs[0].job.MaxLate); late.Before(hold) {
		hold = late
	}
	if got := overlapHold(r.s.jobs[0].job, r.s.jobs[0].sched, slot); !got.Equal(hold) {
		t.Fatalf("hold until %v, want %v", got, hold)
	}
	h.clk.Set(hold)
	for {
		r.cc.mu.Lock()
		got := append([]claim.Outcome(nil), r.cc.counted[slotOf(1)]...)
		r.cc.mu.Unlock()
		if len(got) == 1 && got[0] == claim.Overlap {
			break
		}
		if len(got) > 0 {
			t.Fatalf("claims of slot 1 reported %v, want [overlap]", got)
		}
		select {
		case <-ctx.Done():
			t.Fatal("slot 1's final overlap was never counted")
		case <-time.After(time.Millisecond):
		}
	}
	// The slot is recorded skipped, held by slot 0: no attempt ran it.
	run, _, err := h.store.Read(ctx, "tick", slotOf(1))
	if err != nil || run.Status != claim.StatusSkipped || run.Reason != "overlap" || run.HeldBy != slotOf(0) || run.Attempt != 0 {
		t.Fatalf("slot 1 after slot 0 ran through its hold: got %+v, %v; want skipped (overlap) held by slot 0, no attempt", run, err)
	}
}

// awaitFinal waits until the store holds a final status for tick@slot.
func awaitFinal(t *testing.T, ctx context.Context, h *harness, slot int64) {
	t.Helper()
	for {
		run, _, err := h.store.Read(ctx, "tick", slot)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status.Final() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the result of slot %d was not recorded", slot)
		case <-time.After(time.Millisecond):
		}
	}
}
