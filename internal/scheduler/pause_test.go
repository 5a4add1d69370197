package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

// pauseHarness is a harness whose instances read the pauses every second
// and record the pause reports.
type pauseHarness struct {
	*harness
	mu      sync.Mutex
	reports []string // "job=true" (paused) or "job=false" (resumed)
	logs    *observer.ObservedLogs
	// reads counts the reads of the pauses, answered or not; instances
	// is how many schedulers the test started.
	reads     atomic.Int64
	instances int
}

func newPauseHarness(t *testing.T) *pauseHarness {
	h := &pauseHarness{harness: newHarness(t)}
	h.controlPoll = time.Second
	h.hooks.Paused = func(job string, paused bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.reports = append(h.reports, fmt.Sprintf("%s=%v", job, paused))
	}
	read := func(op string) {
		if op == "controls" {
			h.reads.Add(1)
		}
	}
	h.hooks.StoreOK = read
	h.hooks.StoreError = func(op string, _ error) { read(op) }
	core, logs := observer.New(zapcore.DebugLevel)
	h.log, h.logs = zap.New(core), logs
	return h
}

// set writes job's control record over its current one, after the reads
// due (settle): the instances see it at their next.
func (h *pauseHarness) set(c claim.Control) claim.Control {
	h.t.Helper()
	h.settle()
	all, err := h.store.Controls(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	var prev int64
	for _, x := range all {
		if x.Job == c.Job {
			prev = x.Version
		}
	}
	got, err := h.store.SetControl(context.Background(), c, prev)
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

// awaitReports waits until the pause reports are want.
func (h *pauseHarness) awaitReports(want ...string) {
	h.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		h.mu.Lock()
		got := slices.Clone(h.reports)
		h.mu.Unlock()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("pause reports %v, want %v", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitSkipped waits until job's slots skipped (paused) in the store are
// exactly secs (slotOf). A test awaits the note of a paused job's slot
// before it moves the clock: the slot has been dispatched then.
func (h *pauseHarness) awaitSkipped(job string, secs ...int) {
	h.t.Helper()
	var want []int64
	for _, s := range secs {
		want = append(want, slotOf(s))
	}
	deadline := time.Now().Add(waitFor)
	for {
		runs, err := h.store.ListRuns(context.Background(), claim.ListQuery{Job: job, Limit: 100,
			Statuses: []claim.Status{claim.StatusSkipped}})
		if err != nil {
			h.t.Fatal(err)
		}
		var got []int64
		for _, r := range runs {
			if r.Reason != ReasonPaused {
				h.t.Fatalf("a skipped slot of a paused job: reason %q, want %q", r.Reason, ReasonPaused)
			}
			got = append(got, r.Slot)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s's slots skipped (paused): %v, want %v", job, got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// start starts an instance at t0, as the harness does.
func (h *pauseHarness) start(instance string, jobs ...config.Job) *started {
	h.t.Helper()
	h.instances++
	return h.harness.start(instance, h.store, false, jobs...)
}

// settle waits until every instance has read the pauses at each of its
// polls so far: one at its start, one every second after t0.
func (h *pauseHarness) settle() {
	h.t.Helper()
	want := int64(h.instances) * (1 + int64(h.clk.Now().Sub(t0)/time.Second))
	deadline := time.Now().Add(waitFor)
	for h.reads.Load() < want {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d reads of the pauses by %v, want %d", h.reads.Load(), h.clk.Now(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// step moves the clock by d once the instances have read the pauses due
// (settle) and their n timers are armed.
func (h *pauseHarness) step(n int, d time.Duration) {
	h.t.Helper()
	h.settle()
	h.awaitTimers(n)
	h.clk.Advance(d)
}

// ran awaits the executions of the slot at sec, one per job, in any order.
func (h *pauseHarness) ran(sec int, jobs ...string) {
	h.t.Helper()
	var got []string
	for range jobs {
		e := h.next()
		if e.e.Fence.Slot != slotOf(sec) {
			h.t.Fatalf("ran %s, want slot %d", e.e.Fence, slotOf(sec))
		}
		got = append(got, e.e.Job.Name)
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(jobs)); !slices.Equal(got, want) {
		h.t.Fatalf("slot %d ran %v, want %v", sec, got, want)
	}
}

func pauseJobs() []config.Job {
	return []config.Job{job("tick", "* * * * * *"), job("other", "* * * * * *")}
}

// A job paused in the store before the start is not claimed: each of its
// slots is recorded skipped (paused) while the other job runs; a resume
// is honoured at the next read of the pauses, within a second, and the
// job's next slot runs.
func TestPausedJobIsSkippedUntilResumed(t *testing.T) {
	h := newPauseHarness(t)
	h.set(claim.Control{Job: "tick", Paused: true, Reason: "maintenance", By: "op@host"})
	h.start("a", pauseJobs()...)
	h.awaitReports("tick=true")
	h.ran(0, "other") // the catch-up slot
	h.awaitSkipped("tick", 0)
	for sec := 1; sec <= 3; sec++ {
		h.step(2, time.Second) // the loop's timer and the poll's
		h.ran(sec, "other")
	}
	h.awaitSkipped("tick", 0, 1, 2, 3)

	h.set(claim.Control{Job: "tick", By: "op@host"})
	h.step(2, 900*time.Millisecond) // slot 4, before the next read
	h.ran(4, "other")
	h.step(2, 100*time.Millisecond) // the read
	h.awaitReports("tick=true", "tick=false")
	h.step(2, 900*time.Millisecond)
	h.ran(5, "tick", "other")
	h.awaitSkipped("tick", 0, 1, 2, 3, 4)
	h.none(2)
	if h.logs.FilterMessage("job resumed").Len() != 1 {
		t.Fatalf("want one log line of the resume, got %v", h.logs.FilterMessage("job resumed").All())
	}
}

// A pause written while the scheduler runs is honoured from the next read
// on; with an until it ends by itself: the slot at the until runs, and
// the end is reported at the next read.
func TestPauseUntilEndsByItself(t *testing.T) {
	h := newPauseHarness(t)
	h.start("a", pauseJobs()...)
	h.ran(0, "tick", "other")
	h.set(claim.Control{Job: "tick", Paused: true, Until: slotOf(3), By: "op@host"})
	h.step(2, 900*time.Millisecond) // slot 1, before the read
	h.ran(1, "tick", "other")
	h.step(2, 100*time.Millisecond) // the read
	h.awaitReports("tick=true")
	h.step(2, 900*time.Millisecond)
	h.ran(2, "other")
	h.step(2, time.Second) // slot 3 (the until), then the read at 3.1
	h.ran(3, "tick", "other")
	h.awaitReports("tick=true", "tick=false")
	h.awaitSkipped("tick", 2)
	if h.logs.FilterMessage("job resumed: its pause is over").Len() != 1 {
		t.Fatalf("want one log line of the pause's end, got %v", h.logs.All())
	}
	h.none(2)
}

// A store that cannot be read keeps the pauses last read: the paused job
// stays paused, and the failure is logged once, as is the recovery. A
// reload does not undo a pause.
func TestPauseKeptThroughStoreFailureAndReload(t *testing.T) {
	h := newPauseHarness(t)
	h.set(claim.Control{Job: "tick", Paused: true, By: "op@host"})
	st := h.start("a", pauseJobs()...)
	h.awaitReports("tick=true")
	h.ran(0, "other")
	h.awaitSkipped("tick", 0)
	h.store.FailControls(errors.New("connection refused"))
	for sec := 1; sec <= 3; sec++ {
		h.step(2, time.Second)
		h.ran(sec, "other")
	}
	if err := st.s.Reload(context.Background(), pauseJobs()); err != nil {
		t.Fatal(err)
	}
	h.step(2, time.Second)
	h.ran(4, "other")
	if n := h.logs.FilterMessage("cannot read the jobs' pauses from the store; keeping the last known ones until it answers").Len(); n != 1 {
		t.Fatalf("the failing read logged %d times, want once", n)
	}
	h.store.FailControls(nil)
	h.step(2, time.Second)
	h.ran(5, "other")
	h.awaitSkipped("tick", 0, 1, 2, 3, 4, 5)
	h.awaitTimers(2)
	if n := h.logs.FilterMessage("read the jobs' pauses from the store again").Len(); n != 1 {
		t.Fatalf("the recovery logged %d times, want once", n)
	}
	h.awaitReports("tick=true")
	h.none(2)
}

// Two instances: neither claims a paused job's slot, and each slot has
// one note.
func TestPausedOnEveryInstance(t *testing.T) {
	h := newPauseHarness(t)
	h.set(claim.Control{Job: "tick", Paused: true, By: "op@host"})
	h.start("a", pauseJobs()...)
	h.start("b", pauseJobs()...)
	h.ran(0, "other")
	h.awaitSkipped("tick", 0)
	for sec := 1; sec <= 3; sec++ {
		h.step(4, time.Second)
		h.ran(sec, "other")
	}
	h.awaitSkipped("tick", 0, 1, 2, 3)
	h.none(4)
}
