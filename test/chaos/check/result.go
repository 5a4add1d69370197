package check

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// recordWindowMs is how long the runner retries recording a result at
// least (internal/runner recordWindow): a cut-off runner may record late
// or give up.
const recordWindowMs = 30000

// results: the store's status rows agree with the journals (docs/spec.md#s4):
// same winner, the newest attempt, the job's exit as the result.
func (c *checker) results() {
	if !c.r.HasStatus {
		return
	}
	if len(c.r.Status) == 0 && len(c.runs) > 0 {
		c.note("status.jsonl has no rows although %d runs started: the result checks are skipped (the backend lists no runs?)", len(c.runs))
		return
	}
	for _, s := range c.r.Status {
		if _, known := c.jobs[s.Job]; !known {
			c.note("%s: job not in run.json: not checked", s.Where())
			continue
		}
		c.resultRow(s)
	}
	c.unlisted()
}

// resultRow judges one status row.
func (c *checker) resultRow(s StatusRow) {
	k := runKey{s.Job, s.SlotMs}
	d := c.runs[k]
	var mine *attempt
	var others []*attempt
	if d != nil {
		for _, a := range d.attempts {
			switch {
			case a.token == s.Token:
				mine = a
			case !c.r.Info.Lease || a.num == s.Attempt:
				others = append(others, a)
			}
		}
	}
	if mine == nil && len(others) > 0 {
		ev := []string{fmt.Sprintf("the store's winner of attempt %d is not the job that ran it:", s.Attempt), s.Where()}
		for _, a := range others {
			ev = append(ev, a.lines()...)
		}
		c.violate(KindTwoWinners, k, ev...)
		return
	}
	if mine == nil {
		c.unstarted(k, s)
		return
	}
	if c.r.Info.Lease {
		if mine.num != s.Attempt {
			c.violate(KindResult, k, append([]string{fmt.Sprintf("the store says attempt %d, the journal attempt %d for token %s", s.Attempt, mine.num, s.Token), s.Where()}, mine.lines()...)...)
			return
		}
		if n := d.newest(); s.Attempt < n {
			c.violate(KindResult, k, fmt.Sprintf("the store's attempt %d is older than attempt %d, which started", s.Attempt, n), s.Where())
			return
		}
	}
	c.resultOf(k, s, mine)
}

// resultOf compares the row's status and exit code with its attempt's end.
func (c *checker) resultOf(k runKey, s StatusRow, a *attempt) {
	e := a.end()
	switch s.Status {
	case "succeeded", "failed":
		if e == nil {
			c.violate(KindResult, k, append([]string{fmt.Sprintf("the store says %s but the job never wrote its end record", s.Status), s.Where()}, a.lines()...)...)
			return
		}
		want := "failed"
		if e.Exit == 0 {
			want = "succeeded"
		}
		if s.Status != want || s.ExitCode == nil || *s.ExitCode != e.Exit {
			c.violate(KindResult, k, fmt.Sprintf("the job exited %d: want status %s exit_code %d", e.Exit, want, e.Exit), s.Where(), e.Where())
		}
	case "timeout":
		c.violate(KindResult, k, "status timeout, but the harness sets no job timeout", s.Where())
	case "running", "abandoned", "interrupted":
		// abandoned: running in the store with no live runner (status
		// computes it from the lease's end, or a claim-only run's age).
		if e != nil && e.Fence == "ok" {
			c.unrecorded(k, s, a)
		}
	default:
		c.violate(KindResult, k, fmt.Sprintf("unknown status %q", s.Status), s.Where())
	}
}

