package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

func TestSpreadDelayDeterministicAndBounded(t *testing.T) {
	const spread = 10 * time.Millisecond
	instances := []string{"i1", "i2", "i3"}
	first := map[string]int{} // slots each instance claims first
	buckets := make([]int, 10)
	const slots = 3000
	for k := range slots {
		slot := slotOf(k)
		var ds []time.Duration
		for _, in := range instances {
			d := SpreadDelay(in, "tick", slot, spread)
			if d < 0 || d > spread {
				t.Fatalf("delay %v of (%s, %d) outside [0, %v]", d, in, slot, spread)
			}
			if again := SpreadDelay(in, "tick", slot, spread); again != d {
				t.Fatalf("delay of (%s, %d) is %v, then %v", in, slot, d, again)
			}
			buckets[min(int(d*10/spread), 9)]++
			ds = append(ds, d)
		}
		if ds[0] == ds[1] && ds[1] == ds[2] {
			t.Errorf("slot %d: every instance has the delay %v", slot, ds[0])
		}
		first[instances[slices.Index(ds, slices.Min(ds))]]++
	}
	// Each instance is the earliest for about a third of the slots, and the
	// delays cover the range evenly.
	for _, in := range instances {
		if share := float64(first[in]) / slots; share < 0.29 || share > 0.38 {
			t.Errorf("%s is first for %.1f%% of the slots, want about a third (%v)", in, 100*share, first)
		}
	}
	for i, n := range buckets {
		if share := float64(n) / (3 * slots); share < 0.08 || share > 0.12 {
			t.Errorf("%.0f%% of the delays in [%d%%, %d%%) of the spread, want about 10%% (%v)", 100*share, 10*i, 10*i+10, buckets)
		}
	}
	// The job counts too: two jobs of one instance do not share delays.
	same := 0
	for k := range 1000 {
		if SpreadDelay("i1", "a", slotOf(k), spread) == SpreadDelay("i1", "b", slotOf(k), spread) {
			same++
		}
	}
	if same > 5 {
		t.Errorf("jobs a and b have the same delay in %d of 1000 slots", same)
	}
	for _, off := range []time.Duration{0, -time.Millisecond, 500 * time.Nanosecond} {
		if d := SpreadDelay("i1", "tick", slotOf(1), off); d != 0 {
			t.Errorf("spread %v gives delay %v, want 0 (disabled)", off, d)
		}
	}
}

func TestWeightedDelay(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		d       time.Duration
		running int64
		spread  time.Duration
		maxLate time.Duration
		want    time.Duration
	}{
		{3 * ms, 0, 10 * ms, time.Minute, 3 * ms},                  // idle: the hash alone
		{3 * ms, 1, 10 * ms, time.Minute, 5500 * time.Microsecond}, // + spread/4 per run
		{3 * ms, 3, 10 * ms, time.Minute, 10500 * time.Microsecond},
		{3 * ms, 7, 10 * ms, time.Minute, 20 * ms},       // capped at twice the spread
		{9 * ms, 1 << 40, 10 * ms, time.Minute, 20 * ms}, // no overflow
		{100 * ms, 4, 400 * ms, 500 * ms, 250 * ms},      // never past half of maxLate...
		{300 * ms, 4, 400 * ms, 500 * ms, 300 * ms},      // ...nor below the hash's delay
		{0, 5, 0, time.Minute, 0},                        // no spread, no weight
	} {
		if got := weightedDelay(tc.d, tc.running, tc.spread, tc.maxLate); got != tc.want {
			t.Errorf("weightedDelay(%v, %d, %v, %v) = %v, want %v", tc.d, tc.running, tc.spread, tc.maxLate, got, tc.want)
		}
	}
}

// send is one claim as a backend received it.
type send struct {
	job   string
	slot  int64
	token claim.Token
	at    time.Time // the request's Now: the injected clock at the send
}

// timed records every claim it passes on, and fails the first fail of them
// with a transport error. It hides the backend's Leaser: no backups watch.
type timed struct {
	claim.Backend
	mu    sync.Mutex
	fail  int
	sends []send
}

