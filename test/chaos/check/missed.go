package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/anarchon/anarchon/internal/schedule"
)

// Reasons a due slot was not run, as counted in Summary.MissedByReason.
const (
	ReasonLate        = "late"        // a claim answered late
	ReasonOverlap     = "overlap"     // a claim answered overlap
	ReasonUnknown     = "unknown"     // a claim-only claim answered unknown (RabbitMQ)
	ReasonMissed      = "missed"      // a "missed:" line covers the slot
	ReasonAbandoned   = "abandoned"   // "claim abandoned"
	ReasonInterrupted = "interrupted" // the store marked the run interrupted
	ReasonNotStarted  = "not-started" // the runner logged that it did not start the job
	ReasonWinnerDied  = "winner-died" // the winner was killed, paused or cut off as it won
	ReasonSkew        = "skew"        // every healthy instance's clock jumped around the slot (excused)
	ReasonNoHealthy   = "no-healthy-instance"
	ReasonStoreDown   = "store-down"
)

// winnerDiedMs bounds how long after its winning claim a winner must be
// killed, paused or cut off (or the store go out) for that to explain a run
// that never started.
const winnerDiedMs = 2000

// maxEvidence bounds the daemon lines quoted for one missed slot.
const maxEvidence = 6

// missed: every slot due in the checked window of a job without drift,
// while the store was up and some instance ran healthy throughout [slot,
// slot+maxLate], has a start record or a reason in a daemon log.
func (c *checker) missed() {
	from := c.r.Info.StartMs + MissedWarmupMs
	for _, j := range c.r.Info.Jobs {
		if j.Drift != "" {
			c.note("job %s drifts on %s: its slots are not checked for misses", j.Name, instName(j.DriftInstance))
			continue
		}
		slots, err := slotsOf(j, from, c.r.Info.EndMs-j.MaxLateMs-MissedMarginMs)
		if err != nil {
			c.note("job %s: %v: its slots are not checked for misses", j.Name, err)
			continue
		}
		for _, s := range slots {
			c.missedSlot(j, s)
		}
	}
}

// slotsOf returns the job's slots in [from, to], unix ms.
func slotsOf(j JobInfo, from, to int64) ([]int64, error) {
	if to < from {
		return nil, nil
	}
	tz := j.Timezone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", tz, err)
	}
	sched, err := schedule.Parse(j.Schedule, loc)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, t := range schedule.Between(sched, time.UnixMilli(from-1), time.UnixMilli(to), 0) {
		out = append(out, t.UnixMilli())
	}
	return out, nil
}

// missedSlot judges one due slot.
func (c *checker) missedSlot(j JobInfo, slot int64) {
	k := runKey{j.Name, slot}
	c.rep.Summary.SlotsDue++
	if d := c.runs[k]; d != nil {
		c.rep.Summary.SlotsRun++
		return
	}
	if reason, where := c.slotReason(k); reason != "" {
		c.rep.Summary.MissedByReason[reason]++
		if reason == ReasonWinnerDied {
			c.excuse(KindMissed, k, "not run: "+reason+": "+where)
		}
		return
	}
	end := slot + j.MaxLateMs
	if why := c.tl.storeDownIn(slot, end); why != "" {
		c.rep.Summary.MissedByReason[ReasonStoreDown]++
		if c.tl.sharedFile {
			c.excuse(KindMissed, k, "not run: the store was out in its window: "+why)
		}
		return
	}
	var healthy []int
	var sick []string
	for i := range c.r.Info.Instances {
		if why := c.tl.unhealthy(i, slot, end); why != "" {
			sick = append(sick, why)
		} else {
			healthy = append(healthy, i)
		}
	}
	if len(healthy) == 0 {
		c.rep.Summary.MissedByReason[ReasonNoHealthy]++
		return
	}
	if why := c.skewedAll(healthy, slot, end); why != "" {
		c.rep.Summary.MissedByReason[ReasonSkew]++
		c.excuse(KindMissed, k, "not run; every healthy instance's clock jumped: "+why)
		return
	}
	names := make([]string, len(healthy))
	for n, i := range healthy {
		names[n] = instName(i)
	}
	ev := []string{fmt.Sprintf("no start record in any journal and no reason in any daemon log (claim late/overlap, missed:, claim abandoned); window %s; healthy throughout: %s; store up",
		rangeText(slot, end), strings.Join(names, ", "))}
	if len(sick) > 0 {
		ev = append(ev, "not healthy: "+strings.Join(sick, "; "))
	}
	if silent := c.silent(k, healthy); len(silent) > 0 {
		ev = append(ev, "no claim answer for the slot in the daemon log of: "+strings.Join(silent, ", "))
	}
	for n, e := range c.byRun[k] {
		if n == maxEvidence {
			ev = append(ev, fmt.Sprintf("... %d more daemon lines for the slot", len(c.byRun[k])-n))
			break
		}
		ev = append(ev, e.Where())
	}
	c.violateAs(KindMissed, fmt.Sprintf("slot|%d", slot), k, ev...)
}

// silent names the instances of insts that logged no claim answer for k.
func (c *checker) silent(k runKey, insts []int) []string {
	var out []string
	for _, i := range insts {
		if len(c.answers(k, i)) == 0 {
			out = append(out, instName(i))
		}
	}
	return out
}

