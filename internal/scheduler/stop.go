package scheduler

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/retry"
)

// The stop of docs/spec.md#s4-stop as far as runs that never started are
// concerned: a run won ahead of its slot that the stop reaches first, and a
// claim in flight when the stop begins. Both are settled within StopWindow of
// the stop, by the scheduler's clock, so that the daemon exits within
// max(ShutdownGrace + the runner's own hard stop, StopWindow) even when the
// store does not answer:
//
//   - a claim in flight is not given up: its answer is awaited until
//     StopWindow has passed (each call still bounded by callTimeout). A
//     claim not yet sent is not sent. A claim left without an answer, and
//     one whose earlier copies got none, is logged at warn: its run may
//     have been won with the answer lost.
//   - a win, whether it arrived before the stop or after it, is not
//     started: a lease store's lease is released at once, for a backup to
//     take it over; a claim-only store's run is recorded interrupted (no
//     backup will ever run it). A run that cannot be released or recorded
//     within StopWindow is logged at warn with its job, slot and attempt.

// defaultStopWindow is StopWindow's default: the runner's own window for
// releasing a lease at its hard stop.
const defaultStopWindow = 5 * time.Second

// errNotSent: the stop began before a claim could be sent; it was not.
var errNotSent = errors.New("claim not sent: the stop began")

// openStopWindow starts the stop's window: s.drain ends StopWindow from
// now, by the scheduler's clock (or when Run returns). The calls that
// settle the stop (an answer awaited, a release, an interrupted run
// recorded) are bounded by it. Run calls it once its loop has seen the
// stop, after arming the grace's timer.
func (s *Scheduler) openStopWindow() {
	t := s.o.Clock.NewTimer(s.o.StopWindow)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			s.endDrain()
		case <-s.drain.Done():
		}
	}()
}

// unstarted settles a won attempt whose command was not started because
// the stop began: a lease store's lease is released, a claim-only store's
// run is recorded interrupted. Calls are re-sent with backoff until
// answered or the stop's window is over.
func (s *Scheduler) unstarted(job config.Job, c answered) {
	fence := c.req.Fence(c.res.Attempt)
	log := s.o.Log.With(zap.String("job", job.Name), zap.Time("slot", c.req.SlotTime()),
		zap.Int("attempt", fence.Attempt), zap.String("instance", s.o.Instance), zap.String("token", fence.Token.Short()))
	if s.leaser != nil {
		err := s.untilDrained(job, "release", func(ctx context.Context) error { return s.leaser.Release(ctx, fence) })
		switch {
		case err == nil:
			log.Info("not started: the stop came first; lease released for another instance to take over")
		case errors.Is(err, claim.ErrFenced):
			log.Info("not started: the stop came first; the run already belongs to another attempt")
		default:
			log.Warn("not started, and its lease not released before the stop: another instance takes it over when the lease ends", zap.Error(err))
		}
		return
	}
	now := s.o.Clock.Now()
	fin := claim.Finish{
		Status: claim.StatusInterrupted, ExitCode: -1,
		OutputTail: "not started: the daemon stopped before its slot\n",
		StartedAt:  claim.StartOf(now, fence.Slot), FinishedAt: claim.StartOf(now, fence.Slot),
	}
	err := s.untilDrained(job, "finish", func(ctx context.Context) error { return s.o.Backend.Finish(ctx, fence, fin) })
	if err != nil {
		log.Warn("not started, and not recorded interrupted before the stop: status shows it running, then abandoned", zap.Error(err))
		return
	}
	log.Info("not started: the stop came first; recorded interrupted")
}

// untilDrained calls op, each call bounded by callTimeout, until it
// succeeds, fails for good (claim.ErrFenced, claim.ErrNotFound), or the
// stop's window is over; it returns op's last error. name is the call's
// name in the store's health (metrics: op).
func (s *Scheduler) untilDrained(job config.Job, name string, op func(context.Context) error) error {
	_, err := retry.Policy{
		Clock: s.o.Clock, PerCall: s.callTimeout(job), Min: 100 * time.Millisecond, Max: time.Second,
		OnFailure: func(_ int, err error) { s.health.failed(name, err) },
	}.Do(s.drain, op)
	return err
}

// unanswered logs a claim that the stop left without an answer although
// a copy of it was sent: the store may have decided it, and this
// instance will never know.
func (s *Scheduler) unanswered(req claim.Request, err error) {
	msg := "claim unanswered at stop: if it won, its lease ends with no one running it and another instance takes it over"
	if s.leaser == nil {
		msg = "claim unanswered at stop: if it won, the slot is not run and status shows it running until it is abandoned"
	}
	s.o.Log.Warn(msg, zap.String("job", req.Job), zap.Time("slot", req.SlotTime()),
		zap.String("instance", s.o.Instance), zap.String("token", req.Token.Short()), zap.Error(err))
}
