package scheduler

import (
	"time"

	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/schedule"
)

// The run of a job with jitterMs starts after its slot, at the slot plus
// schedule.Jitter of (job name, slot): the same instant on every instance,
// whose claims still name the slot and meet at one run. Everything timed
// from a run's start reasons from that instant: the claim's due time
// (claimAhead before the start), the work spread, the overlap hold, the
// lateness of a claim (maxLate after the start) and the catch-up at start
// (docs/spec.md#s5-jitter).

// startOf is when the run of job at slot starts.
func startOf(job config.Job, slot time.Time) time.Time {
	if job.Jitter <= 0 {
		return slot
	}
	return schedule.Start(config.JobOfKey(job.Name), slot, job.Jitter)
}

// lateFor is the job's maxLate counted from the run's start, as a span
// after its slot: what a claim carries, since every store judges lateness
// as now - slot > maxLate. A run jittered 50 s with maxLate 10 s is late
// 60 s after its slot.
func lateFor(job config.Job, slot time.Time) time.Duration {
	return job.MaxLate + startOf(job, slot).Sub(slot)
}

// firstAfter is the first slot of sc whose run starts after t: the slot
// at or before t whose jittered start is still to come, else the next.
func firstAfter(job config.Job, sc schedule.Schedule, t time.Time) time.Time {
	if job.Jitter > 0 {
		if last := lastAtOrBefore(sc, t); !last.IsZero() && startOf(job, last).After(t) {
			return last
		}
	}
	return sc.Next(t)
}

// startedBy is the bound, in slots, of the runs that start at or before
// t: a slot s of sc starts at or before t when s <= startedBy(t). Without
// jitter that is t itself. A jitter is at most the job's period, so the
// starts keep the slots' order and one bound splits them.
func startedBy(job config.Job, sc schedule.Schedule, t time.Time) time.Time {
	if job.Jitter <= 0 {
		return t
	}
	last := lastAtOrBefore(sc, t)
	if last.IsZero() || !startOf(job, last).After(t) {
		return last
	}
	return lastBefore(sc, last)
}
