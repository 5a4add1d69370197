package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
)

// errDown is every call's answer while a rigStore is down.
var errDown = errors.New("store unreachable")

// rigStore is the memory backend as the stop tests need it: its claims
// may be held until the test lets them through, and while it is down
// claims get no answer (until their caller gives up) and every other call
// fails.
type rigStore struct {
	mem *memclaim.Backend
	// arrived receives one value per claim that reached the store.
	arrived chan struct{}
	// hold, when not nil, holds each claim until it is closed.
	hold chan struct{}
	down atomic.Bool
}

func (r *rigStore) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	r.arrived <- struct{}{}
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-ctx.Done():
			return claim.Result{}, ctx.Err()
		}
	}
	if r.down.Load() {
		<-ctx.Done()
		return claim.Result{}, ctx.Err()
	}
	return r.mem.Claim(context.Background(), req)
}

func (r *rigStore) Finish(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	if r.down.Load() {
		return errDown
	}
	return r.mem.Finish(ctx, f, fin)
}

func (r *rigStore) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	if r.down.Load() {
		return nil, errDown
	}
	return r.mem.ListRuns(ctx, q)
}

func (r *rigStore) Close() error { return nil }

// rigClaimOnly is a claim-only store: no leases, no backups.
type rigClaimOnly struct{ *rigStore }

// rigLease is a lease store.
type rigLease struct{ *rigStore }

func (r rigLease) Renew(ctx context.Context, f claim.Fence, lease time.Duration) (claim.Result, error) {
	if r.down.Load() {
		return claim.Result{}, errDown
	}
	return r.mem.Renew(ctx, f, lease)
}

func (r rigLease) Release(ctx context.Context, f claim.Fence) error {
	if r.down.Load() {
		return errDown
	}
	return r.mem.Release(ctx, f)
}

func (r rigLease) Read(ctx context.Context, job string, slot int64) (claim.Run, time.Time, error) {
	if r.down.Load() {
		return claim.Run{}, time.Time{}, errDown
	}
	return r.mem.Read(ctx, job, slot)
}

// stopRig is one instance whose only job has one slot, at 00:00:01 (900
// ms after t0), claimed 50 ms ahead with no spread.
type stopRig struct {
	t      *testing.T
	h      *harness
	store  *rigStore
	cancel context.CancelFunc
	done   chan struct{}
	logs   *observer.ObservedLogs
	slot   time.Time
}

// stopWindow is the rigs' StopWindow; their grace is longer, so that a
// Run that returns was not held by the grace.
const stopWindow = 5 * time.Second

// newStopRig starts the instance on a lease store, or a claim-only one.
func newStopRig(t *testing.T, lease bool, hold bool) *stopRig {
	t.Helper()
	h := newHarness(t)
	st := &rigStore{mem: h.store, arrived: make(chan struct{}, 10)}
	if hold {
		st.hold = make(chan struct{})
	}
	var b claim.Backend = rigClaimOnly{st}
	if lease {
		b = rigLease{st}
	}
	j := job("once", "1 0 0 1 1 *")
	j.ClaimAhead = 50 * time.Millisecond
	// Each call's own bound (callTimeout, in real time) must not end a
	// call before the stop's window, which the test moves on the fake
	// clock.
	j.Heartbeat = time.Minute
	core, logs := observer.New(zapcore.InfoLevel)
	ex := newFakeExec("a", h.got, h.store)
	s, err := New(Options{Backend: b, Clock: h.clk, Instance: "a", Executor: ex, Log: zap.New(core),
		ShutdownGrace: time.Minute, StopWindow: stopWindow, ClaimTimeout: time.Minute}, []config.Job{j})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &stopRig{t: t, h: h, store: st, cancel: cancel, done: make(chan struct{}), logs: logs,
		slot: time.UnixMilli(slotOf(1)).UTC()}
	go func() { _ = s.Run(ctx); close(r.done) }()
	t.Cleanup(func() {
		cancel()
		if hold {
			select {
			case <-st.hold:
			default:
				close(st.hold)
			}
		}
		select {
		case <-r.done:
		case <-time.After(waitFor):
			t.Error("scheduler did not stop")
		}
	})
	return r
}

