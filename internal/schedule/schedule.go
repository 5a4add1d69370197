// Package schedule turns a job's schedule expression and time zone into its
// slots: the instants at which the job is due (docs/spec.md#s5).
//
// Slots are a pure function of (expression, zone): Next(t) depends on
// nothing but its argument, so every instance, started at any moment,
// computes the same instants.
//
// Cron expressions are parsed and matched by github.com/adhocore/gronx, but
// the slots are computed here, not by gronx's NextTickAfter, which is not
// DST-safe. Wall-clock matches in the job's zone map to instants with the
// rule ISC cron uses:
//
//   - A fixed-time job is one whose minute and hour fields both do not begin
//     with '*' (nor '?', gronx's other wildcard); the seconds field plays no
//     part: "30 3 * * *", "0 30 3 * * *", "*/10 30 3 * * *", @daily,
//     @weekly, @monthly, @yearly. A matching wall time that falls into a
//     forward jump of less than 3 hours (daylight saving's spring-forward
//     gap) runs once, at the first instant after the gap (the transition);
//     several such wall times of the same gap, and the wall time just after
//     it, collapse into that one slot. A jump of 3 hours or more is a time
//     change, not daylight saving: the wall times it skips have no slot
//     (Pacific/Apia skipped 30 December 2011). A matching wall time that
//     occurs twice on a fall-back day runs once, at its first occurrence.
//   - Every other job ("*/30 * * * *", "5 * * * *", "*/20 * * * * *",
//     @hourly) follows elapsed time: its slots are exactly the instants whose
//     wall time in the zone matches, so there are none inside a gap and there
//     are slots in both copies of a repeated hour.
//   - "@every d" has the slots k·d since the Unix epoch, in any zone.
package schedule

import (
	"time"
)

// Schedule computes the slots of one job: a pure function of (expression, zone).
// It is safe for concurrent use.
type Schedule interface {
	// Next returns the first slot strictly after t, as a UTC instant truncated
	// to the second (to the millisecond for @every). It returns the zero Time
	// if there is none within about eight years after t (for example
	// "0 0 30 2 *"); eight years always contain a 29 February.
	Next(t time.Time) time.Time
	// String returns the expression as written.
	String() string
}

// Between returns the slots s with from < s <= to, in order, at most max of
// them (max <= 0: no limit).
func Between(s Schedule, from, to time.Time, max int) []time.Time {
	var out []time.Time
	for t := from; max <= 0 || len(out) < max; {
		next := s.Next(t)
		if next.IsZero() || next.After(to) || !next.After(t) {
			break
		}
		out = append(out, next)
		t = next
	}
	return out
}

// every is "@every d": the multiples of d since the Unix epoch.
type every struct {
	expr string
	d    time.Duration // at least 1s, whole milliseconds
}

func (e *every) String() string { return e.expr }

func (e *every) Next(t time.Time) time.Time {
	ms := t.UnixMilli() // floor: the sub-millisecond part of t is never negative
	step := e.d.Milliseconds()
	k := ms / step
	if ms%step < 0 {
		k-- // floor division for instants before 1970
	}
	return time.UnixMilli((k + 1) * step).UTC()
}
