package scheduler

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/schedule"
)

// keepRuns (docs/spec.md#s6-keep-runs): a job's history is cut to its
// keepRuns newest slots at start and every PruneEvery, on a backend that
// is a claim.CountPruner (validate refuses keepRuns on the others).

// kept is a job with keepRuns, and its schedule.
type kept struct {
	job   config.Job
	sched schedule.Schedule
}

// keeper holds the jobs with keepRuns as last loaded (Run's loop and
// Reload set them; the keep loop reads them).
type keeper struct {
	mu   sync.Mutex
	jobs []kept
	// changed is signalled by set: a loop with no jobs waits on it rather
	// than on a timer.
	changed chan struct{}
}

func newKeeper() *keeper { return &keeper{changed: make(chan struct{}, 1)} }

// set replaces the jobs with those of entries that have keepRuns.
func (k *keeper) set(entries []*entry) {
	var jobs []kept
	for _, e := range entries {
		if e.job.KeepRuns > 0 {
			jobs = append(jobs, kept{job: e.job, sched: e.sched})
		}
	}
	k.mu.Lock()
	k.jobs = jobs
	k.mu.Unlock()
	select {
	case k.changed <- struct{}{}:
	default:
	}
}

func (k *keeper) list() []kept {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.jobs
}

// keepLoop prunes the jobs with keepRuns at once and then every
// PruneEvery, until ctx is done. While no job has keepRuns it waits for a
// reload that brings one.
func (s *Scheduler) keepLoop(ctx context.Context, p claim.CountPruner) {
	for {
		jobs := s.keep.list()
		if len(jobs) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.keep.changed:
				continue
			}
		}
		for _, k := range jobs {
			if ctx.Err() != nil {
				return
			}
			s.pruneKept(ctx, p, k)
		}
		if clock.Sleep(ctx, s.o.Clock, s.o.PruneEvery) != nil {
			return
		}
	}
}

// pruneKept cuts one job's history to its keepRuns newest slots, sparing
// the slots younger than keepAge.
func (s *Scheduler) pruneKept(ctx context.Context, p claim.CountPruner, k kept) {
	pctx, cancel := context.WithTimeout(ctx, max(s.o.PruneEvery, s.o.ClaimTimeout))
	defer cancel()
	age := s.keepAge(k, s.o.Clock.Now())
	n, err := p.PruneKeep(pctx, k.job.Name, k.job.KeepRuns, age)
	if err != nil {
		if ctx.Err() == nil {
			s.health.failed("prune", err)
		}
		return
	}
	s.health.ok("prune")
	if n > 0 {
		s.o.Log.Info("pruned runs beyond keepRuns", zap.String("job", k.job.Name), zap.Int64("runs", n),
			zap.Int("keepRuns", k.job.KeepRuns), zap.Duration("older_than", age))
	}
}

// keepAge is how old a slot must be before keepRuns may prune it: as long
// as a first claim of it may still be sent (resendFor: maxLate and the
// jitter, plus a lease on a lease store), and for overlap: queue the wait of a queued
// slot too (until the job's next slot: its period after now), so that no
// claim can find a pruned slot empty and win it a second time.
func (s *Scheduler) keepAge(k kept, now time.Time) time.Duration {
	// The longest jitter bounds any slot's (resendFor counts from a
	// slot's own start).
	age := s.resendFor(k.job, now) + k.job.Jitter
	if claim.OverlapPolicy(k.job.Overlap) == claim.OverlapQueue {
		if next := k.sched.Next(now); !next.IsZero() {
			if after := k.sched.Next(next); !after.IsZero() {
				age += after.Sub(next)
			}
		}
	}
	return age
}
