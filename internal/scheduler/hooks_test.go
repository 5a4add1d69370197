package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
)

// hookCall is one RunHook of a hookExec.
type hookCall struct {
	instance string
	h        runner.HookRun
}

// hookExec is a fakeExec that records its hooks: odd slots fail (exit 1),
// even ones succeed. With block set, each hook blocks until its context
// is cancelled.
type hookExec struct {
	*fakeExec
	hooks chan hookCall
	block bool
	clk   interface{ Now() time.Time }
	// hookEnded is the clock's reading when a blocked hook's context ended.
	hookEnded atomic.Pointer[time.Time]
}

func (x *hookExec) Run(ctx context.Context, e runner.Execution) runner.Report {
	st, code := claim.StatusSucceeded, 0
	if (e.Fence.Slot/1000)%2 != 0 {
		st, code = claim.StatusFailed, 1
	}
	err := x.b.Finish(context.Background(), e.Fence, claim.Finish{Status: st, ExitCode: code, OutputTail: "out\n"})
	x.got <- execution{x.instance, e}
	return runner.Report{Status: st, ExitCode: code, OutputTail: "out\n", Duration: time.Second, Recorded: err == nil, Err: err}
}

func (x *hookExec) RunHook(ctx context.Context, h runner.HookRun) runner.HookReport {
	x.hooks <- hookCall{x.instance, h}
	if x.block {
		<-ctx.Done()
		now := x.clk.Now()
		x.hookEnded.Store(&now)
		return runner.HookReport{Started: true, ExitCode: 143, Err: runner.ErrStopped}
	}
	return runner.HookReport{Started: true}
}

// startHooked starts instance with a hookExec, as harness.start does.
func (h *harness) startHooked(instance string, hooks chan hookCall, block bool, jobs ...config.Job) (*started, *hookExec) {
	h.t.Helper()
	if !h.fresh {
		h.seed(jobs...)
	}
	ex := &hookExec{fakeExec: newFakeExec(instance, h.got, h.store), hooks: hooks, block: block, clk: h.clk}
	s, err := New(Options{Backend: h.store, Clock: h.clk, Instance: instance, Executor: ex,
		ShutdownGrace: 5 * time.Second, Hooks: h.hooks, Log: h.log}, jobs)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &started{s: s, exec: ex.fakeExec, cancel: cancel, done: make(chan struct{})}
	go func() { st.err = s.Run(ctx); close(st.done) }()
	awaitDecided(h.t, s)
	h.t.Cleanup(func() {
		cancel()
		select {
		case <-st.done:
		case <-time.After(waitFor):
			h.t.Error("scheduler did not stop")
		}
	})
	return st, ex
}

func hookedJob() config.Job {
	j := job("tick", "* * * * * *")
	j.OnFailure, j.OnSuccess, j.OnMissed = "on-failure", "on-success", "on-missed"
	return j
}

func nextHook(t *testing.T, hooks chan hookCall) hookCall {
	t.Helper()
	select {
	case c := <-hooks:
		return c
	case <-time.After(waitFor):
		t.Fatal("no hook ran")
		return hookCall{}
	}
}

// Two instances: each slot's outcome fires its hook once, on the instance
// that ran and recorded it, with the outcome.
func TestHooksRunOncePerOutcome(t *testing.T) {
	h := newHarness(t)
	hooks := make(chan hookCall, 100)
	a, _ := h.startHooked("a", hooks, false, hookedJob())
	b, _ := h.startHooked("b", hooks, false, hookedJob())
	ranBy := map[int64]string{}
	for sec := 0; sec <= 5; sec++ {
		if sec > 0 {
			h.awaitTimers(2)
			h.clk.Advance(time.Second)
		}
		e := h.next()
		ranBy[e.e.Fence.Slot] = e.instance
	}
	for _, st := range []*started{a, b} {
		st.cancel()
		<-st.done
	}
	close(hooks)
	fired := map[int64]hookCall{}
	for c := range hooks {
		slot := c.h.Execution.Fence.Slot
		if prev, dup := fired[slot]; dup {
			t.Fatalf("slot %d fired %s on %s and %s on %s", slot, prev.h.Kind, prev.instance, c.h.Kind, c.instance)
		}
		fired[slot] = c
	}
	for sec := 0; sec <= 5; sec++ {
		c, ok := fired[slotOf(sec)]
		kind, st, code := runner.OnSuccess, claim.StatusSucceeded, 0
		if sec%2 != 0 {
			kind, st, code = runner.OnFailure, claim.StatusFailed, 1
		}
		if !ok || c.h.Kind != kind || c.instance != ranBy[slotOf(sec)] || c.h.Status != st || c.h.ExitCode != code ||
			!c.h.Ran || c.h.OutputTail != "out\n" || c.h.Command != map[bool]string{true: "on-failure", false: "on-success"}[sec%2 != 0] ||
			c.h.Execution.Fence.Attempt != 1 || c.h.Execution.Job.Name != "tick" {
			t.Errorf("slot %+d (ran by %s): hook %+v, want %s with %s", sec, ranBy[slotOf(sec)], c, kind, st)
		}
	}
	if len(fired) != 6 {
		t.Errorf("%d slots fired hooks, want 6", len(fired))
	}
}

