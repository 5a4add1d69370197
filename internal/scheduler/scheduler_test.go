package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
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
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/schedule"
)

// t0 is 100ms past a whole second: every-second slots fall between steps of
// the fake clock, and a step leaves the slot just due within a 400ms maxLate.
// The slot at the whole second before t0 is within maxLate at start, so
// every scheduler runs it first.
var t0 = time.Date(2027, 1, 1, 0, 0, 0, 100_000_000, time.UTC)

// waitFor bounds how long a test awaits a condition in real time; the fake
// clock drives the scheduler, this only stops a broken test from hanging.
const waitFor = 10 * time.Second

func job(name, expr string) config.Job {
	return config.Job{
		Name: name, Schedule: expr, Location: time.UTC, Timezone: "UTC",
		MaxLate: 400 * time.Millisecond, Lease: 3 * time.Second, Heartbeat: time.Second,
		MaxAttempts: 3, Overlap: "allow", CatchUp: config.CatchUpAll, Timeout: time.Hour, Command: "true", Shell: "/bin/sh",
	}
}

// execution is one call of the fake executor.
type execution struct {
	instance string
	e        runner.Execution
}

// fakeExec records executions; with hold set, each blocks until released
// or its context is cancelled (a runner that hangs or dies).
type fakeExec struct {
	instance string
	got      chan execution
	hold     bool
	release  chan struct{}
	b        claim.Backend
	stopped  atomic.Int32 // executions whose context was cancelled
	// unrecorded: each execution ends as a runner that fenced itself
	// does, its result not recorded.
	unrecorded bool
}

func newFakeExec(instance string, got chan execution, b claim.Backend) *fakeExec {
	return &fakeExec{instance: instance, got: got, release: make(chan struct{}), b: b}
}

// Without hold the run is finished in the store before the execution is
// reported, so a test that has seen it may move the clock past its lease.
func (f *fakeExec) Run(ctx context.Context, e runner.Execution) runner.Report {
	if f.unrecorded {
		f.got <- execution{f.instance, e}
		return runner.Report{Fenced: true, Err: runner.ErrLeaseLost}
	}
	if f.hold {
		f.got <- execution{f.instance, e}
		select {
		case <-f.release:
		case <-ctx.Done():
			f.stopped.Add(1)
			return runner.Report{Released: true}
		}
	}
	err := f.b.Finish(context.Background(), e.Fence, claim.Finish{Status: claim.StatusSucceeded})
	if !f.hold {
		f.got <- execution{f.instance, e}
	}
	return runner.Report{Status: claim.StatusSucceeded, Recorded: err == nil, Err: err}
}

// harness runs schedulers on one fake clock and one in-memory store.
type harness struct {
	t     *testing.T
	clk   *clock.Fake
	store *memclaim.Backend
	got   chan execution
	// unrecorded is given to the executors of instances started from now on.
	unrecorded bool
	// fresh: start does not seed the store (a cluster's first start).
	fresh bool
	// undecided: start returns without awaiting the start's catch-up.
	undecided bool
	// hooks and log are given to the instances started from now on.
	hooks Hooks
	log   *zap.Logger
	// controlPoll is the instances' ControlPoll (0: pauses not read).
	controlPoll time.Duration
	// drifting is the instances' Options.Drifting.
	drifting func(job string) bool
}

func newHarness(t *testing.T) *harness {
	clk := clock.NewFake(t0)
	return &harness{t: t, clk: clk, store: memclaim.New(clk), got: make(chan execution, 1000)}
}

type started struct {
	s      *Scheduler
	exec   *fakeExec
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // Run's result, once done is closed
}

// seed records, for each job the store has no run of, a finished run of
// its newest slot older than maxLate: the cluster ran the job before, and
// the start's catch-up (catchUp all in job) claims every slot within
// maxLate before it.
func (h *harness) seed(jobs ...config.Job) {
	h.t.Helper()
	ctx := context.Background()
	for _, j := range jobs {
		if runs, err := h.store.ListRuns(ctx, claim.ListQuery{Job: j.Name, Limit: 1}); err != nil || len(runs) > 0 {
			continue
		}
		sc, err := schedule.Parse(j.Schedule, j.Location)
		if err != nil {
			h.t.Fatal(err)
		}
		h.record(j, lastAtOrBefore(sc, h.clk.Now().Add(-j.MaxLate)))
	}
}