// sendClaim moves the clock to the claim's due time and awaits its
// arrival at the store.
func (r *stopRig) sendClaim() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	due := r.slot.Add(-50 * time.Millisecond)
	if err := r.h.clk.WaitTimerAt(ctx, due); err != nil {
		r.t.Fatalf("no timer for the claim 50 ms ahead: %v", err)
	}
	r.h.clk.Set(due)
	select {
	case <-r.store.arrived:
	case <-ctx.Done():
		r.t.Fatal("the claim did not reach the store")
	}
}

// awaitWin awaits the won run's wait for its slot.
func (r *stopRig) awaitWin() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := r.h.clk.WaitTimerAt(ctx, r.slot); err != nil {
		r.t.Fatalf("the won run does not wait for its slot: %v", err)
	}
}

// stopped awaits Run's return and checks that nothing was executed.
func (r *stopRig) stopped() {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(waitFor):
		r.t.Fatal("Run did not return")
	}
	select {
	case e := <-r.h.got:
		r.t.Fatalf("%s was started although the stop came before its slot", e.e.Fence)
	default:
	}
}

// windowEnds waits for the stop's window (begun at stop) to be armed,
// checks that Run has not returned before it, ends it, and waits for Run.
func (r *stopRig) windowEnds(ctx context.Context, stop time.Time) {
	r.t.Helper()
	if err := r.h.clk.WaitTimerAt(ctx, stop.Add(stopWindow)); err != nil {
		r.t.Fatalf("no timer for the stop's window: %v", err)
	}
	select {
	case <-r.done:
		r.t.Fatal("Run returned before the stop's window ended, with a call still unsettled")
	default:
	}
	r.h.clk.Set(stop.Add(stopWindow))
	r.stopped()
}

// settled checks that the slot's run is not left running with a live
// lease: released on a lease store, recorded interrupted on a claim-only
// one.
func (r *stopRig) settled(lease bool) {
	r.t.Helper()
	run, now, err := r.h.store.Read(context.Background(), "once", r.slot.UnixMilli())
	if err != nil {
		r.t.Fatalf("the slot's run: %v", err)
	}
	switch {
	case lease && (run.Status != claim.StatusRunning || run.LeaseUntil.After(now)):
		r.t.Fatalf("run %s, lease until %v at %v: want running with its lease released", run.Status, run.LeaseUntil, now)
	case !lease && run.Status != claim.StatusInterrupted:
		r.t.Fatalf("run %s: want interrupted", run.Status)
	}
}

// warned returns the warnings logged with msg's prefix whose job, slot
// and (when attempt > 0) attempt are the rig's run's.
func (r *stopRig) warned(prefix string, attempt int) int {
	n := 0
	for _, e := range r.logs.FilterLevelExact(zapcore.WarnLevel).All() {
		f := e.ContextMap()
		if len(e.Message) < len(prefix) || e.Message[:len(prefix)] != prefix || f["job"] != "once" {
			continue
		}
		if slot, _ := f["slot"].(time.Time); !slot.Equal(r.slot) {
			continue
		}
		if a, _ := f["attempt"].(int64); attempt > 0 && a != int64(attempt) {
			continue
		}
		n++
	}
	return n
}

func forEachStore(t *testing.T, test func(t *testing.T, lease bool)) {
	t.Run("lease", func(t *testing.T) { test(t, true) })
	t.Run("claim-only", func(t *testing.T) { test(t, false) })
}

// A run won ahead of its slot that the stop reaches first is not started:
// a lease store's lease is released for another instance to take it at
// once; a claim-only store's run is recorded interrupted (no backup will
// run it), so that it is not left running.
func TestStopBetweenWinAndSlot(t *testing.T) {
	forEachStore(t, func(t *testing.T, lease bool) {
		r := newStopRig(t, lease, false)
		r.sendClaim()
		r.awaitWin()
		r.cancel()
		r.stopped()
		r.settled(lease)
	})
}

