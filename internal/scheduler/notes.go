package scheduler

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/retry"
	"github.com/anarchon/anarchon/internal/schedule"
)

// The slots no attempt ran are recorded in the store as notes
// (docs/spec.md#s6-outcomes) where the backend is a claim.Recorder: a slot
// skipped for overlap at once, by the instance whose claim found the job's
// previous run live (the note decides the slot: written, no instance runs
// it; not written, another instance won it); a missed slot in the
// background, by a queue that retries while the store does not answer.
// Every instance that saw the outcome records it; the store keeps the
// first note, and a run's own record wins over any.

// ReasonAllDown is the note of a slot that came due while no instance
// claimed it (every instance down, or none could reach the store) and was
// older than maxLate at the next start.
const ReasonAllDown = "all_down"

// Reasons of the notes that are not a missed slot's.
const (
	reasonOverlap    = "overlap"     // skipped: the job's previous run was live
	reasonNoDecision = "no_decision" // unknown: the store gave no decision
)

// noteQueueSize bounds the notes waiting to be recorded; maxSpanNotes
// bounds the notes of one span of missed slots (its newest slots: the
// counter and the log line count them all).
const (
	noteQueueSize = 4096
	maxSpanNotes  = 1000
)

// notes is the queue of notes to record in the background.
type notes struct {
	rec     claim.Recorder // nil: the backend records no notes
	queue   chan claim.Note
	dropped atomic.Int64 // notes not queued: the queue was full
}

func newNotes(b claim.Backend) *notes {
	rec, _ := b.(claim.Recorder)
	return &notes{rec: rec, queue: make(chan claim.Note, noteQueueSize)}
}

// note queues n for recording, without waiting.
func (s *Scheduler) note(job string, slot time.Time, st claim.Status, reason string) {
	if s.notes.rec == nil {
		return
	}
	n := claim.Note{Job: job, Slot: slot.UnixMilli(), Status: st, Reason: reason, Instance: s.o.Instance, At: s.o.Clock.Now()}
	select {
	case s.notes.queue <- n:
	default:
		if s.notes.dropped.Add(1) == 1 {
			s.o.Log.Warn("note not recorded: too many waiting for the store; status will not show this slot's outcome (the missed-slots counter has it)",
				zap.String("job", job), zap.Time("slot", slot), zap.String("status", string(st)), zap.String("reason", reason))
		}
	}
}

// noteSpan queues a note for each slot of sp (the newest maxSpanNotes).
func (s *Scheduler) noteSpan(job string, sc schedule.Schedule, sp span, reason string) {
	if s.notes.rec == nil || sp.n == 0 {
		return
	}
	for _, t := range newestSlots(sc, sp, maxSpanNotes) {
		s.note(job, t, claim.StatusMissed, reason)
	}
}

// newestSlots returns the newest max slots of sp, oldest first. It looks
// back from the span's last slot over a doubling window until the window
// holds max slots or reaches the span's first.
func newestSlots(sc schedule.Schedule, sp span, max int) []time.Time {
	from := sp.first.Add(-time.Millisecond)
	for d := time.Second; ; d *= 2 {
		lo := sp.last.Add(-d)
		if !lo.After(from) {
			lo = from
		}
		var out []time.Time
		for t := sc.Next(lo); !t.IsZero() && !t.After(sp.last) && len(out) < 2*max; t = sc.Next(t) {
			out = append(out, t)
		}
		if len(out) >= max || lo.Equal(from) {
			return out[len(out)-min(max, len(out)):]
		}
	}
}

// recordNotes records the queued notes until ctx ends, each retried while
// the store does not answer; then, within the stop's window, those still
// queued.
func (s *Scheduler) recordNotes(ctx context.Context) {
	for {
		select {
		case n := <-s.notes.queue:
			s.recordNote(ctx, n)
		case <-ctx.Done():
			s.drainNotes()
			return
		}
	}
}

// drainNotes records what is queued at the stop, within its window.
func (s *Scheduler) drainNotes() {
	for {
		select {
		case n := <-s.notes.queue:
			if !s.recordNote(s.drain, n) {
				left := len(s.notes.queue) + 1
				s.o.Log.Warn("notes not recorded before the stop: status will not show these slots' outcomes (the missed-slots counter has them)",
					zap.Int("notes", left))
				return
			}
		default:
			return
		}
	}
}

// recordNote records n, retried until ctx ends; it reports whether the
// store answered. When the store kept this instance's note, the note's
// hook runs (afterNote).
func (s *Scheduler) recordNote(ctx context.Context, n claim.Note) bool {
	wrote := false
	_, err := retry.Policy{
		Clock: s.o.Clock, PerCall: s.o.ClaimTimeout, Min: 200 * time.Millisecond, Max: 5 * time.Second,
		OnFailure: func(_ int, err error) { s.health.failed("note", err) },
	}.Do(ctx, func(ctx context.Context) error {
		w, err := s.notes.rec.Record(ctx, n)
		wrote = w
		return err
	})
	if claim.IsPermanent(err) {
		s.health.failed("note", err) // Do does not retry it
	}
	if err == nil && wrote {
		s.afterNote(n)
	}
	return err == nil
}

// skipped records the slot of job that this instance's final claim found
// held by the job's previous run (overlap: skip), with that run's slot. It
// reports whether the note stands: false when another instance won the
// slot first, or the store did not answer (the caller then watches the
// slot as before).
func (s *Scheduler) skipped(ctx context.Context, job config.Job, slot time.Time) bool {
	if s.notes.rec == nil {
		return false
	}
	n := claim.Note{Job: job.Name, Slot: slot.UnixMilli(), Status: claim.StatusSkipped, Reason: reasonOverlap,
		Instance: s.o.Instance, At: s.o.Clock.Now(), HeldBy: s.heldBy(ctx, job, slot)}
	cctx, cancel := context.WithTimeout(ctx, s.callTimeout(job))
	defer cancel()
	wrote, err := s.notes.rec.Record(cctx, n)
	if err != nil {
		s.health.failed("note", err)
		return false
	}
	return wrote
}

// heldBy is the slot of the run of job before slot that is still running,
// or 0 when the store does not say.
func (s *Scheduler) heldBy(ctx context.Context, job config.Job, slot time.Time) int64 {
	cctx, cancel := context.WithTimeout(ctx, s.callTimeout(job))
	defer cancel()
	runs, err := s.o.Backend.ListRuns(cctx, claim.ListQuery{Job: job.Name, Limit: 5, Statuses: []claim.Status{claim.StatusRunning}})
	if err != nil {
		return 0
	}
	for _, r := range runs {
		if r.Slot < slot.UnixMilli() {
			return r.Slot
		}
	}
	return 0
}
