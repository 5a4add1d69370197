package check

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The kinds of violation.
const (
	KindTwoWinners = "two-winners"         // two tokens for one (job, slot, attempt)
	KindConcurrent = "concurrent-attempts" // two attempts (or, overlap skip, two slots) running at once
	KindTakeover   = "takeover"            // a dead runner's run not taken over in time
	KindDuplicate  = "duplicate"           // a run executed twice
	KindMissed     = "missed"              // a due slot neither run nor explained
	KindResult     = "result"              // the store's status disagrees with the journals
	KindJournal    = "journal"             // an unreadable journal line
)

// Windows of the missed-slot check: slots in [StartMs + MissedWarmupMs,
// EndMs - MaxLateMs - MissedMarginMs] are checked. The warm-up lets the
// instances connect; the margin lets the last checked slot's claims land
// before the faults stop.
const (
	MissedWarmupMs = 5000
	MissedMarginMs = 2000
)

// KillGraceMs is the job guard's group-kill latency: after a daemon is
// SIGKILLed, its guard reads EOF and kills the jobs' process groups
// asynchronously, so a job may outlive its daemon by up to
// about 200 ms, and may even write its start record a few ms after the
// kill. A job with no end record whose runner was killed is taken to have
// run until the kill plus this grace; a job that ended within it after the
// kill did so as an orphan.
const KillGraceMs = 250

// ResultSlackMs is added to lease+heartbeat before a missing result is
// held against the store: a result recorded at the very end may be late.
const ResultSlackMs = 2000

// Violation is one broken guarantee with its evidence.
type Violation struct {
	Kind   string `json:"kind"`
	Job    string `json:"job,omitempty"`
	SlotMs int64  `json:"slot_ms,omitempty"`
	// Evidence is plain text: the records involved with file:line.
	Evidence string `json:"evidence"`
}

// String is the violation on one or more lines.
func (v Violation) String() string {
	if v.Job == "" {
		return fmt.Sprintf("[%s] %s", v.Kind, v.Evidence)
	}
	return fmt.Sprintf("[%s] job %s slot %s: %s", v.Kind, v.Job, slotText(v.SlotMs), v.Evidence)
}

// Excuse is a case a check let pass, with the reason, for an auditor.
type Excuse struct {
	Check  string `json:"check"`
	Job    string `json:"job"`
	SlotMs int64  `json:"slot_ms"`
	Reason string `json:"reason"`
}

// String is the excuse on one line.
func (e Excuse) String() string {
	return fmt.Sprintf("[%s] job %s slot %s: %s", e.Check, e.Job, slotText(e.SlotMs), e.Reason)
}

// runKey names a run.
type runKey struct {
	job  string
	slot int64
}

// attempt is what the journals hold of one attempt (job, slot, num, token).
type attempt struct {
	key    runKey
	num    int
	token  string
	inst   int
	starts []Entry
	ends   []Entry
}

// startMs is the job's start, from its start record or its end record.
func (a *attempt) startMs() int64 {
	if len(a.starts) > 0 {
		return a.starts[0].StartMs
	}
	return a.ends[0].StartMs
}

// end is the attempt's first end record, or nil.
func (a *attempt) end() *Entry {
	if len(a.ends) == 0 {
		return nil
	}
	return &a.ends[0]
}

// lines is every record of the attempt, for evidence.
func (a *attempt) lines() []string {
	var out []string
	for _, e := range a.starts {
		out = append(out, e.Where())
	}
	for _, e := range a.ends {
		out = append(out, e.Where())
	}
	return out
}

// runData is what the journals hold of one run: its attempts by start.
type runData struct {
	key      runKey
	attempts []*attempt
}

// newest is the highest attempt number in the journals.
func (d *runData) newest() int {
	n := 0
	for _, a := range d.attempts {
		n = max(n, a.num)
	}
	return n
}

// starts counts the run's start records.
func (d *runData) starts() int {
	n := 0
	for _, a := range d.attempts {
		n += len(a.starts)
	}
	return n
}

// checker holds a run and what the checks found.
type checker struct {
	r         *Run
	tl        *timeline
	jobs      map[string]JobInfo
	runs      map[runKey]*runData
	keys      []runKey // sorted
	status    map[runKey][]StatusRow
	byRun     map[runKey][]Event // events with a job and slot
	missedEvs map[string][]Event // "missed:" events by job
	claims    []int              // claim lines per instance

	rep       Report
	latencies []int64
	causes    map[string]int // kind + cause -> index in rep.Violations
}

