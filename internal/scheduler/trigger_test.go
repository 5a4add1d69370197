package scheduler

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/schedule"
)

// yearly is a job whose schedule does not fire during a test.
func yearly(name string) config.Job { return job(name, "0 0 1 6 *") }

// manualAt is a manual trigger of the run at slot.
func manualAt(slot time.Time) claim.Trigger {
	return claim.Trigger{ID: string(claim.NewToken()), Kind: claim.TriggerManual, Slot: slot.UnixMilli(),
		Attempt: 1, Due: slot.UnixMilli(), By: "op@laptop", At: slot.UnixMilli()}
}

// A manual trigger in a paused job's record is run once, by one of two
// instances, with the trigger given to the runner; the pause holds it
// not.
func TestTriggerRunsOnceOnPausedJob(t *testing.T) {
	h := newPauseHarness(t)
	h.fresh = true
	tr := manualAt(t0.Add(-time.Second))
	h.set(claim.Control{Job: "tock", Paused: true, By: "op@host", Triggers: []claim.Trigger{tr}})
	h.start("a", yearly("tock"))
	h.start("b", yearly("tock"))
	e := h.next()
	if e.e.Fence.Slot != tr.Slot || e.e.Trigger == nil || *e.e.Trigger != tr {
		t.Fatalf("ran %s with trigger %+v, want the trigger's slot %d and %+v", e.e.Fence, e.e.Trigger, tr.Slot, tr)
	}
	h.step(4, time.Second) // both instances read the record again
	h.settle()
	h.none(4)
	runs, err := h.store.ListRuns(context.Background(), claim.ListQuery{Job: "tock"})
	if err != nil || len(runs) != 1 || runs[0].Slot != tr.Slot || runs[0].Status != claim.StatusSucceeded {
		t.Fatalf("runs of tock: %+v %v, want one succeeded at %d", runs, err, tr.Slot)
	}
}

// failExec finishes every execution failed, and reports it.
type failExec struct {
	b   claim.Backend
	got chan execution
}

func (f *failExec) Run(_ context.Context, e runner.Execution) runner.Report {
	err := f.b.Finish(context.Background(), e.Fence, claim.Finish{Status: claim.StatusFailed, ExitCode: 1})
	f.got <- execution{"a", e}
	return runner.Report{Status: claim.StatusFailed, ExitCode: 1, Recorded: err == nil, Err: err}
}

// calls records the calls of the triggers' and retries' hooks, as
// "job kind" and "job=result".
type calls struct {
	mu  sync.Mutex
	got []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, s)
}

func (c *calls) hooks(h Hooks) Hooks {
	h.Triggered = func(job, kind string) { c.add(job + " " + kind) }
	h.Retried = func(job, result string) { c.add(job + "=" + result) }
	return h
}

func (c *calls) want(t *testing.T, want ...string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.got, want) {
		t.Fatalf("hooks called %q, want %q", c.got, want)
	}
}

