package scheduler

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/schedule"
)

// Retries (docs/spec.md#s6-retry). When an attempt of a job with
// retry.attempts ends failed or timeout and its result is recorded, the
// instance that ran it writes a retry trigger in the job's control record
// (trigger.go), due after the backoff: any live instance may then claim
// and run it, as attempt k+1. The backoff of the retry after attempt k is
// min(maxBackoff, backoff * 2^(k-1)), with a jitter of ±20 % that is the
// same on every instance for one (job, slot, attempt). Under overlap skip
// a retry is never due at or after the job's next slot after the one it
// retries: it is dropped, and the log says why. An instance that dies
// between the result and the trigger's write loses the retry.

// What became of a retry the job's policy asked for (Hooks.Retried).
const (
	RetryScheduled    = "scheduled"      // its trigger is written
	RetryNotWritten   = "not_written"    // the store did not take its trigger: lost
	RetryPastNextSlot = "past_next_slot" // overlap skip: it would be due at or after the next slot
)

// retryJitter is the jitter's share of the backoff, either way.
const retryJitter = 0.2

// retryWrites bounds the compare-and-set writes of one retry.
const retryWrites = 5

// scheduleRetry writes the retry of the attempt that ended with rep, when
// the job's policy asks for one. slot is the run's slot (a trigger's, for
// a manual run or a retry: tr). It reports whether a retry follows: false
// means the run's outcome is final.
func (s *Scheduler) scheduleRetry(ctx context.Context, job config.Job, tr *claim.Trigger, slot int64, rep runner.Report) bool {
	if j, ok := s.trig.job(job.Name); ok {
		job = j // as configured: a manual run's claim had overlap allow
	}
	next, ok := s.retryPlan(job, tr, slot, rep)
	if !ok {
		return false
	}
	ctl, isCtl := s.o.Backend.(claim.Controller)
	if !isCtl {
		return false
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.ClaimTimeout)
	defer cancel()
	got, err := s.writeRetry(wctx, ctl, job, next)
	log := s.o.Log.With(zap.String("job", job.Name), zap.Time("retry_of", time.UnixMilli(next.Of).UTC()),
		zap.Int("attempt", next.Attempt))
	if err != nil {
		log.Warn("retry not scheduled: its trigger could not be written to the store; the run's outcome stands", zap.Error(err))
		s.retried(job.Name, RetryNotWritten)
		return false
	}
	log.Info("retry scheduled", zap.Time("due", time.UnixMilli(next.Due).UTC()))
	s.retried(job.Name, RetryScheduled)
	s.pickTriggers([]claim.Control{got}, false)
	return true
}

// retryPlan returns the retry that follows the attempt that ended with
// rep, or false when none does: no retries left, an outcome that is not
// failed or timeout, a result not recorded, or (overlap skip) a retry that
// would be due at or after the job's next slot.
func (s *Scheduler) retryPlan(job config.Job, tr *claim.Trigger, slot int64, rep runner.Report) (claim.Trigger, bool) {
	k, of := 1, slot
	if tr != nil && tr.Kind == claim.TriggerRetry {
		k, of = tr.Attempt, tr.Of
	}
	if job.Retry.Attempts <= 0 || k > job.Retry.Attempts || !rep.Recorded ||
		(rep.Status != claim.StatusFailed && rep.Status != claim.StatusTimeout) {
		return claim.Trigger{}, false
	}
	now := s.o.Clock.Now()
	due := now.Add(RetryBackoff(job, of, k))
	if job.Overlap == string(claim.OverlapSkip) {
		if sc, err := schedule.Parse(job.Schedule, job.Location); err == nil {
			if next := sc.Next(time.UnixMilli(of)); !next.IsZero() && !due.Before(next) {
				s.o.Log.Info("no retry: it would be due at or after the job's next slot (overlap: skip)",
					zap.String("job", job.Name), zap.Time("retry_of", time.UnixMilli(of).UTC()),
					zap.Time("due", due), zap.Time("next_slot", next))
				s.retried(job.Name, RetryPastNextSlot)
				return claim.Trigger{}, false
			}
		}
	}
	return claim.Trigger{
		ID: string(claim.NewToken()), Kind: claim.TriggerRetry, Slot: due.UnixMilli(), Of: of,
		Attempt: k + 1, Due: due.UnixMilli(), By: s.o.Instance, At: now.UnixMilli(),
	}, true
}

