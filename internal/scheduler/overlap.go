package scheduler

import (
	"context"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/schedule"
)

// The overlap policies replace and queue (docs/spec.md#s3-1-replace,
// docs/spec.md#s3-1-queue). The store decides both as skip: a slot that
// finds another live run of the job is answered overlap. Around that
// answer:
//
//   - replace: the running attempt stops its command at the job's next
//     slot (runner.Replacer) and records the run replaced; the next slot's
//     claim, answered overlap meanwhile, is held and asked again (the
//     overlap hold) and wins as soon as that result is recorded. Two
//     commands of the job never run at once.
//   - queue: the overlap hold of a slot lasts until the job's next slot is
//     claimed, however short maxLate is, and its claims carry a maxLate
//     counted from the end of that wait, so that the store does not answer
//     late to a slot that waited. The next slot's claim begins only once the
//     earlier slot's hold is over (the job's claims go in slot order), so
//     at most one slot of a job waits on each instance: a newer one
//     displaces it, and the displaced one is recorded skipped (overlap).

// replacer is the runner.Replacer of a job with overlap: replace: the
// job's schedule, and its pause as this instance last read it.
type replacer struct {
	job    string
	sched  schedule.Schedule
	pauses *pauses
}

// Next is the job's first slot after t.
func (r replacer) Next(t time.Time) time.Time { return r.sched.Next(t) }

// Runs reports whether slot is to run: the job is not paused at it.
func (r replacer) Runs(slot time.Time) bool {
	_, paused := r.pauses.holds(r.job, slot)
	return !paused
}

// replacerOf is the runner.Replacer of job: nil unless its overlap is
// replace.
func (s *Scheduler) replacerOf(job config.Job) runner.Replacer {
	if claim.OverlapPolicy(job.Overlap) != claim.OverlapReplace {
		return nil
	}
	sc, err := schedule.Parse(job.Schedule, job.Location)
	if err != nil {
		return nil // New parsed it already: never happens
	}
	return replacer{job: job.Name, sched: sc, pauses: s.pauses}
}

// queueHold is overlapHold for overlap: queue: until the job's next slot
// is claimed, maxLate after the slot when there is no next slot.
func queueHold(job config.Job, sc schedule.Schedule, slot time.Time) time.Time {
	start := startOf(job, slot)
	next := sc.Next(slot)
	if next.IsZero() {
		return start.Add(job.MaxLate)
	}
	if hold := startOf(job, next).Add(-job.ClaimAhead); hold.After(start) {
		return hold
	}
	return start
}

// claimMaxLate is the maxLate a claim of slot carries: the job's, or, for
// a first claim of a job with overlap: queue, the wait (until hold) plus
// the job's maxLate: the store's late check counts maxLate from the end
// of the wait, so that the claim sent as the wait ends, a moment after
// hold, is answered overlap or won, never late.
func claimMaxLate(job config.Job, slot, hold time.Time) time.Duration {
	late := lateFor(job, slot) // the jitter's delay too
	if claim.OverlapPolicy(job.Overlap) != claim.OverlapQueue || hold.IsZero() {
		return late
	}
	return max(late, hold.Sub(slot)+job.MaxLate)
}

// watcher is how a queued slot waits: between its claims it reads the
// run that holds the job (Leaser.Read, a plain read), and asks the claim
// again only once that run is final or its lease has ended, or the wait
// is over. A claim that waits may be held for a whole period, where skip
// waits at most maxLate: the reads spare the store a claim (on sqlite a
// write transaction) per poll. Nil for the other policies: live is then
// always false.
type watcher struct {
	s      *Scheduler
	job    config.Job
	slot   int64
	holder int64 // the slot of the run that holds the job; 0: not found yet
}

// holderWatch is slot's watcher: nil unless the job's overlap is queue on
// a lease store.
func (s *Scheduler) holderWatch(job config.Job, slot time.Time) *watcher {
	if claim.OverlapPolicy(job.Overlap) != claim.OverlapQueue || s.leaser == nil {
		return nil
	}
	return &watcher{s: s, job: job, slot: slot.UnixMilli()}
}

// live reports whether the run holding the job is still live, before
// hold; false (ask the claim) when it ended, when it cannot be found or
// read, and at or after hold (the last claim).
func (w *watcher) live(ctx context.Context, hold time.Time) bool {
	if w == nil || !w.s.o.Clock.Now().Before(hold) {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, w.s.callTimeout(w.job))
	defer cancel()
	if w.holder == 0 {
		runs, err := w.s.o.Backend.ListRuns(cctx, claim.ListQuery{Job: w.job.Name, Limit: 5,
			Statuses: []claim.Status{claim.StatusRunning}})
		if err != nil {
			return false
		}
		for _, r := range runs {
			if r.Slot != w.slot {
				w.holder = r.Slot
				break
			}
		}
		if w.holder == 0 {
			return false
		}
	}
	run, now, err := w.s.leaser.Read(cctx, w.job.Name, w.holder)
	if err != nil || run.Status != claim.StatusRunning || run.LeaseUntil.Before(now) {
		w.holder = 0 // ended: another run may hold the job next
		return false
	}
	return true
}