// A run that fails with retry.attempts 2 is retried twice, each retry a
// trigger of the job's record due after its backoff (doubled for the
// second), carrying the slot retried and its attempt; the third failure is
// final. Each trigger picked up and each retry written is reported to the
// hooks (the metrics).
func TestRetriesFollowAFailure(t *testing.T) {
	h := newPauseHarness(t)
	h.fresh = true
	j := yearly("flaky")
	j.Retry = config.Retry{Attempts: 2, Backoff: 400 * time.Millisecond, MaxBackoff: 10 * time.Second}
	first := manualAt(t0.Add(-time.Second))
	h.set(claim.Control{Job: j.Name, Triggers: []claim.Trigger{first}})
	var c calls
	s, err := New(Options{Backend: h.store, Clock: h.clk, Instance: "a", Executor: &failExec{h.store, h.got}, Hooks: c.hooks(h.hooks),
		ShutdownGrace: time.Second, Log: h.log, ControlPoll: time.Second}, []config.Job{j})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	if e := h.next(); e.e.Fence.Slot != first.Slot {
		t.Fatalf("ran %s, want the manual run at %d", e.e.Fence, first.Slot)
	}
	for k := 2; k <= 3; k++ {
		r := h.awaitTrigger(j.Name, k)
		want := RetryBackoff(j, first.Slot, k-1)
		if r.Kind != claim.TriggerRetry || r.Of != first.Slot || r.By != "a" || r.Due != r.Slot ||
			time.Duration(r.Due-r.At)*time.Millisecond != want {
			t.Fatalf("retry %d: %+v, want of %d due %s after it was written", k, r, first.Slot, want)
		}
		if lo, hi := j.Retry.Backoff<<(k-2)*8/10, j.Retry.Backoff<<(k-2)*12/10; want < lo || want > hi {
			t.Fatalf("retry %d: backoff %s, want within [%s, %s]", k, want, lo, hi)
		}
		wctx, wcancel := context.WithTimeout(context.Background(), waitFor)
		err := h.clk.WaitTimerAt(wctx, time.UnixMilli(r.Slot)) // the run awaits its slot
		wcancel()
		if err != nil {
			t.Fatalf("retry %d: no timer at its slot: %v", k, err)
		}
		h.clk.Set(time.UnixMilli(r.Slot))
		e := h.next()
		if e.e.Fence.Slot != r.Slot || e.e.Trigger == nil || e.e.Trigger.Attempt != k {
			t.Fatalf("ran %s (trigger %+v), want retry %d at %d", e.e.Fence, e.e.Trigger, k, r.Slot)
		}
	}
	h.instances = 1
	h.step(2, time.Second)
	h.settle()
	if c := h.control(j.Name); len(c.Triggers) != 3 {
		t.Fatalf("after the third failure: %d triggers, want the run and 2 retries: %+v", len(c.Triggers), c.Triggers)
	}
	c.want(t, "flaky manual", "flaky=scheduled", "flaky retry", "flaky=scheduled", "flaky retry")
}

// noControlWrites is a store that does not take a control record's write.
type noControlWrites struct{ *memclaim.Backend }

func (noControlWrites) SetControl(context.Context, claim.Control, int64) (claim.Control, error) {
	return claim.Control{}, errors.New("connection reset")
}

// A retry whose trigger the store does not take is lost: the run's outcome
// stands, and the hooks (the metrics) are told, not_written.
func TestRetryNotWritten(t *testing.T) {
	h := newHarness(t)
	j := yearly("flaky")
	j.Retry = config.Retry{Attempts: 1, Backoff: time.Second, MaxBackoff: time.Second}
	var c calls
	s, err := New(Options{Backend: noControlWrites{h.store}, Clock: h.clk, Instance: "a", Executor: &failExec{h.store, h.got},
		ClaimTimeout: time.Second, Hooks: c.hooks(Hooks{})}, []config.Job{j})
	if err != nil {
		t.Fatal(err)
	}
	if s.scheduleRetry(context.Background(), j, nil, t0.UnixMilli(), runner.Report{Status: claim.StatusFailed, Recorded: true}) {
		t.Fatal("a retry follows, want none: its trigger was not written")
	}
	c.want(t, "flaky=not_written")
}

// control reads job's record.
func (h *pauseHarness) control(job string) claim.Control {
	h.t.Helper()
	all, err := h.store.Controls(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	for _, c := range all {
		if c.Job == job {
			return c
		}
	}
	return claim.Control{Job: job}
}

// awaitTrigger waits for the retry of attempt k in job's record.
func (h *pauseHarness) awaitTrigger(job string, k int) claim.Trigger {
	h.t.Helper()
	for deadline := time.Now().Add(waitFor); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, t := range h.control(job).Triggers {
			if t.Kind == claim.TriggerRetry && t.Attempt == k {
				return t
			}
		}
	}
	h.t.Fatalf("no retry %d of %s written", k, job)
	return claim.Trigger{}
}