// record writes a finished run of (j, slot) by an instance of the past.
func (h *harness) record(j config.Job, slot time.Time) {
	h.t.Helper()
	ctx := context.Background()
	req := claim.Request{Job: j.Name, Slot: slot.UnixMilli(), Token: claim.NewToken(), Instance: "past",
		MaxLate: 100 * 365 * 24 * time.Hour, Lease: time.Minute, MaxAttempts: 1, Overlap: claim.OverlapAllow}
	if res, err := h.store.Claim(ctx, req); err != nil || res.Outcome != claim.Won {
		h.t.Fatalf("recording %s@%v: %+v %v", j.Name, slot, res, err)
	}
	if err := h.store.Finish(ctx, req.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) start(instance string, b claim.Backend, hold bool, jobs ...config.Job) *started {
	h.t.Helper()
	if !h.fresh {
		h.seed(jobs...)
	}
	ex := newFakeExec(instance, h.got, h.store)
	ex.hold, ex.unrecorded = hold, h.unrecorded
	s, err := New(Options{Backend: b, Clock: h.clk, Instance: instance, Executor: ex, ShutdownGrace: 5 * time.Second,
		Hooks: h.hooks, Log: h.log, ControlPoll: h.controlPoll, Drifting: h.drifting}, jobs)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &started{s: s, exec: ex, cancel: cancel, done: make(chan struct{})}
	go func() { st.err = s.Run(ctx); close(st.done) }()
	if !h.undecided {
		awaitDecided(h.t, s)
	}
	h.t.Cleanup(func() {
		cancel()
		close(ex.release)
		select {
		case <-st.done:
		case <-time.After(waitFor):
			h.t.Error("scheduler did not stop")
		}
	})
	return st
}

// awaitDecided waits until each of scheds has decided its start's
// catch-up from the store's answer.
func awaitDecided(t *testing.T, scheds ...*Scheduler) {
	t.Helper()
	for _, s := range scheds {
		select {
		case <-s.decided:
		case <-time.After(waitFor):
			t.Fatal("the start's catch-up was not decided")
		}
	}
}

// next awaits the next execution.
func (h *harness) next() execution {
	h.t.Helper()
	select {
	case e := <-h.got:
		return e
	case <-time.After(waitFor):
		h.t.Fatal("no execution arrived")
		return execution{}
	}
}

// none asserts that no execution is pending once every goroutine of the
// schedulers is waiting on the clock again (n armed timers).
func (h *harness) none(n int) {
	h.t.Helper()
	h.awaitTimers(n)
	select {
	case e := <-h.got:
		h.t.Fatalf("unexpected execution %s by %s", e.e.Fence, e.instance)
	default:
	}
}

func (h *harness) awaitTimers(n int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := h.clk.WaitTimers(ctx, n); err != nil {
		h.t.Fatalf("waiting for %d armed timers (have %d): %v", n, h.clk.Timers(), err)
	}
}

func slotOf(sec int) int64 {
	return t0.Truncate(time.Second).Add(time.Duration(sec) * time.Second).UnixMilli()
}

func TestEverySlotRunsOnceInOrder(t *testing.T) {
	h := newHarness(t)
	h.start("a", h.store, false, job("tick", "* * * * * *"))
	for sec := 0; sec <= 5; sec++ {
		if sec > 0 {
			h.awaitTimers(1)
			h.clk.Advance(time.Second)
		}
		e := h.next()
		if e.e.Fence.Slot != slotOf(sec) || e.e.Fence.Attempt != 1 {
			t.Fatalf("step %d: ran %s, want slot %d attempt 1", sec, e.e.Fence, slotOf(sec))
		}
		if !e.e.Slot.Equal(time.UnixMilli(slotOf(sec)).UTC()) {
			t.Fatalf("execution slot %v does not match its fence", e.e.Slot)
		}
	}
	h.none(1)
}

func TestOneTimerForAllJobs(t *testing.T) {
	h := newHarness(t)
	var jobs []config.Job
	for i := range 100 {
		jobs = append(jobs, job(fmt.Sprintf("j%03d", i), fmt.Sprintf("%d * * * *", i%60)))
	}
	h.start("a", h.store, false, jobs...)
	h.awaitTimers(1)
	if n := h.clk.Timers(); n != 1 {
		t.Fatalf("100 idle jobs arm %d timers, want the scheduler's one", n)
	}
}

func TestTwoInstancesRunEachSlotOnce(t *testing.T) {
	h := newHarness(t)
	h.start("a", h.store, false, job("tick", "* * * * * *"))
	h.start("b", h.store, false, job("tick", "* * * * * *"))
	seen := map[int64]string{}
	for sec := 0; sec <= 10; sec++ {
		if sec > 0 {
			h.awaitTimers(2)
			h.clk.Advance(time.Second)
		}
		e := h.next()
		if prev, dup := seen[e.e.Fence.Slot]; dup {
			t.Fatalf("slot %d ran twice: %s and %s (attempt %d, now %v)", e.e.Fence.Slot, prev, e.instance, e.e.Fence.Attempt, h.clk.Now())
		}
		seen[e.e.Fence.Slot] = e.instance
	}
	h.none(2)
	if len(seen) != 11 {
		t.Fatalf("ran %d slots, want 11", len(seen))
	}
}

func TestPauseWithinMaxLateCatchesUp(t *testing.T) {
	h := newHarness(t)
	j := job("tick", "* * * * * *")
	j.MaxLate = 10 * time.Second
	h.start("a", h.store, false, j)
	// Startup claims the slots within maxLate before t0 too: t0-9s .. t0.
	for range 10 {
		h.next()
	}
	h.awaitTimers(1)
	h.clk.Advance(4 * time.Second) // a pause: four slots came due at once
	ran := map[int64]bool{}
	for range 4 {
		ran[h.next().e.Fence.Slot] = true
	}
	for sec := 1; sec <= 4; sec++ {
		if !ran[slotOf(sec)] {
			t.Errorf("slot +%ds was not caught up after the pause", sec)
		}
	}
	h.none(1)
}

func TestPauseBeyondMaxLateCountsMissed(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	missed := 0
	ex := newFakeExec("a", h.got, h.store)
	s, err := New(Options{Backend: h.store, Clock: h.clk, Instance: "a", Executor: ex,
		Hooks: Hooks{Missed: func(_, _ string, n int) { mu.Lock(); missed += n; mu.Unlock() }}},
		[]config.Job{job("tick", "* * * * * *")})
	h.seed(job("tick", "* * * * * *"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	awaitDecided(t, s)
	defer func() { cancel(); <-done }()

	if e := h.next(); e.e.Fence.Slot != slotOf(0) {
		t.Fatalf("ran %s first, want the start's slot", e.e.Fence)
	}
	h.awaitTimers(1)
	h.clk.Advance(30 * time.Second) // slots +1..+30 due; maxLate 400ms keeps only +30 (100ms old)
	e := h.next()
	if e.e.Fence.Slot != slotOf(30) {
		t.Fatalf("ran %s, want only the slot within maxLate (+30s)", e.e.Fence)
	}
	h.none(1)
	mu.Lock()
	defer mu.Unlock()
	if missed != 29 {
		t.Fatalf("missed %d slots, want 29", missed)
	}
}

// flaky fails the first n claims with a transport error and remembers the
// tokens it was sent.
type flaky struct {
	claim.Backend
	mu     sync.Mutex
	fail   int
	tokens []claim.Token
}

func (f *flaky) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	f.mu.Lock()
	f.tokens = append(f.tokens, req.Token)
	fail := f.fail > 0
	f.fail--
	f.mu.Unlock()
	if fail {
		return claim.Result{}, errors.New("connection reset by peer")
	}
	return f.Backend.Claim(ctx, req)
}

func TestClaimResentWithSameTokenAfterTransportError(t *testing.T) {
	h := newHarness(t)
	j := job("minute", "0 * * * * *")
	j.MaxLate = time.Minute // the slot at 00:00:00 is due at start, within maxLate
	fb := &flaky{Backend: h.store, fail: 2}
	h.start("a", fb, false, j)
	// Each failed claim waits a backoff on the fake clock.
	for range 2 {
		h.awaitTimers(2)
		h.clk.Advance(200 * time.Millisecond)
	}
	e := h.next()
	if e.e.Fence.Attempt != 1 {
		t.Fatalf("ran %s, want attempt 1", e.e.Fence)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.tokens) != 3 || fb.tokens[0] != fb.tokens[1] || fb.tokens[1] != fb.tokens[2] {
		t.Fatalf("claims sent with tokens %v, want the same token three times", fb.tokens)
	}
	if e.e.Fence.Token != fb.tokens[0] {
		t.Fatalf("ran with token %s, not the claim's %s", e.e.Fence.Token, fb.tokens[0])
	}
}

func TestBackupTakesOverExpiredLease(t *testing.T) {
	h := newHarness(t)
	j := job("long", "0 0 * * * *") // hourly, at second 0
	j.MaxLate = time.Minute
	h.clk.Set(time.Date(2027, 1, 1, 0, 59, 59, 900_000_000, time.UTC))
	// a wins and hangs without renewing, like a runner whose host died.
	a := h.start("a", h.store, true, j)
	h.awaitTimers(1)
	h.clk.Advance(time.Second)
	first := h.next()
	if first.instance != "a" || first.e.Fence.Attempt != 1 {
		t.Fatalf("first run %s by %s, want attempt 1 by a", first.e.Fence, first.instance)
	}
	// b starts, finds the run within maxLate held by a, and watches it:
	// three timers are armed then (a's and b's scheduler, b's watch). The
	// lease (3s) ends at 01:00:03.9; b's reads every heartbeat (1s) see it
	// live until the one at 01:00:04.9.
	h.start("b", h.store, true, j)
	second := h.stepUntilExec(3, time.Second, 6)
	if second.instance != "b" || second.e.Fence.Attempt != 2 || second.e.Fence.Slot != first.e.Fence.Slot {
		t.Fatalf("takeover %s by %s, want attempt 2 of the same slot by b", second.e.Fence, second.instance)
	}
	if second.e.Fence.Token == first.e.Fence.Token {
		t.Fatal("the takeover reused the old token")
	}
	// a's late result is fenced.
	if err := h.store.Finish(context.Background(), first.e.Fence, claim.Finish{Status: claim.StatusSucceeded}); !errors.Is(err, claim.ErrFenced) {
		t.Fatalf("old attempt's Finish: %v, want ErrFenced", err)
	}
	_ = a
}

// aHoldsTheHour starts instance a, which wins the 01:00 slot of an hourly
// job (maxLate a minute) and hangs without renewing, like a runner whose
// host died. It returns the job and a's execution.
func aHoldsTheHour(h *harness) (config.Job, execution) {
	h.t.Helper()
	j := job("long", "0 0 * * * *")
	j.MaxLate = time.Minute
	h.clk.Set(time.Date(2027, 1, 1, 0, 59, 59, 900_000_000, time.UTC))
	h.start("a", h.store, true, j)
	h.awaitTimers(1)
	h.clk.Advance(time.Second)
	return j, h.next()
}

// lostReply is a store whose first read of a run gets no answer, as on a
// connection whose replies a network device drops: that read returns only
// when its context ends.
type lostReply struct {
	*memclaim.Backend
	lost atomic.Bool // set once the unanswered read was sent
}

func (l *lostReply) Read(ctx context.Context, job string, slot int64) (claim.Run, time.Time, error) {
	if l.lost.CompareAndSwap(false, true) {
		<-ctx.Done()
		return claim.Run{}, time.Time{}, ctx.Err()
	}
	return l.Backend.Read(ctx, job, slot)
}

// TestBackupReadWithLostReplyIsSentAgain: a backup's read that gets no
// answer ends after the call timeout (the heartbeat, at least a second, in
// real time), and the watch reads again and takes the run over when the
// lease has ended, as in TestBackupTakesOverExpiredLease. A read without
// a bound would end the watch for good: the run would have one backup
// less.
func TestBackupReadWithLostReplyIsSentAgain(t *testing.T) {
	h := newHarness(t)
	j, first := aHoldsTheHour(h)
	lr := &lostReply{Backend: h.store}
	h.start("b", lr, true, j)
	second := h.stepUntilExec(3, time.Second, 8)
	if !lr.lost.Load() {
		t.Fatal("b never read the run")
	}
	if second.instance != "b" || second.e.Fence.Attempt != 2 || second.e.Fence.Slot != first.e.Fence.Slot {
		t.Fatalf("takeover %s by %s, want attempt 2 of the same slot by b", second.e.Fence, second.instance)
	}
}

// lostClaimReply is a store that carries out the claims it is sent and
// loses the first n answers that say a claim won the given attempt, as a
// connection whose replies a network device drops: the run is then held by
// that claim's token, and its sender does not know it.
type lostClaimReply struct {
	*memclaim.Backend
	attempt int
	mu      sync.Mutex
	n       int         // answers still to lose
	lost    claim.Token // the token whose winning answer was lost
}

func (l *lostClaimReply) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	res, err := l.ClaimBatch(ctx, []claim.Request{req})
	if err != nil {
		return claim.Result{}, err
	}
	return res[0], nil
}

func (l *lostClaimReply) ClaimBatch(ctx context.Context, reqs []claim.Request) ([]claim.Result, error) {
	res, err := l.Backend.ClaimBatch(ctx, reqs)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range res {
		if r.Outcome == claim.Won && r.Attempt == l.attempt && l.n > 0 {
			l.n--
			l.lost = reqs[i].Token
			return nil, errors.New("read tcp: i/o timeout (the answer was lost)")
		}
	}
	return res, nil
}

func (l *lostClaimReply) lostToken() claim.Token {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// TestFirstClaimWithLostRepliesIsSentPastMaxLate: a first claim that won
// the run with its answers lost until past maxLate is still sent again on
// a lease store, learns it won, and runs the slot. Abandoned at maxLate, it
// would leave the run held by nobody for a lease.
func TestFirstClaimWithLostRepliesIsSentPastMaxLate(t *testing.T) {
	h := newHarness(t)
	j := job("hourly", "0 0 * * * *") // maxLate 400 ms, lease 3 s
	h.clk.Set(time.Date(2027, 1, 1, 0, 59, 59, 900_000_000, time.UTC))
	slot := time.Date(2027, 1, 1, 1, 0, 0, 0, time.UTC)
	// Backoffs of 50-100, 100-200, 200-400 and 400-800 ms: the fifth copy
	// goes out 750 ms to 1.5 s after the slot.
	lr := &lostClaimReply{Backend: h.store, attempt: 1, n: 4}
	h.start("a", lr, true, j)
	h.awaitTimers(1)
	h.clk.Advance(100 * time.Millisecond)
	e := h.stepUntilExec(2, 100*time.Millisecond, 30)
	if h.clk.Now().Sub(slot) <= j.MaxLate {
		t.Fatalf("the answer came %v after the slot, within maxLate (%v): the test proves nothing", h.clk.Now().Sub(slot), j.MaxLate)
	}
	if e.e.Fence.Slot != slot.UnixMilli() || e.e.Fence.Attempt != 1 || e.e.Fence.Token != lr.lostToken() {
		t.Fatalf("ran %s, want attempt 1 of %d with the lost claim's token %s", e.e.Fence, slot.UnixMilli(), lr.lostToken().Short())
	}
}

// TestBackupTakeoverWithLostReplyIsSentAgain: a backup whose takeover claim
// won the run with the answer lost sends the same claim again, learns it
// won, and runs attempt 2 at once. A fresh token would find the run held
// by the lost claim, wait out its lease, and take it over as attempt 3, a
// whole lease late.
func TestBackupTakeoverWithLostReplyIsSentAgain(t *testing.T) {
	h := newHarness(t)
	j, first := aHoldsTheHour(h)
	lr := &lostClaimReply{Backend: h.store, attempt: 2, n: 1}
	h.start("b", lr, true, j)
	second := h.stepUntilExec(3, time.Second, 12)
	lost := lr.lostToken()
	if lost == "" {
		t.Fatal("b never won a takeover claim")
	}
	if second.instance != "b" || second.e.Fence.Attempt != 2 || second.e.Fence.Slot != first.e.Fence.Slot {
		t.Fatalf("takeover %s by %s, want attempt 2 of the same slot by b", second.e.Fence, second.instance)
	}
	if second.e.Fence.Token != lost {
		t.Fatalf("b ran with token %s, not the lost claim's %s", second.e.Fence.Token.Short(), lost.Short())
	}
}

// stepUntilExec advances the clock by step each time n timers are armed,
// until an execution arrives (at most maxSteps steps).
func (h *harness) stepUntilExec(n int, step time.Duration, maxSteps int) execution {
	h.t.Helper()
	for range maxSteps {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		armed := make(chan error, 1)
		go func() { armed <- h.clk.WaitTimers(ctx, n) }()
		select {
		case e := <-h.got:
			cancel()
			return e
		case err := <-armed:
			cancel()
			if err != nil {
				h.t.Fatalf("waiting for %d armed timers: %v", n, err)
			}
		}
		h.clk.Advance(step)
	}
	return h.next()
}

func TestGracefulStopWaitsThenReleases(t *testing.T) {
	h := newHarness(t)
	j := job("long", "* * * * * *")
	s := h.start("a", h.store, true, j)
	e := h.next() // the start's slot; its execution hangs
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := h.clk.WaitTimerAt(ctx, h.clk.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("the grace timer was not armed: %v", err)
	}
	select {
	case <-s.done:
		t.Fatal("Run returned while a job was running within the grace")
	default:
	}
	h.clk.Advance(5 * time.Second) // grace over: the job is stopped
	select {
	case <-s.done:
		if s.err != nil {
			t.Fatal(s.err)
		}
	case <-time.After(waitFor):
		t.Fatal("Run did not return after the grace")
	}
	// The execution was told to stop (the runner then stops the command and
	// releases the lease).
	if got := s.exec.stopped.Load(); got != 1 {
		t.Fatalf("%d executions stopped at the end of the grace, want 1 (%s)", got, e.e.Fence)
	}
}

func TestReloadAddsAndRemovesJobs(t *testing.T) {
	h := newHarness(t)
	s := h.start("a", h.store, false, job("old", "* * * * * *"))
	if e := h.next(); e.e.Fence.Job != "old" {
		t.Fatalf("ran %s", e.e.Fence)
	}
	if err := s.s.Reload(context.Background(), []config.Job{job("new", "* * * * * *")}); err != nil {
		t.Fatal(err)
	}
	h.awaitTimers(1)
	h.clk.Advance(time.Second)
	if e := h.next(); e.e.Fence.Job != "new" || e.e.Fence.Slot != slotOf(1) {
		t.Fatalf("after reload ran %s, want new at +1s", e.e.Fence)
	}
	h.none(1)
}

// recorder remembers the order of the claims it passes on.
type recorder struct {
	claim.Backend
	mu    sync.Mutex
	slots []int64
}

func (r *recorder) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	r.mu.Lock()
	r.slots = append(r.slots, req.Slot)
	r.mu.Unlock()
	return r.Backend.Claim(ctx, req)
}

// Slots of one job due together are claimed in slot order (a store that
// orders claims by slot would lose an earlier slot claimed after a later).
func TestCatchUpClaimsInSlotOrder(t *testing.T) {
	h := newHarness(t)
	j := job("tick", "* * * * * *")
	j.MaxLate = 10 * time.Second
	rec := &recorder{Backend: h.store}
	h.start("a", rec, false, j)
	for range 10 { // the start's catch-up
		h.next()
	}
	h.awaitTimers(1)
	h.clk.Advance(5 * time.Second)
	for range 5 {
		h.next()
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.slots) != 15 {
		t.Fatalf("%d claims, want 15", len(rec.slots))
	}
	for i := 1; i < len(rec.slots); i++ {
		if rec.slots[i] <= rec.slots[i-1] {
			t.Fatalf("claims sent out of slot order: %v", rec.slots)
		}
	}
}

// TestOverlapSkippedSlotHasBackups: an instance that skipped a slot for
// overlap keeps watching it, so that when another instance wins the slot
// later within maxLate (after the older run ended) and dies, it takes the
// run over.
func TestOverlapSkippedSlotHasBackups(t *testing.T) {
	h := newHarness(t)
	j := job("minutely", "0 * * * * *")
	j.MaxLate, j.Overlap = 30*time.Second, "skip"
	h.clk.Set(time.Date(2027, 1, 1, 0, 59, 59, 900_000_000, time.UTC))
	ctx := context.Background()
	prev := claim.Request{Job: j.Name, Slot: time.Date(2027, 1, 1, 0, 59, 0, 0, time.UTC).UnixMilli(),
		Token: claim.NewToken(), Instance: "x", MaxLate: time.Hour, Lease: time.Hour, MaxAttempts: 3,
		Overlap: claim.OverlapSkip}
	if res, err := h.store.Claim(ctx, prev); err != nil || res.Outcome != claim.Won {
		t.Fatalf("the previous run: %+v %v", res, err)
	}
	h.start("b", h.store, true, j)
	h.awaitTimers(1)
	h.clk.Advance(100 * time.Millisecond) // 01:00:00: b's claim answers overlap
	h.awaitTimers(2)                      // b's scheduler and b's watch of the skipped slot
	// The previous run ends; a late instance wins the slot and dies.
	if err := h.store.Finish(ctx, prev.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	late := prev
	late.Slot, late.Token, late.Instance, late.Lease = time.Date(2027, 1, 1, 1, 0, 0, 0, time.UTC).UnixMilli(),
		claim.NewToken(), "late", 3*time.Second
	if res, err := h.store.Claim(ctx, late); err != nil || res.Outcome != claim.Won {
		t.Fatalf("the late instance's claim: %+v %v", res, err)
	}
	e := h.stepUntilExec(2, time.Second, 10)
	if e.instance != "b" || e.e.Fence.Slot != late.Slot || e.e.Fence.Attempt != 2 {
		t.Fatalf("takeover %s by %s, want attempt 2 of %s@%d by b", e.e.Fence, e.instance, j.Name, late.Slot)
	}
}

// abandon claims (job, slot) for an instance that dies at once: the store
// holds the run as running, and nobody watches it.
func (h *harness) abandon(j config.Job, slot time.Time) claim.Request {
	h.t.Helper()
	req := claim.Request{Job: j.Name, Slot: slot.UnixMilli(), Token: claim.NewToken(), Instance: "dead",
		MaxLate: time.Hour, Lease: j.Lease, MaxAttempts: j.MaxAttempts, Overlap: claim.OverlapAllow}
	if res, err := h.store.Claim(context.Background(), req); err != nil || res.Outcome != claim.Won {
		h.t.Fatalf("the dead instance's claim: %+v %v", res, err)
	}
	return req
}

// An instance that starts takes over a run left running, older than its
// catch-up, whose runner died while no instance watched it: attempt 2
// starts within a heartbeat of the lease's end.
func TestStartAdoptsAnAbandonedRun(t *testing.T) {
	h := newHarness(t)
	j := job("nightly", "0 0 3 * * *") // its next slot is hours away
	slot := t0.Add(-10 * time.Second)
	h.abandon(j, slot) // lease until t0 + 3s
	h.start("b", h.store, false, j)
	e := h.stepUntilExec(2, time.Second, 10)
	if e.e.Fence.Slot != slot.UnixMilli() || e.e.Fence.Attempt != 2 {
		t.Fatalf("ran %s, want attempt 2 of the abandoned slot %d", e.e.Fence, slot.UnixMilli())
	}
	if late := h.clk.Now().Sub(t0.Add(j.Lease)); late > j.Heartbeat {
		t.Fatalf("taken over %v after the lease ended, want within a heartbeat (%v)", late, j.Heartbeat)
	}
}

// A run whose lease ended more than maxLate before the instance started is
// not run again hours late: the store marks it interrupted, and the slot is
// counted missed (late).
func TestStartMarksALongAbandonedRunInterrupted(t *testing.T) {
	h := newHarness(t)
	missed, _ := h.observe()
	j := job("nightly", "0 0 3 * * *")
	slot := t0.Add(-10 * time.Second)
	h.abandon(j, slot)
	h.clk.Advance(j.Lease + time.Hour) // every instance was down for an hour
	h.start("b", h.store, false, j)
	deadline := time.Now().Add(waitFor)
	for {
		run, _, err := h.store.Read(context.Background(), j.Name, slot.UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		if run.Status == claim.StatusInterrupted {
			if run.Attempt != 1 {
				t.Fatalf("interrupted at attempt %d, want the abandoned attempt 1", run.Attempt)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned run is still %s", run.Status)
		}
		runtime.Gosched()
	}
	h.none(1)
	if got := missed.get(); got["nightly/late"] != 1 || len(got) != 1 {
		t.Errorf("missed %v, want the abandoned slot counted late", got)
	}
}

// A run found running at start whose runner lives is watched, not taken:
// while its runner renews, nothing starts; when the runner dies, the
// watcher takes over within the lease and a heartbeat of the last renewal.
func TestStartWatchesALiveRunUntilItsRunnerDies(t *testing.T) {
	h := newHarness(t)
	j := job("nightly", "0 0 3 * * *")
	slot := t0.Add(-10 * time.Second)
	req := h.abandon(j, slot)
	h.start("b", h.store, false, j)
	for range 5 { // the runner renews for 5 s, past the first lease
		h.awaitTimers(2) // b's scheduler and its watch of the run
		h.clk.Advance(time.Second)
		if _, err := h.store.Renew(context.Background(), req.Fence(1), j.Lease); err != nil {
			t.Fatalf("a renewal of the live runner: %v", err)
		}
	}
	lastRenewal := h.clk.Now()
	e := h.stepUntilExec(2, time.Second, 10) // the runner renews no more
	if e.e.Fence.Slot != slot.UnixMilli() || e.e.Fence.Attempt != 2 {
		t.Fatalf("ran %s, want attempt 2 of the watched slot %d", e.e.Fence, slot.UnixMilli())
	}
	if at := h.clk.Now().Sub(lastRenewal); at < j.Lease || at > j.Lease+j.Heartbeat {
		t.Fatalf("taken over %v after the last renewal, want within [lease, lease+heartbeat] = [%v, %v]", at, j.Lease, j.Lease+j.Heartbeat)
	}
}

// An instance whose attempt fenced itself (no renewal within the lease)
// watches the run as a backup: with no other instance alive, it takes the
// run over after the lease, and once attempts run out the store marks it
// interrupted instead of leaving it running.
func TestSelfFencedWinnerWatchesItsRun(t *testing.T) {
	h := newHarness(t)
	j := job("yearly", "0 0 0 1 1 *") // the slot at t0, then a year later
	h.unrecorded = true
	h.start("a", h.store, false, j)
	slot := t0.Truncate(time.Second).UnixMilli()
	for attempt := 1; attempt <= j.MaxAttempts; attempt++ {
		var e execution
		if attempt == 1 {
			e = h.next()
		} else {
			e = h.stepUntilExec(2, time.Second, 10)
		}
		if e.e.Fence.Slot != slot || e.e.Fence.Attempt != attempt {
			t.Fatalf("ran %s, want attempt %d of slot %d", e.e.Fence, attempt, slot)
		}
	}
	deadline := time.Now().Add(waitFor)
	for {
		h.awaitTimers(1)
		run, _, err := h.store.Read(context.Background(), j.Name, slot)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status == claim.StatusInterrupted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is still %s at attempt %d", run.Status, run.Attempt)
		}
		h.clk.Advance(time.Second)
	}
	h.none(1)
}

// A slot lost is a warning with its reason; a race lost to another instance
// is routine (debug); a win and an overlap skip are info.
func TestClaimAnswerLogLevels(t *testing.T) {
	t.Parallel()
	want := map[claim.Outcome]zapcore.Level{
		claim.Won: zapcore.InfoLevel, claim.Overlap: zapcore.InfoLevel,
		claim.Late: zapcore.WarnLevel, claim.Unknown: zapcore.WarnLevel,
		claim.Running: zapcore.DebugLevel, claim.Done: zapcore.DebugLevel, claim.Lost: zapcore.DebugLevel,
	}
	for outcome, level := range want {
		core, logs := observer.New(zapcore.DebugLevel)
		logAnswer(zap.New(core), claim.Result{Outcome: outcome})
		all := logs.All()
		if len(all) != 1 || all[0].Level != level {
			t.Errorf("%s: logged %v, want one line at %v", outcome, all, level)
			continue
		}
		if _, hasReason := all[0].ContextMap()["lost"]; hasReason != (level == zapcore.WarnLevel) {
			t.Errorf("%s: reason field present %v, want %v", outcome, hasReason, level == zapcore.WarnLevel)
		}
	}
}
