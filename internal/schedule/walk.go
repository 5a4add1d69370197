package schedule

import (
	"math/bits"
	"time"

	"github.com/adhocore/gronx"
)

// horizon is how far Next looks for a slot. Eight years always contain a
// 29 February, so "0 0 29 2 *" never looks impossible.
const horizonYears = 8

// cron is a parsed 5- or 6-field expression in a zone.
//
// Wall-clock times are handled as "naive" times: a time.Time in UTC whose
// fields are the wall clock's fields, so that calendar arithmetic on them
// knows nothing of daylight saving.
type cron struct {
	expr  string
	loc   *time.Location
	fixed bool // neither minute nor hour begins with '*': see the package doc

	// bit v set: value v matches (as gronx decided at Parse time)
	second, minute, hour, month uint64

	dom, dow string // gronx's day-of-month and day-of-week segments
	anyDay   bool   // both are '*' or '?': every day matches
}

func (c *cron) String() string { return c.expr }

// Next returns the first slot strictly after t.
func (c *cron) Next(t time.Time) time.Time {
	u0 := t.Truncate(time.Second).Add(time.Second) // first candidate instant
	var chk gronx.SegmentChecker
	if c.fixed {
		return c.nextFixed(&chk, u0)
	}
	return c.nextElapsed(&chk, u0)
}

// nextElapsed returns the first instant u >= u0 whose wall time matches.
// It walks the zone's periods of constant UTC offset: inside one, wall time
// is instant plus offset, so it searches the period's wall-time range.
func (c *cron) nextElapsed(chk *gronx.SegmentChecker, u0 time.Time) time.Time {
	limit := u0.AddDate(horizonYears, 0, 0)
	for u := u0; u.Before(limit); {
		_, off := u.In(c.loc).Zone()
		end := c.periodEnd(u, off)
		hi := limit
		if !end.IsZero() && end.Before(limit) {
			hi = end
		}
		if w, ok := c.nextWall(chk, naive(u, off), naive(hi, off)); ok {
			return w.Add(-time.Duration(off) * time.Second)
		}
		u = hi
	}
	return time.Time{}
}

// nextFixed returns the first slot >= u0 of a fixed-time job. Mapping each
// wall time to its slot (first occurrence, or the end of the gap it falls
// into) never decreases, so it finds the smallest wall time whose slot can
// be >= u0 and searches upwards from there.
func (c *cron) nextFixed(chk *gronx.SegmentChecker, u0 time.Time) time.Time {
	local := u0.In(c.loc)
	_, off := local.Zone()
	from := naive(u0, off)
	if start, _ := local.ZoneBounds(); !start.IsZero() {
		_, prev := start.Add(-time.Second).In(c.loc).Zone()
		switch {
		case prev > off && from.Before(naive(start, prev)):
			// u0 is in the second copy of a repeated hour: the wall times
			// of that hour had their slot at their first occurrence, so
			// skip them (the loop below would too, one by one).
			from = naive(start, prev)
		case prev < off && u0.Equal(start):
			// u0 is the end of a gap: the gap's wall times have it as slot.
			from = naive(start, prev)
		}
	}
	limit := from.AddDate(horizonYears, 0, 0)
	for {
		w, ok := c.nextWall(chk, from, limit)
		if !ok {
			return time.Time{}
		}
		u := c.firstInstant(w)
		if end, long := c.longJump(w, u); long {
			from = end // w and the rest of the jump's wall times have no slot
			continue
		}
		if !u.Before(u0) {
			return u
		}
		from = w.Add(time.Second) // a wall time whose slot is before u0
	}
}

// maxCatchUp is the shortest forward clock jump that ISC cron treats as a
// time change rather than daylight saving: the fixed-time wall times it
// skips are not run at its end. The jumps of daylight saving are an hour
// (half an hour on Lord Howe Island); Pacific/Apia skipped 30 December 2011,
// a jump of 24 hours.
const maxCatchUp = 3 * time.Hour

// longJump reports whether wall time w, whose slot firstInstant gave as u,
// was skipped by a forward jump of maxCatchUp or more; if so it also
// returns the wall time at the end of the jump (that of u), from which the
// search goes on.
func (c *cron) longJump(w, u time.Time) (time.Time, bool) {
	off := c.offset(u)
	shown := naive(u, off)
	if !shown.After(w) {
		return time.Time{}, false // w is shown at u: not skipped
	}
	jump := time.Duration(off-c.offset(u.Add(-time.Second))) * time.Second
	return shown, jump >= maxCatchUp
}

// firstInstant maps a wall time to a fixed-time job's slot: the first
// instant showing it, or the instant that ends the gap it falls into.
func (c *cron) firstInstant(w time.Time) time.Time {
	y, mo, d := w.Date()
	h, mi, s := w.Clock()
	u := time.Date(y, mo, d, h, mi, s, 0, c.loc) // one of the instants, or near the gap
	_, off := u.Zone()
	start, _ := u.ZoneBounds()
	switch shown := naive(u, off); {
	case shown.Equal(w):
		// time.Date may have picked the second occurrence: look for one in
		// the previous period.
		if !start.IsZero() && !start.After(u) {
			_, prev := start.Add(-time.Second).In(c.loc).Zone()
			early := w.Add(-time.Duration(prev) * time.Second)
			if _, o := early.In(c.loc).Zone(); o == prev && early.Before(start) {
				return early
			}
		}
		return u.UTC()
	case shown.After(w):
		// w is in a gap that ends where u's period starts.
		if !start.IsZero() && !start.After(u) && c.offset(start.Add(-time.Second)) != off {
			return start.UTC()
		}
		return c.lastChange(u).UTC()
	default:
		// w is in a gap that starts where u's period ends.
		return c.periodEnd(u, off).UTC()
	}
}

