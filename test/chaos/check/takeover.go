package check

import (
	"fmt"
	"strings"
)

// deathSlack is how long before the job's start record, or before the
// slot, a kill may land and still be the winner's death: the claim's head
// start (the job's claimAheadMs) and 100 ms more. The claim was won, so
// the store holds the run either way.
func deathSlack(j JobInfo) int64 { return j.ClaimAheadMs + 100 }

// takeovers: on lease backends every run whose runner died while it was
// active (killed, or paused longer than the lease) starts again as
// attempt+1 within LeaseMs + HeartbeatMs + EpsilonMs of the fault, unless
// the store marked it interrupted or it had no attempts left. Cases where
// no instance could take over are excused and listed.
func (c *checker) takeovers() {
	for _, k := range c.keys {
		for _, a := range c.runs[k].attempts {
			if f, ok := c.runnerDeath(a); ok {
				c.takeover(a, f)
			}
		}
	}
}

// runnerDeath returns the first fault that killed a's runner while a was
// active: a kill (also one up to KillGraceMs before the job's start record,
// which a job may write just after its daemon died), or a stop lasting
// longer than the lease.
func (c *checker) runnerDeath(a *attempt) (FaultLine, bool) {
	j := c.job(a.key.job)
	var exited int64 = open
	if e := a.end(); e != nil {
		exited = e.EndMs
	}
	if e, ok := c.exitEvidence(a); ok {
		exited = min(exited, e.TsMs)
	}
	for _, f := range c.tl.faults {
		if f.Instance != a.inst || f.AtMs < a.startMs()-max(deathSlack(j), KillGraceMs) {
			continue
		}
		if f.AtMs < a.startMs() {
			if f.Kind == FaultKill && c.tl.startedIn(a.inst, f.AtMs, a.startMs()) {
				continue // an earlier process's death
			}
			if f.Kind != FaultKill && f.AtMs < a.startMs()-deathSlack(j) {
				continue
			}
		}
		if f.AtMs >= exited {
			return FaultLine{}, false
		}
		switch f.Kind {
		case FaultKill:
			return f, true
		case FaultStop:
			if _, ok := c.tl.longPause(a.inst, f.AtMs, j.LeaseMs); ok {
				return f, true
			}
		}
	}
	return FaultLine{}, false
}