// retried reports what became of a retry of job (Hooks.Retried).
func (s *Scheduler) retried(job, result string) {
	if s.o.Hooks.Retried != nil {
		s.o.Hooks.Retried(job, result)
	}
}

// RetryBackoff is the wait before the retry that follows attempt k of the
// run at slot of (ms): min(maxBackoff, backoff * 2^(k-1)), ±20 % by a hash
// of the job, the slot and k, in whole milliseconds.
func RetryBackoff(job config.Job, of int64, k int) time.Duration {
	d := job.Retry.Backoff
	for i := 1; i < k && d < job.Retry.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, job.Retry.MaxBackoff)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d\x00%d", job.Name, of, k)
	f := float64(h.Sum64()%2001)/1000 - 1 // [-1, 1]
	return max(time.Duration(float64(d)*(1+retryJitter*f)).Round(time.Millisecond), time.Millisecond)
}

// writeRetry adds t to the job's control record (AddTrigger).
func (s *Scheduler) writeRetry(ctx context.Context, ctl claim.Controller, job config.Job, t claim.Trigger) (claim.Control, error) {
	sc, _ := schedule.Parse(job.Schedule, job.Location)
	keep := int64(0)
	if s.o.Retention > 0 {
		keep = s.o.Clock.Now().Add(-s.o.Retention).UnixMilli()
	}
	got, _, err := AddTrigger(ctx, ctl, job.Name, sc, t, keep, retryWrites+1)
	return got, err
}

// AddTrigger adds t to job's control record at the first millisecond from
// t.Slot that neither the job's schedule sc nor another trigger has,
// dropping the triggers due before keepAfter (ms), compared and set on the
// record's version and, after a conflict, read and tried again (tries in
// all). It returns the record as written and t as added.
func AddTrigger(ctx context.Context, ctl claim.Controller, job string, sc schedule.Schedule, t claim.Trigger,
	keepAfter int64, tries int) (claim.Control, claim.Trigger, error) {
	got, _, err := claim.UpdateControl(ctx, ctl, job, tries, func(cur claim.Control, _ int) (claim.Control, bool) {
		t.Slot = FreeSlot(cur, sc, t.Slot)
		t.Due = t.Slot
		return cur.WithTrigger(t, keepAfter), true
	})
	return got, t, err
}

// TriggerLead is how far after the request a manual run's slot is: every
// instance reads the trigger within its control poll (a second) and
// claims the run like a scheduled slot, spread alike.
const TriggerLead = 2 * time.Second

// AskRun asks for one run of job now, outside its schedule (anarchond
// trigger, the dashboard): a manual trigger in its control record, by by
// (user@host), at its first free millisecond TriggerLead after now.
func AskRun(ctx context.Context, ctl claim.Controller, job config.Job, by string, now time.Time, retention time.Duration) (claim.Trigger, error) {
	sc, err := schedule.Parse(job.Schedule, job.Location)
	if err != nil {
		return claim.Trigger{}, fmt.Errorf("job %q: %w", job.Name, err)
	}
	tr := claim.Trigger{
		ID: string(claim.NewToken()), Kind: claim.TriggerManual, Attempt: 1,
		By: by, At: now.UnixMilli(), Slot: now.Add(TriggerLead).UnixMilli(),
	}
	_, tr, err = AddTrigger(ctx, ctl, job.Name, sc, tr, now.Add(-retention).UnixMilli(), 6)
	return tr, err
}

// FreeSlot is the first millisecond from ms that is neither a slot of sc
// (nil: none) nor a trigger's slot in c: a run asked for outside the
// schedule never shares a run's key with another.
func FreeSlot(c claim.Control, sc schedule.Schedule, ms int64) int64 {
	for {
		_, taken := c.TriggerOf(ms)
		if !taken && sc != nil {
			taken = sc.Next(time.UnixMilli(ms-1)).UnixMilli() == ms
		}
		if !taken {
			return ms
		}
		ms++
	}
}