// Under overlap skip no retry is due at or after the job's next slot.
func TestRetryNeverPastTheNextSlot(t *testing.T) {
	j := job("every2", "*/2 * * * * *")
	j.Overlap = "skip"
	j.Retry = config.Retry{Attempts: 3, Backoff: 1500 * time.Millisecond, MaxBackoff: time.Minute}
	h := newHarness(t)
	var c calls
	s, err := New(Options{Backend: h.store, Clock: h.clk, Instance: "a", Executor: &failExec{h.store, h.got},
		Hooks: c.hooks(Hooks{})}, []config.Job{j})
	if err != nil {
		t.Fatal(err)
	}
	slot := t0.Truncate(2 * time.Second)
	failed := runner.Report{Status: claim.StatusFailed, Recorded: true}
	if _, ok := s.retryPlan(j, nil, slot.UnixMilli(), failed); !ok {
		t.Fatalf("a retry 1.2–1.8s after slot %v, before the next at +2s: want one", slot)
	}
	h.clk.Set(slot.Add(time.Second))
	if tr, ok := s.retryPlan(j, nil, slot.UnixMilli(), failed); ok {
		t.Fatalf("a retry due at %v, at or after the next slot: want none", time.UnixMilli(tr.Due))
	}
	c.want(t, "every2=past_next_slot")
	j.Overlap = "allow"
	if _, ok := s.retryPlan(j, nil, slot.UnixMilli(), failed); !ok {
		t.Fatal("overlap allow: want a retry past the next slot")
	}
	if _, ok := s.retryPlan(j, nil, slot.UnixMilli(), runner.Report{Status: claim.StatusSucceeded, Recorded: true}); ok {
		t.Fatal("a success: want no retry")
	}
	third := &claim.Trigger{Kind: claim.TriggerRetry, Of: slot.UnixMilli(), Attempt: 4}
	if _, ok := s.retryPlan(j, third, slot.UnixMilli()+5, failed); ok {
		t.Fatal("attempt 4 of retry.attempts 3: want no retry")
	}
}

// A start's catch-up counts from the newest slot of the schedule that ran,
// not from a manual run after it: the slot within maxLate before the start
// is caught up (catchUp all), where the manual run's slot, not one of the
// schedule's, would have read as a changed schedule and run nothing.
func TestCatchUpSkipsTriggeredRuns(t *testing.T) {
	h := newPauseHarness(t)
	j := job("tick", "* * * * * *")
	h.seed(j) // the slot before maxLate ran
	tr := manualAt(t0.Add(-50 * time.Millisecond))
	h.record(j, time.UnixMilli(tr.Slot))
	h.set(claim.Control{Job: j.Name, Triggers: []claim.Trigger{tr}})
	h.start("a", j)
	if e := h.next(); e.e.Fence.Slot != slotOf(0) || e.e.Trigger != nil {
		t.Fatalf("ran %s (trigger %+v), want the catch-up of slot %d", e.e.Fence, e.e.Trigger, slotOf(0))
	}
}

// A trigger's slot is never one of the schedule's nor another trigger's.
func TestFreeSlot(t *testing.T) {
	sc, err := schedule.Parse("* * * * * *", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	whole := t0.Truncate(time.Second).Add(time.Second).UnixMilli()
	c := claim.Control{Job: "tick", Triggers: []claim.Trigger{manualAt(time.UnixMilli(whole + 1))}}
	for _, tc := range []struct{ ms, want int64 }{
		{whole - 5, whole - 5}, // free
		{whole, whole + 2},     // a slot, then a trigger's
		{whole + 1, whole + 2}, // a trigger's
	} {
		if got := FreeSlot(c, sc, tc.ms); got != tc.want {
			t.Errorf("FreeSlot(%d) = %d, want %d", tc.ms, got, tc.want)
		}
	}
	if got := FreeSlot(claim.Control{}, nil, whole); got != whole {
		t.Errorf("with no schedule: FreeSlot(%d) = %d", whole, got)
	}
}