// unrecorded judges an attempt whose job ended with its fenced write
// accepted while the store still says running or interrupted: allowed near
// the end of the run, or when the runner was SIGKILLed before it could
// record (see deadRunner). A runner that was cut off, blackholed or paused
// must still record the result once the store answers again (it retries
// for recordWindowMs): that is not excused.
func (c *checker) unrecorded(k runKey, s StatusRow, a *attempt) {
	j := c.job(k.job)
	e := a.end()
	cutoff := c.tl.end - (j.LeaseMs + j.HeartbeatMs + ResultSlackMs)
	if e.EndMs >= cutoff {
		c.excuse(KindResult, k, fmt.Sprintf("status %s although attempt %d ended at %s: too close to the end of the run to be recorded (after %s)",
			s.Status, a.num, msText(e.EndMs), msText(cutoff)))
		return
	}
	if why := c.deadRunner(a); why != "" {
		c.excuse(KindResult, k, fmt.Sprintf("status %s although attempt %d ended with its write accepted at %s: %s", s.Status, a.num, msText(e.EndMs), why))
		return
	}
	if why := c.tl.obstructedUntilDeath(a.inst, e.EndMs, recordWindowMs); why != "" {
		c.excuse(KindResult, k, fmt.Sprintf("status %s although attempt %d ended at %s: its runner could not reach the store (%s) and died before its retries got through",
			s.Status, a.num, msText(e.EndMs), why))
		return
	}
	if s.Status == "interrupted" {
		// The lease ran out while the runner could not renew it, and the
		// store interrupted the run (its attempts ran out, or another run
		// of the job was live): the attempt's result is refused by design.
		// A runner loses its lease to a fault longer than lease minus a
		// heartbeat: the renewal in flight when it begins waits a
		// heartbeat for its answer, and the next one after it ends takes
		// another to arrive.
		why := c.tl.leaseLostIn(a.inst, a.startMs(), e.EndMs, j.LeaseMs-j.HeartbeatMs)
		if why == "" {
			// The runner's own word (a slow or lossy link, a loaded
			// host; the runner may fence itself before it sees the
			// command exit).
			why = c.leaseTrouble(a)
		}
		if why != "" {
			c.excuse(KindResult, k, fmt.Sprintf("status interrupted although attempt %d ended at %s: its lease ran out while %s, and the store refused the late result",
				a.num, msText(e.EndMs), why))
			return
		}
	}
	ev := []string{fmt.Sprintf("status %s although attempt %d ended with its write accepted at %s, before %s (end of run - lease - heartbeat - %d ms)",
		s.Status, a.num, msText(e.EndMs), msText(cutoff), ResultSlackMs), s.Where(), e.Where()}
	c.violateAs(KindResult, c.unrecordedCause(a), k, append(ev, c.recordContext(a, e.EndMs)...)...)
}

// deadRunner returns why a's runner was dead when a's job ended: it was
// SIGKILLed before the job ended or within KillGraceMs after the job's end
// or the runner's own line saying so, too soon to record anything; ""
// otherwise.
func (c *checker) deadRunner(a *attempt) string {
	e := a.end()
	f, ok := c.tl.runnerKill(a.inst, a.startMs())
	if e == nil || !ok {
		return ""
	}
	if f.AtMs <= e.EndMs {
		return fmt.Sprintf("its runner was dead: %s, %d ms before the job ended (kill grace %d ms)", faultText(f), e.EndMs-f.AtMs, KillGraceMs)
	}
	if f.AtMs <= e.EndMs+KillGraceMs {
		return fmt.Sprintf("its runner was killed %d ms after the job ended, within the kill grace (%d ms): %s", f.AtMs-e.EndMs, KillGraceMs, faultText(f))
	}
	if why := c.writeInFlight(a, f); why != "" {
		return why
	}
	// Recording takes store round trips: under an injected latency L each
	// is 2L longer, and the runner may be killed before the write's
	// answer arrives.
	lat, s := c.tl.slowIn(a.inst, e.EndMs, f.AtMs)
	if slow := slowRoundTrips * 2 * lat; lat > 0 && f.AtMs <= e.EndMs+KillGraceMs+slow {
		return fmt.Sprintf("its runner was killed %d ms after the job ended while its store traffic was delayed by %d ms each way %s: within the kill grace (%d ms) and %d round trips of it (%d ms): %s",
			f.AtMs-e.EndMs, lat, c.tl.spanText(s.span), KillGraceMs, slowRoundTrips, slow, faultText(f))
	}
	return ""
}

// writeInFlight returns why a's result was unrecorded when its runner was
// killed while the first write of it was in flight: after the runner's
// "job finished" line (on a starved host the runner reaps the job, and
// starts the write, some time after the job's last record), within one
// call's bound (the runner's per-call timeout, two heartbeats and at
// least 2 s), with no failed write logged before the kill; "" otherwise.
func (c *checker) writeInFlight(a *attempt, f FaultLine) string {
	x, ok := c.exitEvidence(a)
	if !ok || x.Msg != msgFinished || f.AtMs < x.TsMs {
		return ""
	}
	perCall := max(2*c.job(a.key.job).HeartbeatMs, 2000)
	if f.AtMs > x.TsMs+perCall {
		return ""
	}
	for _, e := range c.byRun[a.key] {
		if e.Inst == a.inst && sameToken(e.Token, a.token) && e.TsMs <= f.AtMs &&
			(strings.HasPrefix(e.Msg, msgRecordRetryPfx) || strings.HasPrefix(e.Msg, msgNotRecordedPfx)) {
			return ""
		}
	}
	return fmt.Sprintf("its runner was killed %d ms after it logged the job's end (%s), with its first write of the result in flight: no failure logged, and one call may take %d ms: %s",
		f.AtMs-x.TsMs, x.Where(), perCall, faultText(f))
}

// unrecordedCause groups the unrecorded results of one daemon process: the
// same runner failing to record is one event.
func (c *checker) unrecordedCause(a *attempt) string {
	return fmt.Sprintf("runner not recording results|%s life %d", instName(a.inst), c.tl.life(a.inst, a.startMs()))
}

