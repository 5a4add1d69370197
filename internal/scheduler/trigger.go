package scheduler

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

// Triggers (docs/spec.md#s6-trigger). A run asked for outside the
// schedule, by anarchond trigger or by a retry (retry.go), is a trigger in
// the job's control record. Every instance reads the records every
// ControlPoll (pause.go); a trigger it has not handled yet, and not older
// than TriggerWindow, is claimed as the run (job, trigger slot) through
// the slot's own path: the work spread, the claim (one instance wins),
// the runner, the notes. A manual run claims with overlap allow (a
// running scheduled run does not refuse it) and is not held by a pause; a
// retry claims with the job's overlap and is skipped (paused) while the
// job is paused.

// TriggerWindow is how long after its slot a trigger may be claimed on a
// lease store: the maxLate of its claim, when the job's is shorter. On a
// claim-only store the job's maxLate is kept: the store's memory of a
// claim was checked against it (docs/spec.md#s2), and a claim later than
// that memory could win the run again. An instance that first reads a
// trigger later than its window leaves it alone.
const TriggerWindow = 30 * time.Second

// triggers is this instance's handling of the triggers it read.
type triggers struct {
	mu sync.Mutex
	// handled are the IDs of the triggers picked up here (or found too
	// old): never picked up twice.
	handled map[string]bool
	// active are the triggers of the runs in progress here, by job and
	// slot: execute gives them to the runner.
	active map[trigKey]claim.Trigger
	// jobs are the current jobs by name (New, Reload).
	jobs map[string]*entry
	// leases: the backend keeps leases (triggerMaxLate).
	leases bool
	// ctx, runCtx and wg are Run's, once bound.
	ctx, runCtx context.Context
	wg          *sync.WaitGroup
}

type trigKey struct {
	job  string
	slot int64
}

func newTriggers(entries []*entry, leases bool) *triggers {
	t := &triggers{handled: map[string]bool{}, active: map[trigKey]claim.Trigger{}, leases: leases}
	t.setJobs(entries)
	return t
}

// setJobs replaces the jobs that triggers may name.
func (t *triggers) setJobs(entries []*entry) {
	jobs := make(map[string]*entry, len(entries))
	for _, e := range entries {
		jobs[e.job.Name] = e
	}
	t.mu.Lock()
	t.jobs = jobs
	t.mu.Unlock()
}

// bind gives the triggers Run's contexts and wait group: runs start from
// then on.
func (t *triggers) bind(ctx, runCtx context.Context, wg *sync.WaitGroup) {
	t.mu.Lock()
	t.ctx, t.runCtx, t.wg = ctx, runCtx, wg
	t.mu.Unlock()
}

// of returns the trigger of the run (job, slot) in progress here.
func (t *triggers) of(job string, slot int64) (claim.Trigger, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr, ok := t.active[trigKey{job, slot}]
	return tr, ok
}

// job returns the crontab's job of that name, as configured.
func (t *triggers) job(name string) (config.Job, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.jobs[name]
	if !ok {
		return config.Job{}, false
	}
	return e.job, true
}

// triggerOf returns the trigger that asked for the run (job, slot): the
// one this instance picked up, or, for a run it took up otherwise (a run
// adopted at start), the one of the job's control record as last read.
func (s *Scheduler) triggerOf(job string, slot int64) (claim.Trigger, bool) {
	if tr, ok := s.trig.of(job, slot); ok {
		return tr, true
	}
	s.pauses.mu.RLock()
	defer s.pauses.mu.RUnlock()
	return s.pauses.byJob[job].TriggerOf(slot)
}

// dueTrigger is one trigger to pick up.
type dueTrigger struct {
	e  *entry
	tr claim.Trigger
}