// takeover judges the run of a after its runner died by f.
func (c *checker) takeover(a *attempt, f FaultLine) {
	j := c.job(a.key.job)
	d := c.runs[a.key]
	for _, b := range d.attempts {
		if b.num > a.num && b.startMs() < f.AtMs {
			return // taken over before the fault: the pause or cut that caused it is judged elsewhere
		}
	}
	bound := j.LeaseMs + j.HeartbeatMs + c.r.Info.EpsilonMs
	deadline := f.AtMs + bound
	at, how, ok := c.nextAttempt(a)
	if ok && at <= deadline {
		c.latencies = append(c.latencies, max(at-f.AtMs, 0))
		return
	}
	if why := c.resumedAndRecorded(a, f, deadline); why != "" {
		c.excuse(KindTakeover, a.key, fmt.Sprintf("attempt %d's runner stopped (%s); %s", a.num, faultText(f), why))
		return
	}
	if extra, why := c.slowedBackups(a, f.AtMs, deadline); ok && extra > 0 && at <= deadline+extra {
		c.excuse(KindTakeover, a.key, fmt.Sprintf("attempt %d's runner died (%s); attempt %d started at %s (%s), %d ms after the fault, %d ms past the bound: %s",
			a.num, faultText(f), a.num+1, msText(at), how, at-f.AtMs, at-deadline, why))
		return
	}
	if a.num >= j.MaxAttempts && j.MaxAttempts > 0 {
		c.excuse(KindTakeover, a.key, fmt.Sprintf("attempt %d's runner died (%s); no attempts left (max_attempts %d): the store marks the run interrupted",
			a.num, faultText(f), j.MaxAttempts))
		return
	}
	if s, found := c.statusOf(a.key); found && s.Status == "interrupted" {
		c.excuse(KindTakeover, a.key, fmt.Sprintf("attempt %d's runner died (%s); the store marked the run interrupted: %s", a.num, faultText(f), s.Where()))
		return
	}
	if why := c.unloggedTakeover(a, f, deadline); why != "" {
		c.excuse(KindTakeover, a.key, fmt.Sprintf("attempt %d's runner died (%s); %s", a.num, faultText(f), why))
		return
	}
	if why := c.lostAttempt(a, f, deadline); why != "" {
		c.excuse(KindTakeover, a.key, fmt.Sprintf("attempt %d's runner died (%s); %s", a.num, faultText(f), why))
		return
	}
	if why := c.noTakeoverExcuse(a, f, deadline); why != "" {
		c.excuse(KindTakeover, a.key, fmt.Sprintf("attempt %d's runner died (%s); %s", a.num, faultText(f), why))
		return
	}
	next := "no attempt " + fmt.Sprint(a.num+1) + " started"
	if ok {
		next = fmt.Sprintf("attempt %d started at %s (%s), %d ms after the fault", a.num+1, msText(at), how, at-f.AtMs)
	}
	ev := []string{
		fmt.Sprintf("attempt %d's runner died: %s; the bound is lease %d + heartbeat %d + epsilon %d = %d ms (until %s); %s",
			a.num, faultText(f), j.LeaseMs, j.HeartbeatMs, c.r.Info.EpsilonMs, bound, msText(deadline), next),
		"instances that could take over: " + c.capableBackups(a, f.AtMs, deadline),
	}
	ev = append(ev, a.lines()...)
	if s, found := c.statusOf(a.key); found {
		ev = append(ev, s.Where())
	}
	c.violateAs(KindTakeover, fmt.Sprintf("fault|faults.jsonl:%d", f.Line), a.key, ev...)
}

// nextAttempt returns when attempt a.num+1 of a's run started: its start
// record, or else a daemon's "claim" line that won it.
func (c *checker) nextAttempt(a *attempt) (int64, string, bool) {
	var best int64 = open
	how := ""
	for _, b := range c.runs[a.key].attempts {
		if b.num == a.num+1 && b.startMs() < best {
			best, how = b.startMs(), "journal"
		}
	}
	if how != "" {
		return best, how, true
	}
	for _, e := range c.byRun[a.key] {
		if e.Msg == msgClaim && e.Outcome == "won" && e.Attempt == a.num+1 && e.TsMs < best {
			best, how = e.TsMs, e.Where()
		}
	}
	return best, how, how != ""
}

// statusOf returns the store's row of a run.
func (c *checker) statusOf(k runKey) (StatusRow, bool) {
	rows := c.status[k]
	if len(rows) == 0 {
		return StatusRow{}, false
	}
	return rows[0], true
}

// noTakeoverExcuse returns why nobody could take a's run over within
// [f.AtMs, deadline], or "".
func (c *checker) noTakeoverExcuse(a *attempt, f FaultLine, deadline int64) string {
	if deadline > c.tl.end {
		return fmt.Sprintf("the bound %s ends after the last instant the run's files speak of (%s)", msText(deadline), msText(c.tl.end))
	}
	if why := c.tl.storeDownIn(f.AtMs, deadline); why != "" {
		return "the store was down in the takeover window: " + why
	}
	var reasons []string
	for i := range c.r.Info.Instances {
		if i == a.inst {
			continue
		}
		why := c.backupBlocked(i, a.key, f.AtMs, deadline)
		if why == "" {
			reasons = nil
			break
		}
		reasons = append(reasons, why)
	}
	if c.r.Info.Instances == 1 {
		return "no other instance"
	}
	if reasons != nil {
		return "no other instance could take over: " + strings.Join(reasons, "; ")
	}
	if c.job(a.key.job).Overlap == "skip" && len(c.status[a.key]) == 0 {
		if b := c.liveSlot(a, f.AtMs, deadline); b != nil {
			return fmt.Sprintf("overlap skip: slot %d of the job ran (%s from %s) in the window, so a backup marks this run interrupted (docs/spec.md#s3-1); status has no row to confirm it",
				b.key.slot, instName(b.inst), msText(b.startMs()))
		}
	}
	return ""
}

