package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// With peers known, the instances of a slot wait in the order of their
// SpreadDelay, rank r within [r, r+1/2] steps of spread/(n-1/2), the
// last at most spread: the first
// is the instance that claims first without peers, and each instance is
// first for about 1/n of the slots.
func TestRankedDelay(t *testing.T) {
	const spread = 10 * time.Millisecond
	for _, instances := range [][]string{{"a", "b"}, {"a", "b", "c"}, {"h1", "h2", "h3", "h4", "h5"}} {
		t.Run(fmt.Sprint(len(instances)), func(t *testing.T) {
			n := len(instances)
			step := 2 * spread / time.Duration(2*n-1)
			first := map[string]int{}
			const slots = 3000
			for k := range slots {
				slot := slotOf(k)
				minName, minD := "", time.Duration(1<<62)
				ranked := map[string]time.Duration{}
				for _, self := range instances {
					others := slices.DeleteFunc(slices.Clone(instances), func(o string) bool { return o == self })
					ranked[self] = RankedDelay(self, others, "job", slot, spread)
					if sd := SpreadDelay(self, "job", slot, spread); sd < minD {
						minName, minD = self, sd
					}
				}
				byDelay := slices.Clone(instances)
				slices.SortFunc(byDelay, func(x, y string) int { return int(ranked[x] - ranked[y]) })
				for r, in := range byDelay {
					if d := ranked[in]; d < time.Duration(r)*step || d > time.Duration(r)*step+step/2 || d > spread {
						t.Fatalf("slot %d: rank %d (%s) waits %v, want within [%v, %v]", k, r, in, d, time.Duration(r)*step, time.Duration(r)*step+step/2)
					}
				}
				if byDelay[0] != minName {
					t.Fatalf("slot %d: %s waits least, but %s has the shortest SpreadDelay", k, byDelay[0], minName)
				}
				first[byDelay[0]]++
			}
			for _, in := range instances {
				if share := float64(first[in]) / slots; share < 0.8/float64(n) || share > 1.2/float64(n) {
					t.Errorf("%s is first for %.1f%% of the slots, want about %.1f%% (%v)", in, 100*share, 100/float64(n), first)
				}
			}
		})
	}
	if d, want := RankedDelay("a", nil, "job", slotOf(1), spread), SpreadDelay("a", "job", slotOf(1), spread); d != want {
		t.Errorf("no peers: %v, want SpreadDelay %v", d, want)
	}
	if d := RankedDelay("a", []string{"b"}, "job", slotOf(1), 0); d != 0 {
		t.Errorf("spread 0 with peers: %v, want 0", d)
	}
	// Views that differ: c knows a and b, but a knows only b. Wherever c
	// ranks first among all three, a, taking itself for the first of two,
	// still waits longer than c.
	checked := 0
	for k := range 3000 {
		slot := slotOf(k)
		uc, ua, ub := SpreadDelay("c", "job", slot, spread), SpreadDelay("a", "job", slot, spread), SpreadDelay("b", "job", slot, spread)
		if uc >= ua || uc >= ub {
			continue // c is not the first of the three here
		}
		checked++
		if dc, da := RankedDelay("c", []string{"a", "b"}, "job", slot, spread), RankedDelay("a", []string{"b"}, "job", slot, spread); dc >= da {
			t.Fatalf("slot %d: c (first of three) waits %v, a (knowing b only) %v: a would win without ever learning c", k, dc, da)
		}
	}
	if checked < 500 {
		t.Fatalf("c was first in %d of 3000 slots, want about 1000", checked)
	}
}

// A peer counts for peerTTL after it was last seen; an earlier sighting
// reported late does not move it back.
func TestPeersExpire(t *testing.T) {
	var p peers
	p.saw("b", t0)
	p.saw("c", t0.Add(time.Minute))
	p.saw("c", t0) // older: ignored
	if got := p.live(t0.Add(peerTTL)); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("at peerTTL: %v, want [b c]", got)
	}
	if got := p.live(t0.Add(peerTTL + time.Nanosecond)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("just after b's peerTTL: %v, want [c]", got)
	}
	if got := p.live(t0.Add(time.Minute + peerTTL + time.Nanosecond)); len(got) != 0 {
		t.Fatalf("after every peerTTL: %v, want none", got)
	}
}

// An instance whose claim is answered running learns the holder from the
// answer, and from then on waits its rank's delay among its peers, not its
// own SpreadDelay.
func TestLoserLearnsThePeer(t *testing.T) {
	h := newHarness(t)
	const spread = 300 * time.Millisecond
	j := spreadJob("tick", "* * * * * *", spread)
	j.MaxLate = time.Second // one catch-up slot at the start: +0
	b := &timed{Backend: h.store}
	st := h.start("a", b, false, j)
	awaitDecided(t, st.s)
	// Instance b holds slot +1 before a claims it.
	won, err := h.store.Claim(context.Background(), claim.Request{Job: "tick", Slot: slotOf(1), Token: claim.NewToken(),
		Instance: "b", MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapAllow, Now: t0})
	if err != nil || won.Outcome != claim.Won {
		t.Fatalf("b's claim: %+v %v", won, err)
	}
	h.awaitTimers(1)
	h.clk.Advance(spread) // the start's catch-up slot, past any delay
	h.next()
	awaitIdle(t, st.s)
	if got := st.s.peers.live(h.clk.Now()); len(got) != 0 {
		t.Fatalf("peers %v after winning a slot, want none", got)
	}
	h.awaitTimers(1)
	h.clk.Set(slotTime(1).Add(spread)) // a's claim of +1, answered running by b
	// (timed is no claim.Leaser: a runs no backup of the run.)
	deadline := time.Now().Add(waitFor)
	for len(b.of("tick", slotOf(1))) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	h.awaitTimers(1)
	if got := st.s.peers.live(h.clk.Now()); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("peers %v after a claim answered running by b, want [b]", got)
	}
	// Slot +2: a claims after its rank's delay among {a, b}, not its own
	// SpreadDelay.
	want := RankedDelay("a", []string{"b"}, "tick", slotOf(2), spread)
	if want == SpreadDelay("a", "tick", slotOf(2), spread) {
		t.Fatalf("the test needs a slot where the ranked delay differs from the uniform one")
	}
	h.clk.Set(slotTime(2))
	if want > 0 {
		h.awaitTimers(2) // the scheduler's and the delay's
		h.clk.Advance(want)
	}
	e := h.next()
	if got := b.of("tick", slotOf(2)); e.e.Fence.Slot != slotOf(2) || len(got) != 1 || !got[0].at.Equal(slotTime(2).Add(want)) {
		t.Fatalf("ran %s, claims %v: want one claim of +2 sent at the slot + %v", e.e.Fence, got, want)
	}
}
