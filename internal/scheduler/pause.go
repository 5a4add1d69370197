package scheduler

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
)

// Pauses (docs/spec.md#s6-control). An operator pauses a job by writing
// its control record in the store, which every instance shares; each
// instance reads all the records of the namespace once per ControlPoll
// (one read, however many jobs), off the claims' path, and keeps them. A
// slot whose claim comes due while its job is paused (before the pause's
// until, when it has one) is not claimed: it is recorded skipped, reason
// paused, as a note. A reload does not touch the records, and a pause
// with an until ends by itself at that instant. A read that fails keeps
// the last records read: the failure is logged once, and the recovery.

// ReasonPaused is the note of a slot that fell while its job was paused.
const ReasonPaused = "paused"

// DefaultControlPoll is how often the daemon reads the control records:
// a pause is honoured within it.
const DefaultControlPoll = time.Second

// pauses is this instance's view of the jobs' control records.
type pauses struct {
	ctl claim.Controller // nil: the backend keeps none

	mu    sync.RWMutex
	byJob map[string]claim.Control

	// reported are the jobs last reported paused (log, Hooks.Paused), and
	// failing says that the last read failed; only the poll touches them.
	reported map[string]claim.Control
	failing  bool
}

// newPauses reads b's records every poll, when b keeps them and poll is
// positive.
func newPauses(b claim.Backend, poll time.Duration) *pauses {
	ctl, _ := b.(claim.Controller)
	if poll <= 0 {
		ctl = nil
	}
	return &pauses{ctl: ctl, byJob: map[string]claim.Control{}, reported: map[string]claim.Control{}}
}

// holds returns job's record when it holds the slot at t.
func (p *pauses) holds(job string, t time.Time) (claim.Control, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	c, ok := p.byJob[job]
	return c, ok && c.PausedAt(t)
}

// set replaces the records with those read.
func (p *pauses) set(cs []claim.Control) {
	byJob := make(map[string]claim.Control, len(cs))
	for _, c := range cs {
		byJob[c.Job] = c
	}
	p.mu.Lock()
	p.byJob = byJob
	p.mu.Unlock()
}

// skipPaused reports whether job's slot is held by a pause, and then
// records it skipped (paused).
func (s *Scheduler) skipPaused(job string, slot time.Time) bool {
	c, ok := s.pauses.holds(config.JobOfKey(job), slot)
	if !ok {
		return false
	}
	s.o.Log.Debug("slot skipped: the job is paused", zap.String("job", job), zap.Time("slot", slot),
		zap.String("by", c.By), zap.String("reason", c.Reason))
	s.note(job, slot, claim.StatusSkipped, ReasonPaused)
	return true
}

// pollControls reads the control records every ControlPoll after from
// (the first read, Run's, before the first slot is dispatched) until ctx
// ends. The reads keep their instants: a slow read does not shift the
// next, and one behind its instant is made at once.
func (s *Scheduler) pollControls(ctx context.Context, from time.Time) {
	next := from
	for {
		next = next.Add(s.o.ControlPoll)
		if now := s.o.Clock.Now(); next.Before(now) {
			next = now
		}
		if clock.SleepUntil(ctx, s.o.Clock, next) != nil {
			return
		}
		s.readControls(ctx)
	}
}

// readControls reads the records once, bounded by ClaimTimeout, and
// reports what changed.
func (s *Scheduler) readControls(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, s.o.ClaimTimeout)
	cs, err := s.pauses.ctl.Controls(cctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	p := s.pauses
	switch {
	case err != nil:
		if s.o.Hooks.StoreError != nil {
			s.o.Hooks.StoreError("controls", err)
		}
		if !p.failing {
			p.failing = true
			s.o.Log.Warn("cannot read the jobs' pauses from the store; keeping the last known ones until it answers", zap.Error(err))
		}
	default:
		if s.o.Hooks.StoreOK != nil {
			s.o.Hooks.StoreOK("controls")
		}
		if p.failing {
			p.failing = false
			s.o.Log.Info("read the jobs' pauses from the store again")
		}
		p.set(cs)
	}
	s.reportPauses(s.o.Clock.Now())
}

// reportPauses logs and reports (Hooks.Paused) each job whose pause began
// or ended since the last report: by a record written, or an until
// reached.
func (s *Scheduler) reportPauses(now time.Time) {
	p := s.pauses
	p.mu.RLock()
	all := p.byJob
	p.mu.RUnlock() // set replaces the map, never changes it
	paused := make(map[string]claim.Control, len(all))
	for job, c := range all {
		if c.PausedAt(now) {
			paused[job] = c
		}
	}
	for job, c := range paused {
		if _, was := p.reported[job]; !was {
			s.o.Log.Info("job paused: its slots are skipped until it is resumed", zap.String("job", job),
				zap.Time("until", c.UntilTime()), zap.String("reason", c.Reason), zap.String("by", c.By))
			s.hookPaused(job, true)
		}
	}
	for job, was := range p.reported {
		if _, still := paused[job]; still {
			continue
		}
		if c := all[job]; !c.Paused {
			s.o.Log.Info("job resumed", zap.String("job", job), zap.String("by", c.By))
		} else {
			s.o.Log.Info("job resumed: its pause is over", zap.String("job", job), zap.Time("until", was.UntilTime()))
		}
		s.hookPaused(job, false)
	}
	p.reported = paused
}

func (s *Scheduler) hookPaused(job string, paused bool) {
	if s.o.Hooks.Paused != nil {
		s.o.Hooks.Paused(job, paused)
	}
}