// backupBlocked returns why instance i could not take the run k over in
// [from, to], or "" when it could: it was killed, stopped or cut off in
// the window, or it was not watching the run (its last claim of the run
// before the deadline was answered neither "running" nor "overlap", or it
// has been killed since). An instance whose log has no claim lines at all
// is assumed to be watching. One that answered "overlap" is held to be a
// backup: the run was won later, and nobody taking it over when its winner
// dies is the daemon's fault, not an excuse.
func (c *checker) backupBlocked(i int, k runKey, from, to int64) string {
	if why := c.tl.disturbedIn(i, from, to); why != "" {
		return why
	}
	if c.claims[i] == 0 {
		return ""
	}
	var last *Event
	for _, e := range c.byRun[k] {
		if e.Inst == i && e.Msg == msgClaim && e.TsMs <= to && (last == nil || e.TsMs >= last.TsMs) {
			last = &e
		}
	}
	switch {
	case last == nil:
		return fmt.Sprintf("%s never claimed the run (not a backup)", instName(i))
	case last.Outcome != "running" && last.Outcome != ReasonOverlap:
		return fmt.Sprintf("%s is not a backup: its last claim of the run was answered %q (%s)", instName(i), last.Outcome, last.Where())
	}
	if d, ok := c.tl.deathIn(i, last.TsMs, to); ok {
		return fmt.Sprintf("%s stopped watching the run: %s", instName(i), faultText(d))
	}
	return ""
}

// resumedAndRecorded returns why no takeover was due when a's runner was
// paused longer than the lease but resumed within the bound, and the
// store holds a's own result: no backup took the run over meanwhile, and
// the run finished under its runner once. "" otherwise.
func (c *checker) resumedAndRecorded(a *attempt, f FaultLine, deadline int64) string {
	if f.Kind != FaultStop {
		return ""
	}
	p, ok := c.tl.longPause(a.inst, f.AtMs, c.job(a.key.job).LeaseMs)
	if !ok || p.To > deadline {
		return ""
	}
	s, found := c.statusOf(a.key)
	if !found || s.Attempt != a.num || s.Token != a.token || (s.Status != "succeeded" && s.Status != "failed") {
		return ""
	}
	return fmt.Sprintf("it resumed at %s, within the bound (%s), before any backup took the run over, and the store holds this attempt's own result: %s",
		msText(p.To), msText(deadline), s.Where())
}

// slowRoundTrips is how many store round trips a takeover's delay under an
// injected latency is allowed: the backup's read that finds the lease
// ended and its claim, and one more for a message the proxy forwards in
// two chunks (it delays chunks one after the other).
const slowRoundTrips = 3

// slowedBackups returns how much later than the bound a takeover may start
// because every instance that could take the run over in [from, to] had
// its store traffic delayed by the proxy (latency L: each round trip 2L
// later, slowRoundTrips of them), and why; 0 when one of them was not
// delayed, or none could take over (noTakeoverExcuse judges that).
func (c *checker) slowedBackups(a *attempt, from, to int64) (int64, string) {
	var extra int64 = -1
	var whys []string
	for i := range c.r.Info.Instances {
		if i == a.inst || c.backupBlocked(i, a.key, from, to) != "" {
			continue
		}
		lat, s := c.tl.slowIn(i, from, to)
		if lat == 0 {
			return 0, ""
		}
		allow := slowRoundTrips * 2 * lat
		if extra < 0 || allow < extra {
			extra = allow
		}
		whys = append(whys, fmt.Sprintf("%s's store traffic was delayed by %d ms each way %s",
			instName(i), lat, c.tl.spanText(s.span)))
	}
	if extra <= 0 {
		return 0, ""
	}
	return extra, fmt.Sprintf("every instance that could take over was slowed: %s; %d round trips of it allowed (%d ms)",
		strings.Join(whys, "; "), slowRoundTrips, extra)
}

