package scheduler

import (
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/schedule"
)

// Reasons a slot was not run: the reason label of
// anarchon_missed_slots_total and of the "missed:" log lines.
const (
	// ReasonLate: the slot was older than maxLate when it could be claimed
	// (a pause, a clock jump, or every instance down longer than maxLate).
	ReasonLate = "late"
	// ReasonCatchUp: the slot came due while every instance was down, was
	// still within maxLate at the start, and the job's catchUp policy does
	// not run it (latest: every one but the newest; none: all of them).
	ReasonCatchUp = "catch_up"
	// ReasonStoreUnreachable: the store did not answer in time: a first
	// claim given up after maxLate, or a start's catch-up given up while
	// the store could not be read.
	ReasonStoreUnreachable = "store_unreachable"
	// ReasonStoreRefused: the store refused the claim for good (a
	// claim.PermanentError: a missing privilege, a wrong password, a queue
	// declared with other arguments); it is not re-sent.
	ReasonStoreRefused = "store_refused"
)

// countMissed counts n slots of job not run, for reason.
func (s *Scheduler) countMissed(job, reason string, n int) {
	if s.o.Hooks.Missed != nil && n > 0 {
		s.o.Hooks.Missed(config.JobOfKey(job), reason, n)
	}
}

// span is a run of consecutive slots of one job: how many, the first and
// the last. n may be a lower bound (maxMissedWalk).
type span struct {
	n           int
	first, last time.Time
}

// add extends sp with other, which follows or precedes it.
func (sp span) add(other span) span {
	if other.n == 0 {
		return sp
	}
	if sp.n == 0 {
		return other
	}
	sp.n += other.n
	if other.first.Before(sp.first) {
		sp.first = other.first
	}
	if other.last.After(sp.last) {
		sp.last = other.last
	}
	return sp
}

// startPlan is what a start does with the slots of one job that came due
// before it: the first slot it claims, and the slots it does not run.
type startPlan struct {
	first time.Time // the first slot claimed (zero: the schedule has none)
	// why the start runs nothing from before it, when that is the rule
	// rather than the policy: "new" (the store has no run of the job) or
	// "changed" (its newest recorded slot is not a slot of the schedule).
	why     string
	newest  time.Time // the newest slot the store recorded (zero: none)
	late    span      // after newest, older than maxLate at the start
	skipped span      // within maxLate at the start, not run by the policy
	run     span      // within maxLate at the start, run by the policy
}

// planStart decides, from the newest run the store recorded for e's job
// (nil: none), which of the job's slots at or before start the start
// claims. Only slots after the newest recorded one are missed: that one
// was claimed by an instance alive then. A job the store has no run of is
// new to the cluster (or its runs were pruned): nothing from the past runs.
// A newest recorded slot that is not a slot of the schedule means that the
// schedule changed since: nothing from the past runs either, as a reload
// would have started it from then.
func planStart(e *entry, newest *claim.Run, start time.Time) startPlan {
	p := startPlan{first: firstAfter(e.job, e.sched, start)}
	if newest == nil {
		p.why = "new"
		return p
	}
	p.newest = newest.SlotTime()
	if !isSlot(e.sched, p.newest) {
		p.why = "changed"
		return p
	}
	if !p.newest.Before(start) {
		return p
	}
	// Slots after lo are within maxLate (their runs' starts are); those
	// up to upTo have started.
	lo := startedBy(e.job, e.sched, start.Add(-e.job.MaxLate))
	upTo := startedBy(e.job, e.sched, start)
	p.late = slotsIn(e.sched, p.newest, lo)
	window := slotsIn(e.sched, later(p.newest, lo), upTo)
	if window.n == 0 {
		return p
	}
	switch e.job.CatchUp {
	case config.CatchUpAll:
		p.first, p.run = window.first, window
	case config.CatchUpNone:
		p.skipped = window
	default: // latest, the built-in default
		p.first, p.run = window.last, span{n: 1, first: window.last, last: window.last}
		if window.n > 1 {
			p.skipped = span{n: window.n - 1, first: window.first, last: lastBefore(e.sched, window.last)}
		}
	}
	return p
}

// newestAtOrBefore returns the newest of runs (newest slot first, at most
// limit of them) whose slot is at or before start, or nil. known is false
// when every run read is after start and there may be older ones unread.
func newestAtOrBefore(runs []claim.Run, start time.Time, limit int) (newest *claim.Run, known bool) {
	for i := range runs {
		if !runs[i].SlotTime().After(start) {
			return &runs[i], true
		}
	}
	return nil, len(runs) < limit
}

// holdUntil reports whether the start waits for the store's answer before
// it schedules e, and until when at most: while the job's catch-up policy
// could still run a slot from before the start, that is until its newest
// slot within maxLate is no longer within maxLate.
func holdUntil(e *entry, start time.Time) (time.Time, bool) {
	if e.job.CatchUp == config.CatchUpNone {
		return time.Time{}, false
	}
	last := lastAtOrBefore(e.sched, start)
	if e.job.Jitter > 0 {
		last = startedBy(e.job, e.sched, start) // the newest run started
	}
	if last.IsZero() || start.Sub(startOf(e.job, last)) >= e.job.MaxLate {
		return time.Time{}, false
	}
	return startOf(e.job, last).Add(e.job.MaxLate), true
}

// isSlot reports whether t is a slot of sc.
func isSlot(sc schedule.Schedule, t time.Time) bool {
	return sc.Next(t.Add(-time.Millisecond)).Equal(t)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// slotsIn counts the slots s of sc with after < s <= upTo, walking at most
// maxMissedWalk of them; beyond that the count is a lower bound and the
// last slot is found by a search.
func slotsIn(sc schedule.Schedule, after, upTo time.Time) span {
	var sp span
	for t := sc.Next(after); !t.IsZero() && !t.After(upTo); t = sc.Next(t) {
		if sp.n == maxMissedWalk {
			sp.last = lastAtOrBefore(sc, upTo)
			return sp
		}
		if sp.n == 0 {
			sp.first = t
		}
		sp.n, sp.last = sp.n+1, t
	}
	return sp
}

// maxLookBack bounds how far back lastAtOrBefore searches: a schedule's
// slots are at most about eight years apart (schedule.Schedule).
const maxLookBack = 9 * 366 * 24 * time.Hour

// lastAtOrBefore returns the newest slot of sc at or before t, or the zero
// Time if there is none within maxLookBack. It looks back over a doubling
// span until the span holds a slot, then walks forward to the newest one.
func lastAtOrBefore(sc schedule.Schedule, t time.Time) time.Time {
	for d := time.Second; d <= 2*maxLookBack; d *= 2 {
		p := sc.Next(t.Add(-d))
		if p.IsZero() || p.After(t) {
			continue
		}
		for q := sc.Next(p); !q.IsZero() && !q.After(t); q = sc.Next(q) {
			p = q
		}
		return p
	}
	return time.Time{}
}

// lastBefore returns the newest slot of sc strictly before t.
func lastBefore(sc schedule.Schedule, t time.Time) time.Time {
	return lastAtOrBefore(sc, t.Add(-time.Millisecond))
}