// Check runs every check over r and returns the report.
func Check(r *Run) Report {
	c := newChecker(r)
	c.rep.Violations = append(c.rep.Violations, r.Problems...)
	c.rep.Notes = append(c.rep.Notes, r.Notes...)
	c.twoWinners()
	c.duplicates()
	if r.Info.Lease {
		c.concurrent()
		c.concurrentSlots()
		c.takeovers()
		c.leaseStarts()
	}
	c.missed()
	c.results()
	c.finish()
	return c.rep
}

func newChecker(r *Run) *checker {
	c := &checker{
		r: r, tl: buildTimeline(r),
		jobs: map[string]JobInfo{}, runs: map[runKey]*runData{},
		status: map[runKey][]StatusRow{}, byRun: map[runKey][]Event{},
		missedEvs: map[string][]Event{}, claims: make([]int, r.Info.Instances),
		causes: map[string]int{},
	}
	c.rep.Backend, c.rep.Lease = r.Info.Backend, r.Info.Lease
	c.rep.Summary.MissedByReason = map[string]int{}
	for _, j := range r.Info.Jobs {
		c.jobs[j.Name] = j
	}
	c.groupEntries()
	for _, s := range r.Status {
		k := runKey{s.Job, s.SlotMs}
		c.status[k] = append(c.status[k], s)
	}
	for _, e := range r.Events {
		if e.Msg == msgClaim && e.Inst >= 0 && e.Inst < len(c.claims) {
			c.claims[e.Inst]++
		}
		switch {
		case strings.HasPrefix(e.Msg, msgMissedPrefix):
			c.missedEvs[e.Job] = append(c.missedEvs[e.Job], e)
		case strings.HasPrefix(e.Msg, msgGivenUpPrefix):
			// The start's slots within maxLate, by its clock: counted
			// store_unreachable once the store answers, which may be
			// after the run's end.
			e.FirstMs = e.LastMs - c.job(e.Job).MaxLateMs
			c.missedEvs[e.Job] = append(c.missedEvs[e.Job], e)
		case e.Job != "" && e.HasSlot:
			k := runKey{e.Job, e.SlotMs}
			c.byRun[k] = append(c.byRun[k], e)
		}
	}
	for i, n := range c.claims {
		if n == 0 && r.Info.Lease {
			c.rep.Notes = append(c.rep.Notes, fmt.Sprintf(
				"daemon-%d.log has no claim lines (log.level must be info): %s is assumed a possible backup of every run", i, instName(i)))
		}
	}
	return c
}

// groupEntries sorts the journal records into runs and attempts.
func (c *checker) groupEntries() {
	type attemptKey struct {
		run   runKey
		num   int
		token string
	}
	byKey := map[attemptKey]*attempt{}
	for _, e := range c.r.Entries {
		k := runKey{e.Job, e.SlotMs}
		ak := attemptKey{k, e.Attempt, e.Token}
		a := byKey[ak]
		if a == nil {
			a = &attempt{key: k, num: e.Attempt, token: e.Token, inst: e.Inst}
			byKey[ak] = a
			d := c.runs[k]
			if d == nil {
				d = &runData{key: k}
				c.runs[k] = d
				c.keys = append(c.keys, k)
			}
			d.attempts = append(d.attempts, a)
		}
		if e.IsStart() {
			a.starts = append(a.starts, e)
		} else {
			a.ends = append(a.ends, e)
		}
	}
	slices.SortFunc(c.keys, func(a, b runKey) int { return cmp.Or(cmp.Compare(a.slot, b.slot), cmp.Compare(a.job, b.job)) })
	for _, d := range c.runs {
		slices.SortFunc(d.attempts, func(a, b *attempt) int {
			return cmp.Or(cmp.Compare(a.startMs(), b.startMs()), cmp.Compare(a.num, b.num))
		})
	}
}

// job returns the job's settings; an unknown job gets zero settings.
func (c *checker) job(name string) JobInfo { return c.jobs[name] }

func (c *checker) violate(kind string, k runKey, evidence ...string) {
	c.violateAs(kind, "", k, evidence...)
}

