package scheduler

import (
	"container/heap"
	"context"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
)

// startReaders bounds the reads of a start in flight at once.
const startReaders = 8

// startScan is how many of a job's newest runs a start reads: the newest
// at or before the start tells the catch-up where the cluster left off
// (runs claimed after the start, by other instances or by this one while
// the read was retried, come first); on a lease store the running ones
// are adopted.
const startScan = 50

// startRead is the store's answer, at the start, about one job.
type startRead struct {
	e    *entry
	runs []claim.Run // newest slot first
}

// starter is the start's catch-up: every job's newest recorded run is read
// once (with the runs left running, on a lease store); a job whose policy
// could run a slot from before the start is held out of the heap until its
// read answers, or until that slot is no longer within maxLate (the store
// unreachable at start: the catch-up is given up, the job scheduled from
// the start). Only the Run loop calls its methods but readAll.
type starter struct {
	s       *Scheduler
	start   time.Time
	held    map[*entry]time.Time // a held job and when its catch-up is given up
	results chan startRead
	pending int // jobs whose read has not been decided
}

// beginStart schedules the jobs that wait for nothing, holds the others and
// starts the reads.
func (s *Scheduler) beginStart(ctx, runCtx context.Context, wg *sync.WaitGroup, h *slotHeap, start time.Time) *starter {
	st := &starter{s: s, start: start, held: map[*entry]time.Time{}, results: make(chan startRead), pending: len(s.jobs)}
	if st.pending == 0 {
		close(s.decided)
	}
	// The held jobs are read first: the others wait for nothing.
	order := make([]*entry, 0, len(s.jobs))
	for _, e := range s.jobs {
		if until, ok := holdUntil(e, start); ok {
			st.held[e] = until
			order = append(order, e)
		}
	}
	for _, e := range s.jobs {
		if _, ok := st.held[e]; !ok {
			st.schedule(h, e, firstAfter(e.job, e.sched, start))
			order = append(order, e)
		}
	}
	wg.Go(func() { st.readAll(ctx, runCtx, wg, order) })
	return st
}

// schedule puts e in the heap with first as its next slot.
func (st *starter) schedule(h *slotHeap, e *entry, first time.Time) {
	e.next = first
	if !e.next.IsZero() {
		heap.Push(h, e)
		st.s.prep.add(e)
	}
}

// wake is the earliest instant a held job's catch-up is given up, or zero.
func (st *starter) wake() time.Time {
	var w time.Time
	for _, until := range st.held {
		if w.IsZero() || until.Before(w) {
			w = until
		}
	}
	return w
}

// expire gives up the catch-up of the held jobs whose newest slot before
// the start is no longer within maxLate at now: the store has not answered.
// They are scheduled from the start; the slots their policy would have run
// are counted once the store answers.
func (st *starter) expire(h *slotHeap, now time.Time) {
	for e, until := range st.held {
		if now.Before(until) {
			continue
		}
		delete(st.held, e)
		st.s.o.Log.Warn("catch-up given up: the store did not answer at start while a slot before it was within maxLate; scheduling the job from the start",
			zap.String("job", e.job.Name), zap.Time("start", st.start), zap.Duration("maxLate", e.job.MaxLate))
		st.schedule(h, e, firstAfter(e.job, e.sched, st.start))
	}
}

// forget releases the held jobs when a reload replaced them: the reload
// starts them from its cursor. What their policy would have run is counted
// as given up.
func (st *starter) forget() { clear(st.held) }

// decide acts on the store's answer about one job: a held job is scheduled
// from its plan's first slot, and the slots not run are counted.
func (st *starter) decide(h *slotHeap, r startRead) {
	newest, known := newestAtOrBefore(r.runs, st.start, startScan)
	if !known {
		st.s.o.Log.Warn("slots before the start not counted: every run read was claimed after the start",
			zap.String("job", r.e.job.Name), zap.Int("runs", len(r.runs)), zap.Time("start", st.start))
	}
	p := planStart(r.e, newest, st.start)
	if _, ok := st.held[r.e]; ok {
		delete(st.held, r.e)
		st.schedule(h, r.e, p.first)
		p.run = span{} // claimed from now on
	}
	// Otherwise the job was given up, or never held (its policy runs
	// nothing from the past: p.run is empty): the policy's slots were not
	// run.
	st.s.reportStart(r.e, p, st.start)
	if st.pending--; st.pending == 0 {
		close(st.s.decided)
	}
}

