package check

import (
	"fmt"
	"strings"
)

// KindLeaseStart is the violation of an attempt whose job started after
// the end of the lease the store granted it.
const KindLeaseStart = "start-after-lease"

// ExecMarginMs is how long after its lease's end an attempt's start may be
// seen and still count as within the lease. A job's first instruction runs
// once its exec has succeeded; what the files show comes after it: the
// runner's "job started" line, logged once the exec has returned, and the
// job's start record, stamped once the job binary's runtime has started
// (11–48 ms after the exec on this project's loaded machine, seconds
// under CPU starvation). The earlier of the two is judged (startSeen); the
// margin covers the exec's own return to the runner and the line's
// logging, not a runner that decided to start late.
const ExecMarginMs = 30

// leaseStarts: on lease backends, every attempt whose runner logged the
// lease it started under ("job started" with lease_until) is seen started
// (startSeen) no later than that lease's end, mapped from store time to
// wall time (RunInfo.StoreClockOffsetMs), plus ExecMarginMs. It also
// fills the summary's figures of the check.
func (c *checker) leaseStarts() {
	s := &c.rep.Summary
	first := true
	for _, k := range c.keys {
		for _, a := range c.runs[k].attempts {
			if len(a.starts) == 0 {
				continue
			}
			ev, ok := c.startedEvent(a)
			if !ok {
				s.LeaseStartsUnlogged++
				continue
			}
			late := startSeen(a, ev) - c.storeToWall(ev.LeaseUntilMs)
			s.LeaseStartsChecked++
			s.StartStampLagMaxMs = max(s.StartStampLagMaxMs, a.startMs()-ev.TsMs)
			if first || late > s.LeaseStartWorstMs {
				s.LeaseStartWorstMs, first = late, false
			}
			if late > ExecMarginMs {
				c.startAfterLease(a, ev, late)
			}
		}
	}
}

// startedEvent returns the "job started" line of a's runner that names a
// lease: same instance, token and attempt.
func (c *checker) startedEvent(a *attempt) (Event, bool) {
	for _, e := range c.byRun[a.key] {
		if e.Msg == msgStarted && e.HasLease && e.Inst == a.inst && e.Attempt == a.num && sameToken(e.Token, a.token) && e.Token != "" {
			return e, true
		}
	}
	return Event{}, false
}

// startSeen is the earliest instant the files show a's job as started: its
// start record, or its runner's "job started" line ev if that came first.
func startSeen(a *attempt, ev Event) int64 { return min(a.startMs(), ev.TsMs) }

// storeToWall maps an instant of the store's clock onto the wall clock.
func (c *checker) storeToWall(ms int64) int64 { return ms - c.r.Info.StoreClockOffsetMs }

// startAfterLease reports a's job, started late ms after the end of the
// lease ev names.
func (c *checker) startAfterLease(a *attempt, ev Event, late int64) {
	j := c.job(a.key.job)
	end := c.storeToWall(ev.LeaseUntilMs)
	ev0 := fmt.Sprintf("attempt %d (%s, token %s) started by %s (the earlier of its runner's line and its start record), %d ms after the end of its lease at %s (lease_until %s store time, store clock offset %d ms; exec margin %d ms)",
		a.num, instName(a.inst), a.token, msText(startSeen(a, ev)), late, msText(end), msText(ev.LeaseUntilMs), c.r.Info.StoreClockOffsetMs, ExecMarginMs)
	evidence := []string{ev0, ev.Where()}
	if granted := end - j.LeaseMs; j.LeaseMs > 0 && startSeen(a, ev)-granted > j.LeaseMs/2 {
		evidence = append(evidence, fmt.Sprintf(
			"the job started more than half a lease (%d ms) after the lease was granted: its runner renews before starting such a job, and that renewal is logged at debug only, so the lease at the start may be later than this one",
			j.LeaseMs/2))
	}
	if why := c.tl.disturbedIn(a.inst, end-j.LeaseMs, startSeen(a, ev)); why != "" {
		evidence = append(evidence, "meanwhile: "+why)
	}
	if f, ok := c.overloadIn(end-j.LeaseMs, startSeen(a, ev)); ok {
		evidence = append(evidence, "meanwhile: "+faultText(f))
	}
	evidence = append(evidence, a.lines()...)
	c.violateAs(KindLeaseStart, "attempt|"+attemptID(a), a.key, evidence...)
}

// overloadIn returns the overload fault in force at some instant of
// [a, b]: one that began before b and had not ended by a.
func (c *checker) overloadIn(a, b int64) (FaultLine, bool) {
	var cur FaultLine
	on := false
	for _, f := range c.tl.faults {
		if f.AtMs > b {
			break
		}
		switch f.Kind {
		case FaultOverload:
			cur, on = f, true
		case FaultOverloadEnd:
			if f.AtMs >= a && on {
				return cur, true
			}
			on = false
		}
	}
	return cur, on
}

// leaseStartText is the report's line on the check, "" off lease backends.
func leaseStartText(s Summary) string {
	if s.LeaseStartsChecked == 0 && s.LeaseStartsUnlogged == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "starts within their lease: %d attempts checked (%d with no lease logged)", s.LeaseStartsChecked, s.LeaseStartsUnlogged)
	if s.LeaseStartsChecked > 0 {
		fmt.Fprintf(&b, ", latest start %+d ms from its lease's end (margin %d ms); a job stamped its start up to %d ms after its runner's line",
			s.LeaseStartWorstMs, ExecMarginMs, s.StartStampLagMaxMs)
	}
	return b.String()
}
