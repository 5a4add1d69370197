package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
)

// A job's hooks (docs/spec.md#s6-hooks) run on the instance that recorded
// the outcome they follow, once: a run's hook on the instance whose Finish
// the store kept, a missed slot's on the instance whose note the store
// kept (claim.Recorder.Record returned true). Each runs in a goroutine of
// its own, under the daemon's stop as a job does: the graceful stop waits
// for it within shutdownGraceMs, the hard stop stops it. Nothing waits for
// a hook: no slot, claim or note is delayed by one.

// HookRunner runs a job's hooks; *runner.Runner is one. The scheduler runs
// hooks when its Executor is also a HookRunner.
type HookRunner interface {
	RunHook(ctx context.Context, h runner.HookRun) runner.HookReport
}

// maxHooks bounds the hooks that run at once on an instance; the others
// wait for a place (a long outage's missed slots each fire onMissed).
const maxHooks = 8

// hooks starts the jobs' hooks.
type hooks struct {
	hr  HookRunner // nil: the executor runs no hooks
	sem chan struct{}
	// jobs are the current jobs by name, for the notes' hooks (a note
	// names its job only).
	jobs atomic.Pointer[map[string]config.Job]
	// ctx (the runs' context: cancelled at the hard stop) and wg (the
	// scheduler's, which its stop waits for) are set by Run before any
	// hook can fire.
	ctx context.Context
	wg  *sync.WaitGroup
}

func newHooks(e Executor, jobs []*entry) *hooks {
	h := &hooks{sem: make(chan struct{}, maxHooks)}
	h.hr, _ = e.(HookRunner)
	h.setJobs(jobs)
	return h
}

// setJobs makes entries the jobs the notes' hooks are looked up in.
func (h *hooks) setJobs(entries []*entry) {
	m := make(map[string]config.Job, len(entries))
	for _, e := range entries {
		m[e.job.Name] = e.job
	}
	h.jobs.Store(&m)
}

// afterRun runs the hook of a run's outcome: onSuccess after succeeded,
// onFailure after failed or timeout. It is called with every report of the
// executor, and fires only for a result this attempt recorded (the one the
// store kept: a fenced, taken over or unrecorded attempt fires nothing). An
// interrupted run fires no hook: only the daemon's stop records that status,
// and no hook starts after its hard stop.
func (s *Scheduler) afterRun(job config.Job, e runner.Execution, rep runner.Report) {
	if !rep.Recorded {
		return
	}
	kind, cmd := runner.OnFailure, job.OnFailure
	switch rep.Status {
	case claim.StatusSucceeded:
		kind, cmd = runner.OnSuccess, job.OnSuccess
	case claim.StatusFailed, claim.StatusTimeout:
	default:
		return
	}
	if cmd == "" {
		return
	}
	e.Job = job
	s.fireHook(runner.HookRun{Kind: kind, Command: cmd, Execution: e, Status: rep.Status, Ran: true,
		ExitCode: rep.ExitCode, Duration: rep.Duration, OutputTail: rep.OutputTail})
}

// afterNote runs the onMissed hook of the job of n, a note this instance
// wrote: a slot recorded missed. Skipped (overlap, paused) and unknown
// slots fire no hook.
func (s *Scheduler) afterNote(n claim.Note) {
	if n.Status != claim.StatusMissed {
		return
	}
	job, ok := (*s.hooks.jobs.Load())[n.Job]
	if !ok || job.OnMissed == "" {
		return
	}
	slot := time.UnixMilli(n.Slot).UTC()
	job.Name = config.JobOfKey(job.Name) // a perInstance job's own name
	e := runner.Execution{Job: job, Fence: claim.Fence{Job: n.Job, Slot: n.Slot}, Slot: slot}
	s.fireHook(runner.HookRun{Kind: runner.OnMissed, Command: job.OnMissed, Execution: e,
		Status: claim.StatusMissed, Reason: n.Reason})
}

// fireHook runs h in a goroutine of the scheduler's, once one of maxHooks
// places is free. A hook still waiting at the hard stop is not run.
func (s *Scheduler) fireHook(h runner.HookRun) {
	hk := s.hooks
	if hk.hr == nil || hk.wg == nil {
		return
	}
	hk.wg.Go(func() {
		select {
		case hk.sem <- struct{}{}:
		case <-hk.ctx.Done():
			s.o.Log.Warn("hook not run: the daemon is stopping", zap.String("job", h.Execution.Fence.Job),
				zap.Time("slot", h.Execution.Slot), zap.String("hook", h.Kind))
			return
		}
		defer func() { <-hk.sem }()
		hk.hr.RunHook(hk.ctx, h)
	})
}