// afterRun fires for a result this attempt recorded only, and only for
// succeeded, failed and timeout.
func TestAfterRunOutcomes(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name   string
		rep    runner.Report
		noHook bool // the job has no hook of the kind
		want   string
	}{
		{"succeeded", runner.Report{Status: claim.StatusSucceeded, Recorded: true}, false, runner.OnSuccess},
		{"failed", runner.Report{Status: claim.StatusFailed, ExitCode: 2, Recorded: true}, false, runner.OnFailure},
		{"timeout", runner.Report{Status: claim.StatusTimeout, ExitCode: 143, Recorded: true}, false, runner.OnFailure},
		{"interrupted", runner.Report{Status: claim.StatusInterrupted, Recorded: true}, false, ""},
		{"fenced at finish", runner.Report{Status: claim.StatusFailed, ExitCode: 1, Fenced: true}, false, ""},
		{"unrecorded", runner.Report{Status: claim.StatusSucceeded}, false, ""},
		{"no such hook", runner.Report{Status: claim.StatusFailed, Recorded: true}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hooks := make(chan hookCall, 1)
			ex := &hookExec{fakeExec: newFakeExec("a", h.got, h.store), hooks: hooks}
			j := hookedJob()
			if tc.noHook {
				j.OnFailure = ""
			}
			s, err := New(Options{Backend: h.store, Clock: h.clk, Instance: "a", Executor: ex}, []config.Job{j})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			s.hooks.ctx, s.hooks.wg = t.Context(), &wg
			s.afterRun(j, runner.Execution{Fence: claim.Fence{Job: "tick", Slot: slotOf(1), Attempt: 1}}, tc.rep)
			wg.Wait()
			close(hooks)
			c, ran := <-hooks
			switch {
			case tc.want == "" && ran:
				t.Errorf("fired %s", c.h.Kind)
			case tc.want != "" && (!ran || c.h.Kind != tc.want || c.h.ExitCode != tc.rep.ExitCode || c.h.Status != tc.rep.Status):
				t.Errorf("fired %+v, want %s", c, tc.want)
			}
		})
	}
}

// Two instances start after every instance was down: each notes the slots
// missed, the store keeps one note of each, and onMissed fires once per
// slot, on the instance whose note stands.
func TestOnMissedOncePerSlot(t *testing.T) {
	h := newHarness(t)
	j := hookedJob()
	j.MaxLate, j.CatchUp = 5*time.Second, config.CatchUpNone
	h.record(j, slotTime(-10))
	hooks := make(chan hookCall, 100)
	a, _ := h.startHooked("a", hooks, false, j)
	b, _ := h.startHooked("b", hooks, false, j)
	notes := h.awaitNotes(t, "tick", 10)
	for _, st := range []*started{a, b} {
		st.cancel()
		<-st.done
	}
	close(hooks)
	fired := map[int64]hookCall{}
	for c := range hooks {
		slot := c.h.Execution.Fence.Slot
		if _, dup := fired[slot]; dup || c.h.Kind != runner.OnMissed {
			t.Fatalf("slot %d: hook %s on %s (fired before: %v)", slot, c.h.Kind, c.instance, dup)
		}
		fired[slot] = c
	}
	for sec := -9; sec <= 0; sec++ {
		c, n := fired[slotOf(sec)], notes[slotOf(sec)]
		if c.instance != n.Instance || c.h.Status != claim.StatusMissed || c.h.Reason != n.Reason || c.h.Ran ||
			c.h.Command != "on-missed" || !c.h.Execution.Slot.Equal(slotTime(sec)) {
			t.Errorf("slot %+d noted by %s (%s): hook %+v", sec, n.Instance, n.Reason, c)
		}
	}
	if len(fired) != 10 {
		t.Errorf("%d slots fired onMissed, want 10", len(fired))
	}
}

// A hook that runs on does not hold up the next slots; the stop waits for
// it for the shutdown grace, then its context ends (the hard stop).
func TestHookDoesNotBlockSlots(t *testing.T) {
	h := newHarness(t)
	hooks := make(chan hookCall, 100)
	a, ax := h.startHooked("a", hooks, true, hookedJob())
	h.next()
	nextHook(t, hooks)
	for sec := 1; sec <= 3; sec++ {
		h.awaitTimers(1)
		h.clk.Advance(time.Second)
		if e := h.next(); e.e.Fence.Slot != slotOf(sec) {
			t.Fatalf("ran %s, want slot %+d", e.e.Fence, sec)
		}
		nextHook(t, hooks)
	}
	stop := h.clk.Now()
	a.cancel()
	// The clock moves on until the stop is over: the hooks' context ends
	// at the end of the grace, not before.
	deadline := time.Now().Add(waitFor)
	for done := false; !done; {
		select {
		case <-a.done:
			done = true
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the hard stop did not end the hooks")
			}
			h.clk.Advance(100 * time.Millisecond)
		}
	}
	ended := ax.hookEnded.Load()
	if ended == nil {
		t.Fatal("no hook saw its context end")
	}
	if d := ended.Sub(stop); d < 5*time.Second {
		t.Fatalf("the hooks' context ended %v after the stop; want the shutdown grace (5s) after it", d)
	}
}