// due returns the triggers of cs that are due at now and not handled yet,
// marking them handled. When cs is every record (all), the triggers no
// record holds any more are forgotten.
func (t *triggers) due(cs []claim.Control, all bool, now time.Time) []dueTrigger {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.wg == nil || t.ctx.Err() != nil {
		return nil
	}
	leases := t.leases
	seen := map[string]bool{}
	var out []dueTrigger
	for _, c := range cs {
		e := t.jobs[c.Job]
		for _, tr := range c.Triggers {
			seen[tr.ID] = t.handled[tr.ID]
			switch {
			case e == nil || t.handled[tr.ID] || now.UnixMilli() < tr.Due-ahead(e):
				continue
			case now.Sub(time.UnixMilli(tr.Due)) > triggerMaxLate(e.job, leases):
				seen[tr.ID] = true // too old: another instance ran it, or nobody could
			default:
				seen[tr.ID] = true
				out = append(out, dueTrigger{e: e, tr: tr})
			}
		}
	}
	for id := range t.handled {
		if all && !seen[id] {
			delete(t.handled, id)
		}
	}
	for id, h := range seen {
		if h {
			t.handled[id] = true
		}
	}
	return out
}

// ahead is how long before its due time a trigger of e's job is picked
// up: the claim's head start, and at least ControlPoll's default, so that
// an instance that reads it a poll early holds it back rather than late.
func ahead(e *entry) int64 {
	return max(e.job.ClaimAhead, DefaultControlPoll).Milliseconds()
}

// pickTriggers starts a run for every trigger of cs due and not handled;
// all says that cs is every record read.
func (s *Scheduler) pickTriggers(cs []claim.Control, all bool) {
	for _, p := range s.trig.due(cs, all, s.o.Clock.Now()) {
		s.o.Log.Info("trigger picked up", zap.String("job", p.e.job.Name), zap.String("kind", p.tr.Kind),
			zap.Time("slot", time.UnixMilli(p.tr.Slot).UTC()), zap.Int("attempt", p.tr.Attempt), zap.String("by", p.tr.By))
		if s.o.Hooks.Triggered != nil {
			s.o.Hooks.Triggered(p.e.job.Name, p.tr.Kind)
		}
		ctx, runCtx, wg := s.trig.ctx, s.trig.runCtx, s.trig.wg
		wg.Go(func() { s.runTrigger(ctx, runCtx, p.e.job, p.tr) })
	}
}

// triggerMaxLate is the maxLate of a trigger's claim (TriggerWindow).
func triggerMaxLate(job config.Job, leases bool) time.Duration {
	if !leases {
		return job.MaxLate
	}
	return max(job.MaxLate, TriggerWindow)
}

// triggerJob is job as a trigger's claim sees it: its maxLate
// (triggerMaxLate), and overlap allow for a manual run.
func triggerJob(job config.Job, tr claim.Trigger, leases bool) config.Job {
	job.MaxLate = triggerMaxLate(job, leases)
	if tr.Kind == claim.TriggerManual {
		job.Overlap = string(claim.OverlapAllow)
	}
	return job
}

// runTrigger claims and runs the trigger's run as a slot's: held back by
// the work spread, claimed, run by the winner, watched by the others.
func (s *Scheduler) runTrigger(ctx, runCtx context.Context, job config.Job, tr claim.Trigger) {
	slot := time.UnixMilli(tr.Slot).UTC()
	if tr.Kind == claim.TriggerRetry && s.skipPaused(job.Name, slot) {
		return
	}
	key := trigKey{job.Name, tr.Slot}
	s.trig.mu.Lock()
	s.trig.active[key] = tr
	s.trig.mu.Unlock()
	defer func() {
		s.trig.mu.Lock()
		delete(s.trig.active, key)
		s.trig.mu.Unlock()
	}()
	j := triggerJob(job, tr, s.leaser != nil)
	if s.holdBack(ctx, j, slot) != nil {
		return
	}
	c, ok := s.claimFirst(ctx, j, slot, slot)
	if ctx.Err() != nil && !ok {
		return
	}
	s.follow(ctx, runCtx, j, slot, c, ok)
}

// withoutTriggered returns runs without those a trigger of job's control
// record (as last read) asked for: a start's catch-up counts from the
// newest slot of the schedule that ran, and a manual run or a retry is
// none (its slot is not one of the schedule's).
func (s *Scheduler) withoutTriggered(job string, runs []claim.Run) []claim.Run {
	s.pauses.mu.RLock()
	c := s.pauses.byJob[job]
	s.pauses.mu.RUnlock()
	if len(c.Triggers) == 0 {
		return runs
	}
	out := make([]claim.Run, 0, len(runs))
	for _, r := range runs {
		if _, ok := c.TriggerOf(r.Slot); !ok {
			out = append(out, r)
		}
	}
	return out
}