// violateAs reports a violation caused by the underlying event cause (""
// for none known): a second violation of the same kind and cause is folded
// into the first as one line, its run, its first line of evidence and the
// file:line of the rest.
func (c *checker) violateAs(kind, cause string, k runKey, evidence ...string) {
	if cause != "" {
		id := kind + "\x00" + cause
		if n, ok := c.causes[id]; ok {
			v := &c.rep.Violations[n]
			line := fmt.Sprintf("the same %s also concerns job %s slot %s", causeText(cause), k.job, slotText(k.slot))
			var cites []string
			for n, e := range evidence {
				if n == 0 {
					line += ": " + e
				} else if cite, ok := citation(e); ok && !strings.Contains(v.Evidence, e) {
					cites = append(cites, cite)
				}
			}
			if len(cites) > 0 {
				line += " [" + strings.Join(cites, ", ") + "]"
			}
			v.Evidence += "\n    " + line
			return
		}
		c.causes[id] = len(c.rep.Violations)
	}
	c.rep.Violations = append(c.rep.Violations, Violation{Kind: kind, Job: k.job, SlotMs: k.slot,
		Evidence: strings.Join(evidence, "\n    ")})
}

// citation returns the file:line an evidence line starts with.
func citation(e string) (string, bool) {
	file, rest, ok := strings.Cut(e, ":")
	if !ok || strings.ContainsAny(file, " \t") {
		return "", false
	}
	num, _, _ := strings.Cut(rest, ":")
	if _, err := strconv.Atoi(num); err != nil {
		return "", false
	}
	return file + ":" + num, true
}

// causeText is the part of a cause key before its first "|", for people.
func causeText(cause string) string {
	what, _, _ := strings.Cut(cause, "|")
	return what
}

func (c *checker) excuse(check string, k runKey, reason string) {
	c.rep.Excused = append(c.rep.Excused, Excuse{Check: check, Job: k.job, SlotMs: k.slot, Reason: reason})
}

func (c *checker) note(format string, args ...any) {
	c.rep.Notes = append(c.rep.Notes, fmt.Sprintf(format, args...))
}

// twoWinners: one token per (job, slot, attempt) in the journals (lease
// backends; on claim-only backends two start records of a run are the
// "duplicate" check's, which names their tokens). The status side is
// checked with the results.
func (c *checker) twoWinners() {
	if !c.r.Info.Lease {
		return
	}
	for _, k := range c.keys {
		byNum := map[int][]*attempt{}
		for _, a := range c.runs[k].attempts {
			byNum[a.num] = append(byNum[a.num], a)
		}
		for _, num := range sortedKeys(byNum) {
			as := byNum[num]
			if len(as) < 2 {
				continue
			}
			ev := []string{fmt.Sprintf("attempt %d has %d tokens in the journals:", num, len(as))}
			for _, a := range as {
				ev = append(ev, a.lines()...)
			}
			c.violate(KindTwoWinners, k, ev...)
		}
	}
}

// duplicates: claim-only backends run a slot at most once; lease backends
// never have two attempts of a run both accepted by the fenced write, nor
// one attempt started twice.
func (c *checker) duplicates() {
	for _, k := range c.keys {
		d := c.runs[k]
		if !c.r.Info.Lease {
			if d.starts() > 1 {
				ev := []string{fmt.Sprintf("%d start records (claim-only: at most one)%s:", d.starts(), tokensNote(d))}
				for _, a := range d.attempts {
					ev = append(ev, a.lines()...)
				}
				c.violate(KindDuplicate, k, ev...)
			}
			continue
		}
		for _, a := range d.attempts {
			if len(a.starts) > 1 {
				c.violate(KindDuplicate, k, append([]string{fmt.Sprintf(
					"attempt %d token %s started %d times:", a.num, a.token, len(a.starts))}, a.lines()...)...)
			}
		}
		c.doubleOK(d)
	}
}

// tokensNote says when a run's start records carry different tokens.
func tokensNote(d *runData) string {
	if len(d.attempts) > 1 {
		return ", with different tokens: the claim had two winners"
	}
	return ""
}

