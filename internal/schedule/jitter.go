package schedule

import (
	"hash/fnv"
	"strconv"
	"time"
)

// Jitter is the delay of the start of job's run at the slot slotMs (ms since
// the Unix epoch) for a job whose jitterMs is limit: FNV-1a 64 of
// "job\x00slot_ms" modulo limit+1, in whole milliseconds, so within [0,
// limit]. It depends on nothing but its arguments: every instance computes
// the same start for a run, so their claims still meet at one run, and a
// job's starts spread evenly over the window from slot to slot. 0 when
// limit is not positive.
func Jitter(job string, slotMs int64, limit time.Duration) time.Duration {
	ms := limit.Milliseconds()
	if ms <= 0 {
		return 0
	}
	h := fnv.New64a()
	b := make([]byte, 0, len(job)+21)
	b = append(append(b, job...), 0)
	b = strconv.AppendInt(b, slotMs, 10)
	h.Write(b)
	return time.Duration(h.Sum64()%uint64(ms+1)) * time.Millisecond
}

// Start is the instant the run of job at slot starts when the job's
// jitterMs is limit: the slot plus its Jitter.
func Start(job string, slot time.Time, limit time.Duration) time.Time {
	return slot.Add(Jitter(job, slot.UnixMilli(), limit))
}

// periodSlots is how many consecutive slots Period compares: enough to
// cover the irregular gaps of a cron expression (the end of an hour, a
// month, a daylight-saving change) over years for a daily job and over
// every gap of a minute's pattern for a job of seconds.
const periodSlots = 1000

// Period is the shortest gap between two consecutive slots of s among the
// first periodSlots slots after from, or 0 when s has fewer than two
// slots there. A jitter up to it keeps a job's starts in slot order.
func Period(s Schedule, from time.Time) time.Duration {
	var period time.Duration
	prev := s.Next(from)
	for i := 0; i < periodSlots && !prev.IsZero(); i++ {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		if gap := next.Sub(prev); period == 0 || gap < period {
			period = gap
		}
		prev = next
	}
	return period
}