// A claim in flight when the stop begins is not given up: its answer is
// awaited, and the win it brings is released or recorded interrupted as
// a win before the stop would be.
func TestStopWithAClaimInFlightThatWins(t *testing.T) {
	forEachStore(t, func(t *testing.T, lease bool) {
		r := newStopRig(t, lease, true)
		r.sendClaim()
		r.cancel() // the claim is in the store's hands
		select {
		case <-r.done:
			t.Fatal("Run returned while a claim was in flight")
		default:
		}
		close(r.store.hold) // the store decides: won
		r.stopped()
		r.settled(lease)
		if n := r.warned("claim unanswered", 0); n != 0 {
			t.Fatalf("%d warnings of an unanswered claim; it was answered", n)
		}
	})
}

// During a store outage the stop still ends within the stop window: a run
// won ahead whose release (or interrupted record) fails is retried until
// the window is over, then logged at warn with its job, slot and attempt.
func TestStopDuringAnOutageEndsWithinTheWindow(t *testing.T) {
	forEachStore(t, func(t *testing.T, lease bool) {
		r := newStopRig(t, lease, false)
		r.sendClaim()
		r.awaitWin()
		r.store.down.Store(true)
		stop := r.h.clk.Now()
		r.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		// The failed call is retried after 100 ms, within the window.
		if err := r.h.clk.WaitTimerAt(ctx, stop.Add(100*time.Millisecond)); err != nil {
			t.Fatalf("the failed call is not retried: %v", err)
		}
		r.windowEnds(ctx, stop)
		if n := r.warned("not started, and", 1); n != 1 {
			t.Fatalf("%d warnings naming the run (job, slot, attempt 1) left unsettled, want 1: %v", n, r.logs.All())
		}
	})
}

// A claim in flight during an outage gets no answer: the stop awaits it
// for the window, then logs it at warn (it may have won with its answer
// lost) and ends.
func TestStopWithAClaimUnansweredInAnOutage(t *testing.T) {
	forEachStore(t, func(t *testing.T, lease bool) {
		r := newStopRig(t, lease, false)
		r.store.down.Store(true)
		r.sendClaim()
		stop := r.h.clk.Now()
		r.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		r.windowEnds(ctx, stop)
		if n := r.warned("claim unanswered at stop", 0); n != 1 {
			t.Fatalf("%d warnings of the unanswered claim, want 1: %v", n, r.logs.All())
		}
	})
}

// In a batch: a claim still queued when the stop begins is not sent
// (errNotSent); one whose batch had left is awaited, and gets its answer.
func TestCoalescerAtTheStop(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	g := &gatedBatcher{Batcher: memclaim.New(fake), sent: make(chan []claim.Request, 10), gate: make(chan struct{})}
	c := newCoalescer(g)
	c.maxFlight = 1
	r := claim.Request{Job: "a", Slot: fake.Now().UnixMilli(), Token: claim.NewToken(), Instance: "i",
		MaxLate: time.Minute, Lease: time.Minute, MaxAttempts: 1}
	queued := r
	queued.Job = "b"
	stop, stopped := context.WithCancel(t.Context())
	type answer struct {
		res claim.Result
		err error
	}
	inFlight, held := make(chan answer, 1), make(chan answer, 1)
	go func() { res, err := c.claimBefore(t.Context(), stop, r); inFlight <- answer{res, err} }()
	<-g.sent
	go func() { res, err := c.claimBefore(t.Context(), stop, queued); held <- answer{res, err} }()
	waitQueued(t, c, 1)
	stopped()
	if a := <-held; !errors.Is(a.err, errNotSent) {
		t.Fatalf("a claim queued at the stop: %v, want errNotSent", a.err)
	}
	g.gate <- struct{}{}
	if a := <-inFlight; a.err != nil || a.res.Outcome != claim.Won {
		t.Fatalf("a claim in flight at the stop: %v %v, want its answer (won)", a.res.Outcome, a.err)
	}
	waitIdle(t, c)
	select {
	case b := <-g.sent:
		t.Fatalf("a claim queued at the stop was sent: %v", b)
	default:
	}
}