// doubleOK reports two attempts of d whose fenced writes were both
// accepted, except where the older attempt's write was accepted before the
// newer attempt started and either its job ended as an orphan within
// KillGraceMs of its runner's SIGKILL, or its daemon was cut off from the
// store, paused or killed after its job ended and before the newer attempt
// started: then the result could not be recorded and the re-run is the
// lease's at-least-once (excused, listed).
func (c *checker) doubleOK(d *runData) {
	var oks []*attempt
	for _, a := range d.attempts {
		if e := a.end(); e != nil && e.Fence == "ok" {
			oks = append(oks, a)
		}
	}
	for i := 1; i < len(oks); i++ {
		old, nw := oks[i-1], oks[i]
		oe := old.end()
		if oe.EndMs <= nw.startMs() {
			if f, ok := c.orphanEnd(old); ok {
				c.excuse(KindDuplicate, d.key, fmt.Sprintf(
					"attempts %d and %d both accepted by the fenced write; attempt %d's job ended at %s, %d ms after its runner's %s (kill grace %d ms), and attempt %d started at %s: wrote within the kill grace, before the backup started",
					old.num, nw.num, old.num, msText(oe.EndMs), oe.EndMs-f.AtMs, faultText(f), KillGraceMs, nw.num, msText(nw.startMs())))
				continue
			}
			why := c.tl.disturbedIn(old.inst, oe.EndMs, nw.startMs())
			if why == "" {
				why = c.leaseTrouble(old)
			}
			if why != "" {
				c.excuse(KindDuplicate, d.key, fmt.Sprintf(
					"attempts %d and %d both accepted by the fenced write; attempt %d ended before attempt %d started and its runner could not record the result: %s",
					old.num, nw.num, old.num, nw.num, why))
				continue
			}
		}
		ev := []string{fmt.Sprintf("attempts %d and %d were both accepted by the fenced write (a double side effect):", old.num, nw.num)}
		if oe.EndMs > nw.startMs() {
			ev[0] = fmt.Sprintf("attempts %d and %d were both accepted by the fenced write (a double side effect); attempt %d's write at %s came after attempt %d started at %s:",
				old.num, nw.num, old.num, msText(oe.EndMs), nw.num, msText(nw.startMs()))
		}
		ev = append(ev, old.lines()...)
		ev = append(ev, nw.lines()...)
		c.violateAs(KindDuplicate, "run|"+runID(d.key), d.key, ev...)
	}
}

// leaseTrouble returns the runner's own word that a's lease was in danger:
// a renewal went unanswered (a slow or lossy link: latency, load), or the
// runner fenced itself; "" when its log says neither.
func (c *checker) leaseTrouble(a *attempt) string {
	for _, ev := range c.byRun[a.key] {
		if ev.Inst != a.inst || !sameToken(ev.Token, a.token) {
			continue
		}
		if strings.HasPrefix(ev.Msg, msgRenewFailedPfx) {
			return "its renewals went unanswered (" + ev.Where() + ")"
		}
		if strings.HasPrefix(ev.Msg, msgSelfFencedPfx) {
			return "no renewal got through and the runner fenced itself (" + ev.Where() + ")"
		}
	}
	return ""
}

// orphanEnd returns the SIGKILL of a's runner that a's job outlived: its
// end record is at most KillGraceMs after the kill.
func (c *checker) orphanEnd(a *attempt) (FaultLine, bool) {
	e := a.end()
	if e == nil {
		return FaultLine{}, false
	}
	f, ok := c.tl.runnerKill(a.inst, a.startMs())
	if !ok || f.AtMs > e.EndMs || e.EndMs-f.AtMs > KillGraceMs {
		return FaultLine{}, false
	}
	return f, true
}

// runID names a run in cause keys.
func runID(k runKey) string { return fmt.Sprintf("%s@%d", k.job, k.slot) }

// attemptID names an attempt in cause keys.
func attemptID(a *attempt) string { return fmt.Sprintf("%s#%d/%s", runID(a.key), a.num, a.token) }

// exitEvidence returns the earliest daemon-log line of a's instance saying
// that a's job process has exited (the runner logs these after the
// process is gone), or false.
func (c *checker) exitEvidence(a *attempt) (Event, bool) {
	for _, e := range c.byRun[a.key] {
		if e.Inst != a.inst || !sameToken(e.Token, a.token) || (e.Attempt != 0 && e.Attempt != a.num) {
			continue
		}
		if strings.HasPrefix(e.Msg, msgStoppedPrefix) || strings.HasPrefix(e.Msg, msgReleasedPrefix) ||
			strings.HasPrefix(e.Msg, msgNotReleasedPfx) || e.Msg == msgFinished {
			return e, true
		}
	}
	return Event{}, false
}