// recordContext is evidence on why a's runner did not record a result
// after its job ended at at: its own log line saying so, and what kept it
// from the store in the time it retries. Context only, never an excuse.
func (c *checker) recordContext(a *attempt, at int64) []string {
	var out []string
	for _, e := range c.byRun[a.key] {
		if e.Inst == a.inst && strings.HasPrefix(e.Msg, msgNotRecordedPfx) && sameToken(e.Token, a.token) {
			out = append(out, e.Where())
		}
	}
	j := c.job(a.key.job)
	if why := c.tl.disturbedIn(a.inst, at, at+max(recordWindowMs, j.LeaseMs)+j.HeartbeatMs+c.r.Info.EpsilonMs); why != "" {
		out = append(out, "context (not an excuse): "+why)
	}
	return out
}

// unstarted judges a row whose token has no start record: allowed when the
// run is interrupted or its runner died (or gave up) before the job
// started.
func (c *checker) unstarted(k runKey, s StatusRow) {
	if s.Status == "interrupted" {
		return
	}
	if why := c.diedBeforeStart(k, s); why != "" {
		c.excuse(KindResult, k, fmt.Sprintf("token %s (attempt %d, status %s) has no start record: excused: died before start: %s", s.Token, s.Attempt, s.Status, why))
		return
	}
	c.violate(KindResult, k, fmt.Sprintf("token %s (attempt %d, status %s) has no start record in any journal", s.Token, s.Attempt, s.Status), s.Where())
}

// diedBeforeStart returns why the row's winner never started its job: a
// daemon line for the run and token saying the claim was abandoned or the
// job not started, or its instance killed, paused or cut off (or the store
// down) just after the claim. "" if none.
func (c *checker) diedBeforeStart(k runKey, s StatusRow) string {
	for _, e := range c.byRun[k] {
		if !sameToken(e.Token, s.Token) {
			continue
		}
		if strings.HasPrefix(e.Msg, msgAbandonPrefix) || strings.HasPrefix(e.Msg, msgNotStarted) || e.Msg == msgCouldNotStart {
			return e.Where()
		}
	}
	i, ok := instOf(s.Instance)
	if !ok {
		return ""
	}
	j := c.job(k.job)
	from := k.slot
	if s.StartedAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *s.StartedAt); err == nil {
			from = t.UnixMilli()
		}
	}
	for _, e := range c.byRun[k] {
		if e.Inst == i && e.Msg == msgClaim && e.Outcome == "won" && sameToken(e.Token, s.Token) {
			from = e.TsMs
			break
		}
	}
	// from is on the winner's clock (a claim-only store keeps the
	// instance's time): one running ahead claimed, and died, before it by
	// up to its skew. Look back by the largest skew it ever had.
	return c.tl.disturbedIn(i, from-deathSlack(j)-c.tl.maxSkew(i), from+max(j.LeaseMs, winnerDiedMs)+j.HeartbeatMs+c.r.Info.EpsilonMs)
}

// unlisted: a run whose newest attempt ended with its write accepted well
// before the end must be listed by status, where status covers its slot
// (slots after the oldest listed one; status lists newest slots first).
func (c *checker) unlisted() {
	oldest := int64(open)
	for _, s := range c.r.Status {
		oldest = min(oldest, s.SlotMs)
	}
	for _, k := range c.keys {
		if k.slot <= oldest || len(c.status[k]) > 0 {
			continue
		}
		if _, known := c.jobs[k.job]; !known {
			continue
		}
		d := c.runs[k]
		var last *attempt
		for _, a := range d.attempts {
			if last == nil || a.num > last.num {
				last = a
			}
		}
		e := last.end()
		if e == nil || e.Fence != "ok" {
			continue
		}
		j := c.job(k.job)
		if e.EndMs >= c.tl.end-(j.LeaseMs+j.HeartbeatMs+ResultSlackMs) {
			continue
		}
		if why := c.deadRunner(last); why != "" {
			c.excuse(KindResult, k, "not in status although attempt "+strconv.Itoa(last.num)+" ended: "+why)
			continue
		}
		if why := c.tl.obstructedUntilDeath(last.inst, e.EndMs, recordWindowMs); why != "" && !c.r.Info.Lease {
			// A claim-only store may keep a run without a result only
			// for its window (the script strategy's stream).
			c.excuse(KindResult, k, fmt.Sprintf("not in status although attempt %d ended: its runner could not reach the store (%s) and died before recording, and the store keeps claims without results only for its window", last.num, why))
			continue
		}
		ev := []string{fmt.Sprintf("not in status.jsonl (which lists slots after %d) although attempt %d ended with its write accepted", oldest, last.num), e.Where()}
		c.violateAs(KindResult, c.unrecordedCause(last), k, append(ev, c.recordContext(last, e.EndMs)...)...)
	}
}