// reportStart counts and logs, in one line per job, the slots from before
// the start that it does not run: p.run holds those of the policy that
// were given up (the store unreachable).
func (s *Scheduler) reportStart(e *entry, p startPlan, start time.Time) {
	job := e.job
	if p.why != "" {
		s.o.Log.Debug("nothing from before the start: "+map[string]string{
			"new":     "the store has no run of the job (new to the cluster)",
			"changed": "the newest recorded slot is not a slot of the schedule (it changed)",
		}[p.why], zap.String("job", job.Name), zap.Time("newest", p.newest), zap.Time("start", start))
	}
	counts := []struct {
		reason string
		sp     span
	}{{ReasonAllDown, p.late}, {ReasonCatchUp, p.skipped}, {ReasonStoreUnreachable, p.run}}
	var all span
	var reasons []string
	fields := []zap.Field{zap.String("job", job.Name)}
	for _, c := range counts {
		if c.sp.n == 0 {
			continue
		}
		all = all.add(c.sp)
		reasons = append(reasons, c.reason)
		fields = append(fields, zap.Int(c.reason, c.sp.n))
		s.countMissed(job.Name, c.reason, c.sp.n)
		s.noteSpan(job.Name, e.sched, c.sp, c.reason)
	}
	if all.n == 0 {
		return
	}
	s.o.Log.Warn("missed: slots due while no instance ran were not run at start", append(fields,
		zap.Int("slots", all.n), zap.Time("first", all.first), zap.Time("last", all.last),
		zap.String("reason", strings.Join(reasons, ",")), zap.String("catchUp", job.CatchUp),
		zap.Time("newest_recorded", p.newest), zap.Time("start", start), zap.Duration("maxLate", job.MaxLate))...)
}

// readAll reads the newest runs of every job, in order, startReaders at a
// time, hands each answer to the Run loop and, on a lease store, adopts
// the runs left running.
func (st *starter) readAll(ctx, runCtx context.Context, wg *sync.WaitGroup, order []*entry) {
	s := st.s
	todo := make(chan *entry)
	var readers sync.WaitGroup
	for range min(startReaders, len(s.jobs)) {
		readers.Go(func() {
			for e := range todo {
				runs, ok := s.readRuns(ctx, e.job, startScan)
				if !ok {
					continue
				}
				if s.leaser != nil {
					s.adopt(ctx, runCtx, wg, e.job, runs, st.start)
				}
				select {
				case st.results <- startRead{e: e, runs: runs}:
				case <-ctx.Done():
				}
			}
		})
	}
	feed(ctx, todo, order)
	readers.Wait()
	if ctx.Err() != nil {
		return
	}
	s.o.Log.Info("read the jobs' newest runs at start", zap.Int("jobs", len(s.jobs)),
		zap.Duration("took", s.o.Clock.Now().Sub(st.start)))
	if s.o.Hooks.Adopted != nil {
		s.o.Hooks.Adopted(len(s.jobs))
	}
}

// feed sends the jobs to the readers until done or ctx is.
func feed(ctx context.Context, todo chan<- *entry, order []*entry) {
	defer close(todo)
	for _, e := range order {
		select {
		case todo <- e:
		case <-ctx.Done():
			return
		}
	}
}

// readRuns lists job's newest runs, each read bounded by ClaimTimeout and
// sent again with backoff until answered; ok is false once ctx is done.
func (s *Scheduler) readRuns(ctx context.Context, job config.Job, limit int) ([]claim.Run, bool) {
	for backoff := 100 * time.Millisecond; ; backoff = min(backoff*2, 2*time.Second) {
		lctx, cancel := context.WithTimeout(ctx, s.o.ClaimTimeout)
		runs, err := s.o.Backend.ListRuns(lctx, claim.ListQuery{Job: job.Name, Limit: limit})
		cancel()
		if err == nil {
			s.health.ok("list")
			return runs, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		s.health.failed("list", err)
		if clock.Sleep(ctx, s.o.Clock, backoff) != nil {
			return nil, false
		}
	}
}

// adopt takes up, at the instance's start, the watch over the job's runs
// that the store holds as running and whose slot is at or before the start
// (the scheduler claims the later ones): their runner may have died while
// no instance was watching (every instance down at once), and without a
// watcher such a run would stay running for good. A run whose runner lives
// is only watched, as any backup does. The start's catch-up claims only
// slots after the newest recorded one, so it never claims these.
func (s *Scheduler) adopt(ctx, runCtx context.Context, wg *sync.WaitGroup, job config.Job, runs []claim.Run, start time.Time) {
	for _, r := range runs {
		slot := r.SlotTime()
		if r.Status != claim.StatusRunning || slot.After(start) {
			continue
		}
		s.o.Log.Info("watching a run found running at start", zap.String("job", job.Name), zap.Time("slot", slot),
			zap.Int("attempt", r.Attempt), zap.String("instance", r.Instance))
		wg.Go(func() {
			c, ok := s.watch(ctx, job, slot, watchAdopted)
			s.follow(ctx, runCtx, job, slot, c, ok)
		})
	}
}