func (b *timed) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	b.mu.Lock()
	b.sends = append(b.sends, send{req.Job, req.Slot, req.Token, req.Now})
	fail := b.fail > 0
	b.fail--
	b.mu.Unlock()
	if fail {
		return claim.Result{}, errors.New("connection reset by peer")
	}
	return b.Backend.Claim(ctx, req)
}

func (b *timed) of(job string, slot int64) []send {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []send
	for _, s := range b.sends {
		if s.job == job && s.slot == slot {
			out = append(out, s)
		}
	}
	return out
}

func spreadJob(name, expr string, spread time.Duration) config.Job {
	j := job(name, expr)
	j.ClaimSpread = spread
	return j
}

// slotTime is slotOf as a time.
func slotTime(sec int) time.Time { return time.UnixMilli(slotOf(sec)).UTC() }

// The first claim of a slot is sent at the slot plus the instance's delay,
// by the injected clock, not before; a catch-up slot whose delay has passed
// is claimed at once.
func TestFirstClaimWaitsItsSpreadDelay(t *testing.T) {
	h := newHarness(t)
	const spread = 300 * time.Millisecond
	b := &timed{Backend: h.store}
	st := h.start("a", b, false, spreadJob("tick", "* * * * * *", spread))
	for sec := 0; sec <= 6; sec++ {
		slot := slotTime(sec)
		if sec > 0 {
			h.awaitTimers(1)
			h.clk.Set(slot)
		}
		target := slot.Add(SpreadDelay("a", "tick", slotOf(sec), spread))
		if now := h.clk.Now(); target.After(now) {
			h.awaitTimers(2) // the scheduler's timer and the spread's
			h.clk.Advance(target.Sub(now) - time.Microsecond)
			if n := h.clk.Timers(); n != 2 {
				t.Fatalf("slot +%ds: %d timers armed a microsecond before the delay ends, want 2", sec, n)
			}
			if got := b.of("tick", slotOf(sec)); len(got) != 0 {
				t.Fatalf("slot +%ds claimed at %v, before its delay ends at %v", sec, got[0].at, target)
			}
			h.clk.Advance(time.Microsecond)
		} else {
			target = now // catch-up: already past the delay
		}
		e := h.next()
		if e.e.Fence.Slot != slotOf(sec) {
			t.Fatalf("ran %s, want slot +%ds", e.e.Fence, sec)
		}
		// The execution must have ended before the next slot's delay is
		// computed: a running one weights the delay (weightedDelay).
		awaitIdle(t, st.s)
		got := b.of("tick", slotOf(sec))
		if len(got) != 1 || !got[0].at.Equal(target) {
			t.Fatalf("slot +%ds: claims %v, want one sent at %v", sec, got, target)
		}
	}
}

// A claim that got no answer is re-sent after its backoff, with the same
// token, and is not held back by the spread again.
func TestResentClaimIsNotDelayed(t *testing.T) {
	h := newHarness(t)
	const spread = 500 * time.Millisecond
	// An instance whose delay for the slot is long enough to see.
	inst, d := "", time.Duration(0)
	for i := 0; d < 200*time.Millisecond; i++ {
		inst = fmt.Sprintf("i%d", i)
		d = SpreadDelay(inst, "minute", slotOf(1), spread)
	}
	j := spreadJob("minute", "1 * * * * *", spread) // second 1 of every minute
	j.MaxLate = 30 * time.Second
	b := &timed{Backend: h.store, fail: 1}
	h.start(inst, b, false, j)
	h.awaitTimers(1)
	h.clk.Set(slotTime(1))
	h.awaitTimers(2) // the scheduler's timer and the spread's
	h.clk.Advance(d) // the first send, which fails
	h.awaitTimers(2) // the scheduler's timer and the backoff (at most 100ms)
	h.clk.Advance(100 * time.Millisecond)
	e := h.next()
	got := b.of("minute", slotOf(1))
	if len(got) != 2 || got[0].token != got[1].token || e.e.Fence.Token != got[0].token {
		t.Fatalf("claims %v, ran %s: want two sends with the token that ran", got, e.e.Fence)
	}
	first := slotTime(1).Add(d)
	if !got[0].at.Equal(first) {
		t.Fatalf("first send at %v, want the slot + delay %v", got[0].at, first)
	}
	if resend := got[1].at.Sub(got[0].at); resend <= 0 || resend > 100*time.Millisecond {
		t.Fatalf("re-sent %v after the first send, want within the backoff (100ms) and no second delay", resend)
	}
}