// endOf is the instant a's job had certainly ended, with how it is known:
// its end record, the runner's log line after the process exited, the
// SIGKILL of its runner plus KillGraceMs (see runnerKill), the
// stop-instance of its instance, or the end of the run.
func (c *checker) endOf(a *attempt) (int64, string) {
	if e := a.end(); e != nil {
		return e.EndMs, "end record"
	}
	at, why := c.tl.end, "no end record: until the end of the run"
	if f, ok := c.tl.runnerKill(a.inst, a.startMs()); ok && max(f.AtMs+KillGraceMs, a.startMs()) < at {
		at = max(f.AtMs+KillGraceMs, a.startMs())
		why = fmt.Sprintf("no end record: until %s + the kill grace %d ms", faultText(f), KillGraceMs)
	}
	if f, ok := c.tl.deathIn(a.inst, a.startMs(), c.tl.end); ok && f.Kind != FaultKill && f.AtMs < at {
		at, why = f.AtMs, "no end record: until "+faultText(f)
	}
	if e, ok := c.exitEvidence(a); ok && e.TsMs < at && e.TsMs >= a.startMs() {
		at, why = e.TsMs, "no end record: until "+e.Where()
	}
	return at, why
}

// sameToken matches a logged token prefix against a full token; an empty
// prefix matches any token.
func sameToken(prefix, token string) bool { return prefix == "" || strings.HasPrefix(token, prefix) }

// concurrent: two attempts of one run overlap only when the older one's
// instance lost the store for longer than the lease around the newer one's
// start, and the older one's fenced write was not accepted after the newer
// one started.
func (c *checker) concurrent() {
	for _, k := range c.keys {
		as := c.runs[k].attempts
		for i, old := range as {
			oldEnd, how := c.endOf(old)
			for _, nw := range as[i+1:] {
				if nw.startMs() >= oldEnd || nw.token == old.token {
					continue
				}
				c.overlap(k, old, nw, oldEnd, how, true)
			}
		}
	}
}

// concurrentSlots: under overlap skip, two slots of one job never run at
// once, with the same exception for a lost store. The fenced write is kept
// per (job, slot), so its half of the exception cannot apply here.
func (c *checker) concurrentSlots() {
	byJob := map[string][]*attempt{}
	for _, k := range c.keys {
		if c.job(k.job).Overlap == "skip" {
			byJob[k.job] = append(byJob[k.job], c.runs[k].attempts...)
		}
	}
	for _, job := range sortedKeys(byJob) {
		as := byJob[job]
		slices.SortFunc(as, func(a, b *attempt) int { return cmp.Compare(a.startMs(), b.startMs()) })
		for i, old := range as {
			oldEnd, how := c.endOf(old)
			for _, nw := range as[i+1:] {
				if nw.startMs() >= oldEnd {
					break
				}
				if nw.key != old.key {
					c.overlap(nw.key, old, nw, oldEnd, how, false)
				}
			}
		}
	}
}

// overlap judges the older attempt old running until oldEnd beside nw.
func (c *checker) overlap(k runKey, old, nw *attempt, oldEnd int64, how string, fenced bool) {
	j := c.job(k.job)
	// The lease runs from the last renewal's send, up to a heartbeat before
	// a fault begins: a pause or a cut longer than the lease less a
	// heartbeat can outlast it (a runner stopped by SIGSTOP cannot stop its
	// job at the lease's end either; the job is in its own process group).
	lost := c.tl.lostContact(old.inst, nw.startMs(), j.LeaseMs-j.HeartbeatMs, j.HeartbeatMs+c.r.Info.EpsilonMs)
	oe := old.end()
	acceptedLate := fenced && oe != nil && oe.Fence == "ok" && oe.EndMs > nw.startMs()
	what := fmt.Sprintf("attempt %d (slot %d, %s) ran %s..%s (%s) while attempt %d (slot %d, %s) started at %s",
		old.num, old.key.slot, instName(old.inst), msText(old.startMs()), msText(oldEnd), how,
		nw.num, nw.key.slot, instName(nw.inst), msText(nw.startMs()))
	if lost != "" && !acceptedLate {
		c.excuse(KindConcurrent, k, what+"; allowed: "+lost)
		return
	}
	ev := []string{what}
	if lost == "" {
		ev = append(ev, fmt.Sprintf("%s was neither paused nor cut off for longer than the lease less a heartbeat (%d ms) before the newer attempt started", instName(old.inst), j.LeaseMs-j.HeartbeatMs))
	} else {
		ev = append(ev, lost)
	}
	if acceptedLate {
		ev = append(ev, fmt.Sprintf("the older attempt's fenced write was accepted at %s, after the newer attempt started", msText(oe.EndMs)))
	}
	ev = append(ev, old.lines()...)
	ev = append(ev, nw.lines()...)
	c.violateAs(KindConcurrent, "older attempt|"+attemptID(old), k, ev...)
}

// sortedKeys returns m's keys in order.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// instOf reads the harness's instance name chaos-<i>.
func instOf(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "chaos-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil
}