func (c *cron) offset(u time.Time) int {
	_, off := u.In(c.loc).Zone()
	return off
}

// lastChange returns the last instant at or before u at which the zone's
// offset changed, looking back a day: a fallback for when ZoneBounds does
// not know.
func (c *cron) lastChange(u time.Time) time.Time {
	hi := u.Truncate(time.Second)
	off := c.offset(hi)
	lo := hi.Add(-24 * time.Hour)
	if c.offset(lo) == off {
		return hi
	}
	// offset(lo) != off == offset(hi)
	return bisect(lo, hi, func(t time.Time) bool { return c.offset(t) == off })
}

// bisect returns the instant in (lo, hi], to the second, at which
// reached starts to hold: it does not at lo, it does at hi, and it
// changes once between them.
func bisect(lo, hi time.Time, reached func(time.Time) bool) time.Time {
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if reached(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// periodEnd returns the first instant after u at which the zone's UTC offset
// is no longer off (the offset at u), or the zero Time if it never changes.
// When it cannot tell, it may return an earlier instant up to which the
// offset is still off (a day after u at most).
//
// It trusts time.Time.ZoneBounds when its answer makes sense. Beyond the end
// of the tzdata tables (2037) Go derives the bounds from the zone's rule: it
// reports extra bounds at the turn of each (UTC) year, which are skipped
// here, and, as it treats every year as 365 days long, on 31 December of a
// leap year it returns an end that is not after u (Go 1.26); then the change
// is searched for here, a day ahead, by bisection.
func (c *cron) periodEnd(u time.Time, off int) time.Time {
	at := u.Truncate(time.Second)
	for range 3 {
		_, end := at.In(c.loc).ZoneBounds()
		if end.IsZero() {
			return end
		}
		if !end.After(at) || c.offset(end.Add(-time.Second)) != off {
			break // nonsense: search below
		}
		if c.offset(end) != off {
			return end
		}
		at = end // a bound without a change
	}
	lo, hi := at, at.Add(24*time.Hour)
	if c.offset(hi) == off {
		return hi // offsets change at most a few times a year
	}
	// offset(lo) == off != offset(hi)
	return bisect(lo, hi, func(t time.Time) bool { return c.offset(t) != off })
}

// naive returns the wall time of instant u at UTC offset off (seconds).
func naive(u time.Time, off int) time.Time {
	return u.UTC().Add(time.Duration(off) * time.Second)
}

// nextWall returns the first matching naive wall time w with lo <= w < hi,
// skipping whole months, days, hours and minutes that cannot match.
func (c *cron) nextWall(chk *gronx.SegmentChecker, lo, hi time.Time) (time.Time, bool) {
	lo = lo.Truncate(time.Second)
	y, mo, d := lo.Date()
	h0, m0, s0 := lo.Clock()
	for day := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC); day.Before(hi); {
		y, mo, d = day.Date()
		if c.month&(1<<mo) == 0 {
			day = time.Date(y, mo+1, 1, 0, 0, 0, 0, time.UTC)
			h0, m0, s0 = 0, 0, 0
			continue
		}
		if ok, _ := c.dayDue(chk, day); ok {
			if w, ok := c.inDay(day, h0, m0, s0); ok {
				if w.Before(hi) {
					return w, true
				}
				return time.Time{}, false
			}
		}
		day = time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC)
		h0, m0, s0 = 0, 0, 0
	}
	return time.Time{}, false
}

// inDay returns the first matching time of day at or after h0:m0:s0.
func (c *cron) inDay(day time.Time, h0, m0, s0 int) (time.Time, bool) {
	for h := nextBit(c.hour, h0); h >= 0; h = nextBit(c.hour, h+1) {
		mFrom := 0
		if h == h0 {
			mFrom = m0
		}
		for m := nextBit(c.minute, mFrom); m >= 0; m = nextBit(c.minute, m+1) {
			sFrom := 0
			if h == h0 && m == m0 {
				sFrom = s0
			}
			if s := nextBit(c.second, sFrom); s >= 0 {
				y, mo, d := day.Date()
				return time.Date(y, mo, d, h, m, s, 0, time.UTC), true
			}
		}
	}
	return time.Time{}, false
}

// nextBit returns the smallest set bit of set that is >= from, or -1.
func nextBit(set uint64, from int) int {
	if from > 63 {
		return -1
	}
	rest := set & (^uint64(0) << from)
	if rest == 0 {
		return -1
	}
	return bits.TrailingZeros64(rest)
}

// dayDue asks gronx whether the day-of-month and day-of-week fields match
// the civil date of day, with gronx's rule for combining the two.
func (c *cron) dayDue(chk *gronx.SegmentChecker, day time.Time) (bool, error) {
	if c.anyDay {
		return true, nil
	}
	y, mo, d := day.Date()
	chk.SetRef(time.Date(y, mo, d, 12, 0, 0, 0, time.UTC))
	g := gronx.Gronx{C: chk}
	return g.SegmentsDue([]string{"*", "*", "*", c.dom, "*", c.dow})
}