// Sleeping out a delay holds no place in the claim concurrency bound: with
// one claim in flight at most, a job whose delay is short is claimed while
// another still waits out a long one.
func TestSpreadDelayHoldsNoClaimSlot(t *testing.T) {
	h := newHarness(t)
	const spread = 300 * time.Millisecond
	// Two jobs with delays far apart for slot +1.
	var short, long string
	for i := 0; short == "" || long == ""; i++ {
		name := fmt.Sprintf("j%d", i)
		switch d := SpreadDelay("a", name, slotOf(1), spread); {
		case d < 50*time.Millisecond && short == "":
			short = name
		case d > 250*time.Millisecond && long == "":
			long = name
		}
	}
	b := &timed{Backend: h.store}
	ex := newFakeExec("a", h.got, h.store)
	h.seed(spreadJob(short, "* * * * * *", spread), spreadJob(long, "* * * * * *", spread))
	s, err := New(Options{Backend: b, Clock: h.clk, Instance: "a", Executor: ex, ClaimConcurrency: 1},
		[]config.Job{spreadJob(short, "* * * * * *", spread), spreadJob(long, "* * * * * *", spread)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	awaitDecided(t, s)
	h.awaitTimers(1)
	h.clk.Advance(spread) // the start's slot of both jobs (catch-up), past any delay
	h.next()
	h.next()
	awaitIdle(t, s)
	h.awaitTimers(1)
	h.clk.Set(slotTime(1))
	h.awaitTimers(3) // the scheduler's and both delays
	dShort := SpreadDelay("a", short, slotOf(1), spread)
	h.clk.Advance(dShort)
	if e := h.next(); e.e.Fence.Job != short {
		t.Fatalf("ran %s first, want %s", e.e.Fence, short)
	}
	if got := b.of(long, slotOf(1)); len(got) != 0 {
		t.Fatalf("%s claimed before its delay", long)
	}
	want := slotTime(1).Add(SpreadDelay("a", long, slotOf(1), spread))
	h.clk.Set(want)
	if e := h.next(); e.e.Fence.Job != long {
		t.Fatalf("ran %s, want %s", e.e.Fence, long)
	}
	if got := b.of(long, slotOf(1))[0].at; !got.Equal(want) {
		t.Fatalf("%s claimed at %v, want %v", long, got, want)
	}
}

// Three instances race for every slot of one job: the one whose delay for
// the slot is the shortest claims first and wins, so the wins move from
// instance to instance. The losers learn the winners from the answers:
// from then on the delays are the instances' ranks' (0, spread/2, spread).
func TestSpreadSharesSlotsAmongInstances(t *testing.T) {
	h := newHarness(t)
	const spread = 20 * time.Millisecond
	instances := []string{"a", "b", "c"}
	var claimed atomic.Int64
	var scheds []*Scheduler
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	b := &timed{Backend: h.store} // no Leaser: losers do not watch
	for _, in := range instances {
		s, err := New(Options{Backend: b, Clock: h.clk, Instance: in, Executor: newFakeExec(in, h.got, h.store),
			Hooks: Hooks{Claimed: func(string, time.Time, claim.Result, time.Duration) { claimed.Add(1) }}},
			[]config.Job{spreadJob("tick", "* * * * * *", spread)})
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
		wg.Go(func() { _ = s.Run(ctx) })
	}
	awaitClaims := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(waitFor)
		for claimed.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d claims answered, want %d", claimed.Load(), n)
			}
			runtime.Gosched()
		}
	}
	// A fresh store: the start claims nothing from before it.
	awaitDecided(t, scheds...)
	wins := map[string]int{}
	const slots = 30
	for sec := 1; sec <= slots; sec++ {
		awaitIdle(t, scheds...)
		h.awaitTimers(3)
		slot := slotTime(sec)
		h.clk.Set(slot)
		delays := map[string]time.Duration{}
		var deadlines []time.Duration
		for i, in := range instances {
			d := scheds[i].spreadDelay(spreadJob("tick", "* * * * * *", spread), slot)
			delays[in] = d
			if d > 0 && !slices.Contains(deadlines, d) {
				deadlines = append(deadlines, d)
			}
		}
		slices.Sort(deadlines)
		h.awaitTimers(3 + countIf(delays, func(d time.Duration) bool { return d > 0 }))
		base := int64(3 * (sec - 1))
		awaitClaims(base + int64(countIf(delays, func(d time.Duration) bool { return d == 0 })))
		for _, d := range deadlines {
			h.clk.Set(slot.Add(d))
			awaitClaims(base + int64(countIf(delays, func(x time.Duration) bool { return x <= d })))
		}
		e := h.next()
		if e.e.Fence.Slot != slotOf(sec) {
			t.Fatalf("ran %s, want slot +%ds", e.e.Fence, sec)
		}
		for _, in := range instances {
			if in != e.instance && delays[in] < delays[e.instance] {
				t.Fatalf("slot +%ds won by %s (delay %v), but %s's delay was %v", sec, e.instance, delays[e.instance], in, delays[in])
			}
		}
		wins[e.instance]++
	}
	h.none(3)
	for i, in := range instances {
		if wins[in] < 3 {
			t.Errorf("%s won %d of %d slots: %v", in, wins[in], slots, wins)
		}
		if got, want := scheds[i].peers.live(h.clk.Now()), slices.DeleteFunc(slices.Clone(instances), func(o string) bool { return o == in }); !slices.Equal(got, want) {
			t.Errorf("%s knows the peers %v, want %v", in, got, want)
		}
	}
	t.Logf("wins over %d slots: %v", slots, wins)
}

