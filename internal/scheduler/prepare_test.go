package scheduler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

// preparing is a claim.Preparer over another backend: it records every
// Prepare and every Claim with the injected clock's time, in one list.
type preparing struct {
	claim.Backend
	clk  clock.Clock
	lead time.Duration
	fail bool
	mu   sync.Mutex
	log  []call
	seen chan call
}

type call struct {
	op   string // prepare | claim
	slot int64
	at   time.Time
}

func (b *preparing) record(op string, slot int64) {
	c := call{op, slot, b.clk.Now()}
	b.mu.Lock()
	b.log = append(b.log, c)
	b.mu.Unlock()
	b.seen <- c
}

func (b *preparing) PrepareLead() time.Duration { return b.lead }

func (b *preparing) Prepare(_ context.Context, _ string, slot int64) error {
	b.record("prepare", slot)
	if b.fail {
		return errors.New("connection refused")
	}
	return nil
}

func (b *preparing) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	b.record("claim", req.Slot)
	return b.Backend.Claim(ctx, req)
}

var _ claim.Preparer = (*preparing)(nil)

// next returns the next call, failing t when none comes.
func (b *preparing) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-b.seen:
		return c
	case <-time.After(waitFor):
		t.Fatal("no call of the backend arrived")
		return call{}
	}
}

// A Preparer's slot is prepared once, PrepareLead before its claim by the
// injected clock and not earlier, then claimed (at the slot, or claimAhead
// before it, the job then started at the slot); a slot already due (the
// start's catch-up) is claimed unprepared; a failed preparation changes
// nothing for the claim.
func TestPreparedBeforeTheSlot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  bool
		ahead time.Duration
	}{
		{"prepared", false, 0},
		{"preparation fails", true, 0},
		{"prepared, claimed ahead", false, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			b := &preparing{Backend: h.store, clk: h.clk, lead: time.Second, fail: tc.fail, seen: make(chan call, 100)}
			j := job("ten", "*/10 * * * * *")
			j.ClaimAhead = tc.ahead
			h.start("a", b, false, j)
			// The slot at 0 s is 100 ms old at the start: claimed at once.
			if c := b.next(t); c.op != "claim" || c.slot != slotOf(0) {
				t.Fatalf("first call %+v, want the claim of the slot at 0 s", c)
			}
			if e := h.next(); e.e.Fence.Slot != slotOf(0) {
				t.Fatalf("ran %s, want the slot at 0 s", e.e.Fence)
			}
			for _, slot := range []int{10, 20} {
				claimAt := slotTime(slot).Add(-tc.ahead)
				prepAt := claimAt.Add(-time.Second)
				h.awaitTimers(1)
				h.clk.Set(prepAt.Add(-time.Millisecond))
				h.awaitTimers(1)
				if n := len(b.seen); n != 0 {
					t.Fatalf("%d call(s) 1 ms before the preparation of the slot at %d s: %+v", n, slot, <-b.seen)
				}
				h.clk.Set(prepAt)
				if c := b.next(t); c.op != "prepare" || c.slot != slotOf(slot) || !c.at.Equal(prepAt) {
					t.Fatalf("got %+v, want the preparation of the slot at %d s, 1 s before its claim at %v", c, slot, claimAt)
				}
				h.awaitTimers(1)
				h.clk.Set(claimAt)
				if c := b.next(t); c.op != "claim" || c.slot != slotOf(slot) || !c.at.Equal(claimAt) {
					t.Fatalf("got %+v, want the claim of the slot at %d s, at %v", c, slot, claimAt)
				}
				if tc.ahead > 0 {
					ctx, cancel := context.WithTimeout(context.Background(), waitFor)
					err := h.clk.WaitTimerAt(ctx, slotTime(slot))
					cancel()
					if err != nil {
						t.Fatalf("the run won ahead does not wait for its slot: %v", err)
					}
					h.clk.Set(slotTime(slot))
				}
				if e := h.next(); e.e.Fence.Slot != slotOf(slot) {
					t.Fatalf("ran %s, want the slot at %d s", e.e.Fence, slot)
				}
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if len(b.log) != 5 {
				t.Fatalf("calls %+v, want 5: the claim at 0 s, then a preparation and a claim for 10 s and for 20 s", b.log)
			}
		})
	}
}