// answers returns instance i's claim lines for run k.
func (c *checker) answers(k runKey, i int) []Event {
	var out []Event
	for _, e := range c.byRun[k] {
		if e.Inst == i && e.Msg == msgClaim {
			out = append(out, e)
		}
	}
	return out
}

// slotReason returns why run k has no start record, from the daemon logs
// and the store, or "".
func (c *checker) slotReason(k runKey) (string, string) {
	for _, e := range c.byRun[k] {
		switch {
		case e.Msg == msgClaim && (e.Outcome == ReasonLate || e.Outcome == ReasonOverlap):
			return e.Outcome, e.Where()
		case e.Msg == msgClaim && e.Outcome == ReasonUnknown && !c.r.Info.Lease:
			return ReasonUnknown, e.Where()
		case strings.HasPrefix(e.Msg, msgAbandonPrefix):
			return ReasonAbandoned, e.Where()
		}
	}
	for _, e := range c.missedEvs[k.job] {
		if e.FirstMs <= k.slot && k.slot <= e.LastMs {
			return ReasonMissed, e.Where()
		}
	}
	if s, ok := c.statusOf(k); ok && s.Status == "interrupted" {
		return ReasonInterrupted, s.Where()
	}
	for _, e := range c.byRun[k] {
		if strings.HasPrefix(e.Msg, msgNotStarted) || e.Msg == msgCouldNotStart {
			return ReasonNotStarted, e.Where()
		}
	}
	if why := c.winnerDied(k); why != "" {
		return ReasonWinnerDied, why
	}
	return "", ""
}

// winnerDied returns the evidence that some instance won run k and was
// killed, paused or cut off (or the store went out) within winnerDiedMs of
// winning, or "". On claim-only backends such a run is never run again, by
// design. The winner is known from its "claim ... won" line, from the
// store's row of the run (its instance and started_at), or, when every
// claim answer for the slot was "lost" (so some instance won), as the
// instances that were hindered without having answered, provided every
// other instance healthy in the slot's window did answer.
func (c *checker) winnerDied(k runKey) string {
	for _, e := range c.byRun[k] {
		if e.Msg != msgClaim || e.Outcome != "won" {
			continue
		}
		if why := c.tl.disturbedIn(e.Inst, e.TsMs-deathSlack(c.job(k.job)), e.TsMs+winnerDiedMs); why != "" {
			return e.Where() + "; " + why
		}
	}
	for _, s := range c.status[k] {
		i, ok := instOf(s.Instance)
		if !ok {
			continue
		}
		won := k.slot
		if s.StartedAt != nil {
			if t, err := time.Parse(time.RFC3339Nano, *s.StartedAt); err == nil {
				won = t.UnixMilli()
			}
		}
		if why := c.tl.disturbedIn(i, won-deathSlack(c.job(k.job)), won+winnerDiedMs); why != "" {
			return fmt.Sprintf("the store names %s the winner at %s (%s); %s", s.Instance, msText(won), s.Where(), why)
		}
	}
	return c.lostToTheDead(k)
}

// lostToTheDead infers a winner that died from claim answers that are all
// "lost" (see winnerDied), or "".
func (c *checker) lostToTheDead(k runKey) string {
	var first *Event
	for _, e := range c.byRun[k] {
		if e.Msg != msgClaim {
			continue
		}
		if e.Outcome != "lost" {
			return ""
		}
		if first == nil || e.TsMs < first.TsMs {
			first = &e
		}
	}
	if first == nil {
		return ""
	}
	end := k.slot + c.job(k.job).MaxLateMs
	var dead, answered []string
	for i := range c.r.Info.Instances {
		ans := c.answers(k, i)
		// An instance whose clock runs ahead claims before the slot by its
		// skew: look back by the largest skew it ever had.
		at, why, hindered := c.tl.hindranceIn(i, k.slot-deathSlack(c.job(k.job))-c.tl.maxSkew(i), first.TsMs+winnerDiedMs)
		if hindered {
			before := false // an answer before the hindrance: i lost
			for _, e := range ans {
				before = before || e.TsMs < at
			}
			if !before && (len(ans) == 0 || c.tl.deathAt(i, at)) {
				dead = append(dead, fmt.Sprintf("%s gave no answer before %s", instName(i), why))
				continue
			}
		}
		if len(ans) > 0 {
			answered = append(answered, ans[0].Where())
			continue
		}
		if c.tl.unhealthy(i, k.slot, end) == "" {
			return "" // a healthy instance that never answered may have won
		}
	}
	if len(dead) == 0 {
		return ""
	}
	return fmt.Sprintf("every claim answer for the slot was lost, so some instance won it (%s); the winner can only be one that died: %s",
		strings.Join(answered, "; "), strings.Join(dead, "; "))
}

// skewedAll returns the skew changes that touched every one of the
// instances around [from, to], or "" if one of them kept its clock.
func (c *checker) skewedAll(insts []int, from, to int64) string {
	var parts []string
	for _, i := range insts {
		ch := c.tl.skewIn(i, from, to)
		if len(ch) == 0 {
			return ""
		}
		parts = append(parts, fmt.Sprintf("%s by %+d ms at %s (faults.jsonl:%d)", instName(i), ch[0].Delta, msText(ch[0].At), ch[0].Line))
	}
	return strings.Join(parts, "; ")
}