// awaitIdle waits until no execution is in progress on scheds, so that no
// load weight changes the delays of the next slot.
func awaitIdle(t *testing.T, scheds ...*Scheduler) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for _, s := range scheds {
		for s.running.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("an execution did not end")
			}
			runtime.Gosched()
		}
	}
}

func countIf(m map[string]time.Duration, f func(time.Duration) bool) int {
	n := 0
	for _, v := range m {
		if f(v) {
			n++
		}
	}
	return n
}

// An instance running k jobs holds its claims back k quarters of the spread
// longer.
func TestLoadWeightsTheDelay(t *testing.T) {
	h := newHarness(t)
	const spread = 100 * time.Millisecond
	b := &timed{Backend: h.store}
	j := spreadJob("tick", "* * * * * *", spread)
	h.start("a", b, true, j) // executions hang: each one is load
	h.next()                 // the start's slot, still running
	for sec := 1; sec <= 3; sec++ {
		h.awaitTimers(1)
		slot := slotTime(sec)
		h.clk.Set(slot)
		d := SpreadDelay("a", "tick", slotOf(sec), spread)
		want := slot.Add(min(d+time.Duration(sec)*spread/4, 2*spread)) // sec runs hang
		h.awaitTimers(2)
		h.clk.Set(want.Add(-time.Microsecond))
		if got := b.of("tick", slotOf(sec)); len(got) != 0 {
			t.Fatalf("slot +%ds claimed at %v, before %v", sec, got[0].at, want)
		}
		h.clk.Set(want)
		h.next()
		if got := b.of("tick", slotOf(sec)); len(got) != 1 || !got[0].at.Equal(want) {
			t.Fatalf("slot +%ds: claims %v, want one at %v (delay %v + %d runs' weight)", sec, got, want, d, sec)
		}
	}
}

// claimSpread 0 disables the spread: the claim goes at the slot, with no
// timer of its own.
func TestZeroSpreadClaimsAtTheSlot(t *testing.T) {
	h := newHarness(t)
	b := &timed{Backend: h.store}
	h.start("a", b, false, spreadJob("tick", "* * * * * *", 0))
	h.next() // the start's slot
	for sec := 1; sec <= 3; sec++ {
		h.awaitTimers(1)
		h.clk.Set(slotTime(sec))
		h.next()
		if got := b.of("tick", slotOf(sec)); len(got) != 1 || !got[0].at.Equal(slotTime(sec)) {
			t.Fatalf("slot +%ds: claims %v, want one at the slot", sec, got)
		}
	}
	h.none(1)
}