// capableBackups lists the instances that could have taken a's run over.
func (c *checker) capableBackups(a *attempt, from, to int64) string {
	var out []string
	for i := range c.r.Info.Instances {
		if i != a.inst && c.backupBlocked(i, a.key, from, to) == "" {
			out = append(out, instName(i))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// liveSlot returns an attempt of another slot of a's job that ran at some
// instant of [from, to].
func (c *checker) liveSlot(a *attempt, from, to int64) *attempt {
	for _, k := range c.keys {
		if k.job != a.key.job || k.slot == a.key.slot {
			continue
		}
		for _, b := range c.runs[k].attempts {
			end, _ := c.endOf(b)
			if b.startMs() <= to && end >= from {
				return b
			}
		}
	}
	return nil
}

// unloggedTakeover returns, when the store holds a later attempt of a's run
// that no journal or claim line shows, why that is no violation: its
// winner was killed within the bound, after its claim was won and before
// it logged the claim or started the job. The kill bounds the claim: it was
// won in time. "" otherwise.
func (c *checker) unloggedTakeover(a *attempt, f FaultLine, deadline int64) string {
	s, found := c.statusOf(a.key)
	if !found || s.Attempt <= a.num {
		return ""
	}
	i, ok := instOf(s.Instance)
	if !ok {
		return ""
	}
	d, died := c.tl.deathIn(i, f.AtMs, deadline+KillGraceMs)
	if !died {
		return ""
	}
	return fmt.Sprintf("the store holds attempt %d won by %s (%s), which was killed (%s) before it logged the claim or started the job: taken over within the bound",
		s.Attempt, s.Instance, s.Where(), faultText(d))
}

// lostAttempt returns why attempt a.num+1 left no trace although the store
// holds a later one: an instance won it and, in the takeover window, was
// killed, paused or cut off from the store before it logged the claim or
// started the job (the answer of a claim the store committed is lost with
// the connection), and the next attempt that left a trace started within
// the bound of that fault (the lost attempt's lease had to run out
// first). The winner may be the dead runner's own instance, restarted.
// "" otherwise.
func (c *checker) lostAttempt(a *attempt, f FaultLine, deadline int64) string {
	s, found := c.statusOf(a.key)
	if !found || s.Attempt <= a.num+1 {
		return ""
	}
	if _, _, traced := c.nextAttempt(a); traced {
		return ""
	}
	var next *attempt
	for _, b := range c.runs[a.key].attempts {
		if b.num > a.num+1 && (next == nil || b.startMs() < next.startMs()) {
			next = b
		}
	}
	if next == nil {
		return ""
	}
	j := c.job(a.key.job)
	bound := j.LeaseMs + j.HeartbeatMs + c.r.Info.EpsilonMs
	var who []string
	for i := range c.r.Info.Instances {
		from := f.AtMs
		if i == a.inst { // its new process, if it was restarted in the window
			r, ok := c.tl.restartIn(i, f.AtMs, deadline)
			if !ok {
				continue
			}
			from = r
		}
		if i == next.inst {
			continue
		}
		if h, why, hit := c.tl.hindranceIn(i, from, deadline); hit && next.startMs() <= h+bound {
			who = append(who, fmt.Sprintf("%s (%s)", instName(i), why))
		}
	}
	if who == nil {
		return ""
	}
	return fmt.Sprintf("attempt %d left no trace, but the store holds attempt %d (%s): it was won and lost before its winner logged the claim by one of %s; attempt %d started at %s, within the bound (%d ms) of that",
		a.num+1, s.Attempt, s.Where(), strings.Join(who, ", "), next.num, msText(next.startMs()), bound)
}
