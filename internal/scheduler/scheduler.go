// Package scheduler turns the crontab into claims: one timer for the earliest
// next slot of all jobs (a heap), claims of slots due together sent
// concurrently with a bound, re-sent with the same token on transport errors
// until answered or late, backups that watch a run held by another instance,
// the work spread (a small deterministic delay before the first claim of each
// slot, so that no instance wins every race) and the graceful stop of
// docs/spec.md#s4-stop.
package scheduler

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/schedule"
)

// Executor runs one won attempt; *runner.Runner is the production one.
type Executor interface {
	Run(ctx context.Context, e runner.Execution) runner.Report
}

// Hooks observe the scheduler (metrics, tests). Every field may be nil.
type Hooks struct {
	// Claimed is called with every answered claim.
	Claimed func(job string, slot time.Time, res claim.Result, took time.Duration)
	// StoreError is called with every failed call to the store (op: claim,
	// read, prune); StoreOK with every answered one.
	StoreError func(op string, err error)
	StoreOK    func(op string)
	// Missed is called when n slots of job were not run, with the reason
	// (ReasonLate, ReasonCatchUp, ReasonStoreUnreachable,
	// ReasonStoreRefused).
	Missed func(job, reason string, n int)
	// Finished is called with the report of every execution.
	Finished func(job string, slot time.Time, rep runner.Report)
	// Adopted is called once the start's read of every job's newest runs
	// (and, on lease backends, its adoption of the runs left running) is
	// over: jobs is how many jobs it read.
	Adopted func(jobs int)
	// Paused is called when a job's pause begins (true) or ends (false)
	// on this instance (pause.go).
	Paused func(job string, paused bool)
	// Triggered is called when this instance picks up a trigger of job
	// (kind: claim.TriggerManual or claim.TriggerRetry) to claim its run.
	Triggered func(job, kind string)
	// Retried is called when an attempt of job ended failed or timeout
	// with retries left: result is RetryScheduled, RetryNotWritten or
	// RetryPastNextSlot (retry.go).
	Retried func(job, result string)
}

// Options configure a Scheduler.
type Options struct {
	Backend  claim.Backend
	Clock    clock.Clock
	Log      *zap.Logger
	Instance string
	Executor Executor
	Hooks    Hooks
	// ClaimConcurrency bounds the claims in flight at once (default 16).
	ClaimConcurrency int
	// Unbatched sends every claim on its own even when the backend is a
	// claim.Batcher (by default the claims due together go in batches).
	Unbatched bool
	// ClaimTimeout bounds one claim request (default 10s).
	ClaimTimeout time.Duration
	// ShutdownGrace is how long running commands may finish after the
	// scheduler's context is cancelled, before they are stopped.
	ShutdownGrace time.Duration
	// StopWindow bounds, from the stop, the settling of the runs that
	// never started: a claim in flight awaits its answer, and a won run
	// not started is released (lease stores) or recorded interrupted
	// (claim-only stores), within it (default 5s). See stop.go.
	StopWindow time.Duration
	// Retention, when positive and the backend is a claim.Pruner, prunes
	// runs older than it every PruneEvery (default retention/24, within
	// [1m, 1h]).
	Retention  time.Duration
	PruneEvery time.Duration
	// MaxWait caps one wait of the timer so that a wall-clock step is
	// noticed within it (default 30s).
	MaxWait time.Duration
	// ControlPoll is how often the jobs' control records (pauses) are
	// read when the backend is a claim.Controller (the daemon's:
	// DefaultControlPoll); 0 reads none, and no pause is honoured.
	ControlPoll time.Duration
	// Drifting, if set, reports whether the live instances define a job
	// differently: a job with onDrift: pause is then not claimed
	// (drift.go).
	Drifting func(job string) bool
}

// Scheduler claims and runs the slots of a set of jobs.
type Scheduler struct {
	o      Options
	leaser claim.Leaser // nil for claim-only backends
	sem    chan struct{}
	reload chan []*entry
	health health
	jobs   []*entry // the jobs Run starts with
	// lastBatch is closed when the job's latest batch of claims is sent;
	// only the Run loop touches it.
	lastBatch map[string]chan struct{}
	// running counts the executions in progress on this instance: the load
	// that weights the work spread.
	running atomic.Int64
	// batch sends the claims of a claim.Batcher in batches; nil when the
	// backend decides one claim per round trip.
	batch *coalescer
	// prep sends the preparations of a claim.Preparer; nil for the others.
	prep *preparer
	// peers are the other instances seen holding runs: the work spread
	// ranks this instance among them.
	peers peers
	// decided is closed once the start has decided every job's catch-up
	// from the store's answer.
	decided chan struct{}
	// drain is done StopWindow after the stop (endDrain): it bounds the
	// calls that settle the stop (stop.go). Set by Run before anything
	// uses it.
	drain    context.Context
	endDrain context.CancelFunc
	// notes records the slots no attempt ran (notes.go).
	notes *notes
	// pauses are the jobs' control records as last read (pause.go).
	pauses *pauses
	// hooks starts the jobs' hooks (hooks.go).
	hooks *hooks
	// trig picks up the runs asked for outside the schedule (trigger.go).
	trig *triggers
	// keep are the jobs with keepRuns (keep.go).
	keep *keeper
}

// New checks the jobs' schedules and returns a scheduler for them.
func New(o Options, jobs []config.Job) (*Scheduler, error) {
	if o.Backend == nil || o.Clock == nil || o.Executor == nil {
		return nil, errors.New("scheduler: backend, clock and executor are required")
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	orDefault(&o.ClaimConcurrency, 16)
	orDefault(&o.ClaimTimeout, 10*time.Second)
	orDefault(&o.MaxWait, 30*time.Second)
	orDefault(&o.StopWindow, defaultStopWindow)
	orDefault(&o.PruneEvery, min(max(o.Retention/24, time.Minute), time.Hour))
	entries, err := entriesOf(jobs, o.Instance)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{
		o:         o,
		sem:       make(chan struct{}, o.ClaimConcurrency),
		reload:    make(chan []*entry),
		jobs:      entries,
		lastBatch: map[string]chan struct{}{},
		decided:   make(chan struct{}),
	}
	s.health.log, s.health.clock, s.health.hooks = o.Log, o.Clock, &s.o.Hooks
	s.leaser, _ = o.Backend.(claim.Leaser)
	s.trig = newTriggers(entries, s.leaser != nil)
	if b, ok := o.Backend.(claim.Batcher); ok && !o.Unbatched {
		s.batch = newCoalescer(b)
	}
	s.prep = newPreparer(o.Backend)
	s.notes = newNotes(o.Backend)
	s.pauses = newPauses(o.Backend, o.ControlPoll)
	s.hooks = newHooks(o.Executor, entries)
	s.peers.log = o.Log
	s.keep = newKeeper()
	s.keep.set(entries)
	return s, nil
}

// orDefault sets *v to d when it is not positive (an option left unset).
func orDefault[T ~int | ~int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// entriesOf parses the jobs' schedules. A perInstance job is scheduled
// under its key (config.Job.Key): its claims, notes and reads name the key,
// so each instance claims its own run of every slot.
func entriesOf(jobs []config.Job, instance string) ([]*entry, error) {
	entries := make([]*entry, 0, len(jobs))
	for _, j := range jobs {
		sc, err := schedule.Parse(j.Schedule, j.Location)
		if err != nil {
			return nil, fmt.Errorf("job %q: %w", j.Name, err)
		}
		j.Name = j.Key(instance)
		entries = append(entries, &entry{job: j, sched: sc})
	}
	return entries, nil
}

// Reload replaces the jobs. Jobs whose schedule, zone and maxLate did not
// change keep their place; new and changed jobs start after the last instant
// the scheduler has dispatched, so no slot that was due is dropped. Running
// executions are not disturbed. It returns once the loop has taken the new
// set, or ctx is done.
func (s *Scheduler) Reload(ctx context.Context, jobs []config.Job) error {
	entries, err := entriesOf(jobs, s.o.Instance)
	if err != nil {
		return err
	}
	select {
	case s.reload <- entries:
		s.trig.setJobs(entries)
		s.keep.set(entries)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run schedules the jobs until ctx is cancelled, then stops claiming, lets
// running commands finish for up to ShutdownGrace, stops the rest (their
// leases released) and returns. Run may be called once.
func (s *Scheduler) Run(ctx context.Context) error {
	runCtx, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	s.drain, s.endDrain = context.WithCancel(context.WithoutCancel(ctx))
	defer s.endDrain()
	var wg sync.WaitGroup
	s.startLoops(ctx, runCtx, &wg)
	s.loop(ctx, runCtx, &wg)
	s.awaitRuns(&wg, stopRuns)
	return nil
}

// startLoops starts, under wg, the loops that run beside the slots' timer:
// pruning, keepRuns, notes, triggers and the reads of the jobs' control
// records. The controls are read once before it returns, so that a pause is
// honoured from the first slot dispatched. Hooks started later run under
// runCtx and wg too.
func (s *Scheduler) startLoops(ctx, runCtx context.Context, wg *sync.WaitGroup) {
	s.hooks.ctx, s.hooks.wg = runCtx, wg
	if p, ok := s.o.Backend.(claim.Pruner); ok && s.o.Retention > 0 {
		wg.Go(func() { s.pruneLoop(ctx, p) })
	}
	if p, ok := s.o.Backend.(claim.CountPruner); ok {
		wg.Go(func() { s.keepLoop(ctx, p) })
	}
	if s.notes.rec != nil {
		wg.Go(func() { s.recordNotes(ctx) })
	}
	s.trig.bind(ctx, runCtx, wg)
	if s.pauses.ctl != nil {
		first := s.o.Clock.Now()
		s.readControls(ctx) // before the first slot is dispatched
		wg.Go(func() { s.pollControls(ctx, first) })
	}
}

// loop is Run's loop until ctx is cancelled: it dispatches the slots that
// are due, sends the preparations that are due, and waits for the next of
// them, the start's answers or a reload. It alone touches the heap and
// lastBatch.
func (s *Scheduler) loop(ctx, runCtx context.Context, wg *sync.WaitGroup) {
	h := &slotHeap{}
	start := s.o.Clock.Now()
	st := s.beginStart(ctx, runCtx, wg, h, start)
	cursor := start // every slot at or before cursor has been dispatched
	for ctx.Err() == nil {
		now := s.o.Clock.Now()
		st.expire(h, now)
		if h.Len() > 0 && !(*h)[0].due().After(now) {
			s.dispatchDue(ctx, runCtx, wg, h, now)
			cursor = now
			continue
		}
		s.sendDue(ctx, wg, now)
		// Armed at the instant, not after a duration from now: time that
		// passes before the timer is armed is not added to the wait.
		timer := clock.NewTimerAt(s.o.Clock, s.wake(h, st, now))
		select {
		case <-ctx.Done():
		case <-timer.C():
		case r := <-st.results:
			st.decide(h, r)
		case fresh := <-s.reload:
			h = s.replace(h, fresh, cursor)
			st.forget()
		}
		timer.Stop()
	}
}

// wake is when the loop next has work, at most MaxWait after now (so that a
// wall-clock step is noticed): the earliest of the next claim due, the next
// preparation due and the instant a held job's catch-up is given up
// (start.go).
func (s *Scheduler) wake(h *slotHeap, st *starter, now time.Time) time.Time {
	wake := now.Add(s.o.MaxWait)
	if h.Len() > 0 && (*h)[0].due().Before(wake) {
		wake = (*h)[0].due()
	}
	for _, w := range []time.Time{s.prep.wake(), st.wake()} {
		if !w.IsZero() && w.Before(wake) {
			wake = w
		}
	}
	return wake
}

// awaitRuns is the stop once no new claim is sent: it opens the stop's
// window, waits up to ShutdownGrace for everything started under wg, then
// stops the runs still going (stopRuns: their leases are released) and
// waits for them to end.
func (s *Scheduler) awaitRuns(wg *sync.WaitGroup, stopRuns context.CancelFunc) {
	s.o.Log.Info("stopping: no new claims; waiting for running jobs", zap.Duration("grace", s.o.ShutdownGrace))
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := s.o.Clock.NewTimer(s.o.ShutdownGrace)
	defer grace.Stop()
	s.openStopWindow()
	select {
	case <-done:
		return
	case <-grace.C():
	}
	if n := s.running.Load(); n > 0 {
		s.o.Log.Warn("shutdown grace over: stopping running jobs and releasing their leases", zap.Int64("jobs", n))
	}
	stopRuns()
	<-done
}

// replace swaps the heap's entries for fresh, keeping the place of jobs
// whose timing did not change.
func (s *Scheduler) replace(h *slotHeap, fresh []*entry, cursor time.Time) *slotHeap {
	old := map[string]*entry{}
	for _, e := range *h {
		old[e.job.Name] = e
	}
	nh := &slotHeap{}
	for _, e := range fresh {
		if o, ok := old[e.job.Name]; ok && o.job.Schedule == e.job.Schedule &&
			o.job.Timezone == e.job.Timezone && o.job.MaxLate == e.job.MaxLate && o.job.Jitter == e.job.Jitter {
			e.next = o.next
		} else {
			e.next = firstAfter(e.job, e.sched, cursor)
		}
		if !e.next.IsZero() {
			heap.Push(nh, e)
		}
	}
	s.prep.reset(nh)
	s.hooks.setJobs(fresh)
	s.o.Log.Info("crontab reloaded", zap.Int("jobs", len(fresh)))
	return nh
}

// dispatchDue starts a claim for every slot whose claim is due at now
// (claimAhead before the slot).
//
// Jobs are claimed concurrently; the slots of one job are claimed one after
// the other in slot order (those due together after a pause or at start,
// and a slot whose claim is still being re-sent when the next comes due),
// and run concurrently. On a store that orders claims by slot (Redis
// stream-id) an earlier slot claimed after a later one would be lost; on
// every store, a job's claims keep their order.
func (s *Scheduler) dispatchDue(ctx, runCtx context.Context, wg *sync.WaitGroup, h *slotHeap, now time.Time) {
	type batch struct {
		job   config.Job
		sched schedule.Schedule
		slots []time.Time
	}
	var batches []*batch
	byJob := map[string]*batch{}
	for h.Len() > 0 && !(*h)[0].due().After(now) {
		e := (*h)[0]
		slot := e.next
		switch {
		case now.Sub(slot) > lateFor(e.job, slot):
			e.next = s.skipMissed(e, slot, now)
		case s.skipPaused(e.job.Name, slot), s.skipDrift(e.job, slot):
			e.next = e.sched.Next(slot)
		default:
			b := byJob[e.job.Name]
			if b == nil {
				b = &batch{job: e.job, sched: e.sched}
				byJob[e.job.Name] = b
				batches = append(batches, b)
			}
			b.slots = append(b.slots, slot)
			e.next = e.sched.Next(slot)
		}
		if e.next.IsZero() {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
			s.prep.add(e)
		}
	}
	for _, b := range batches {
		prev, done := s.lastBatch[b.job.Name], make(chan struct{})
		s.lastBatch[b.job.Name] = done
		wg.Go(func() {
			defer close(done)
			if prev != nil {
				<-prev // the job's earlier slots are claimed first
			}
			for _, slot := range b.slots {
				// The spread delays the first send only: re-sends (same
				// token) and a backup's takeover claims are never held
				// back. Sleeping here keeps the job's claims in slot
				// order and holds no claim slot of the semaphore.
				if s.holdBack(ctx, b.job, slot) != nil {
					return // the stop began: no new claims
				}
				c, ok := s.claimFirst(ctx, b.job, slot, overlapHold(b.job, b.sched, slot))
				if ctx.Err() != nil && !ok {
					return
				}
				wg.Go(func() { s.follow(ctx, runCtx, b.job, slot, c, ok) })
			}
		})
	}
}

// SpreadDelay is the work-spread delay of instance's first claim of (job,
// slot) when the job's claimSpread is spread: FNV-1a 64 of
// "instance\x00job\x00slot_ms" modulo spread+1, in microseconds, so within
// [0, spread]. Every instance computes a different, fixed delay for each
// slot, so the instance that claims first, and wins, changes from slot to
// slot instead of being the one whose timer happens to fire first. 0
// disables it.
func SpreadDelay(instance, job string, slotMs int64, spread time.Duration) time.Duration {
	us := spread.Microseconds()
	if us <= 0 {
		return 0
	}
	h := fnv.New64a()
	b := make([]byte, 0, len(instance)+len(job)+22)
	b = append(append(append(append(b, instance...), 0), job...), 0)
	b = strconv.AppendInt(b, slotMs, 10)
	h.Write(b)
	return time.Duration(h.Sum64()%uint64(us+1)) * time.Microsecond
}

// weightedDelay adds the load weight to a spread delay d: running/4 of the
// spread per execution in progress on this instance, the total capped at
// twice the spread, so that a busy instance lets an idle one claim first.
// The weight never pushes a delay beyond half of maxLate: it is a
// preference and must not make the slot late.
func weightedDelay(d time.Duration, running int64, spread, maxLate time.Duration) time.Duration {
	if running <= 0 || spread <= 0 {
		return d
	}
	w := min(d+time.Duration(min(running, 8))*(spread/4), 2*spread)
	return max(d, min(w, maxLate/2))
}

// holdBack waits, before the first claim of (job, slot), until the claim's
// due time (claimAhead before the slot) plus this instance's spread delay
// (by the injected clock). The wait is counted from the slot, not from the
// timer's firing: a late timer (a loaded host) is absorbed, not added, and
// a slot claimed late (catch-up after a pause or at start) is past its
// delay already and is claimed at once. It returns ctx's error if the stop
// began meanwhile.
//
// A perInstance job's claims are never held back: no other instance
// claims its key, so there is no race to spread.
func (s *Scheduler) holdBack(ctx context.Context, job config.Job, slot time.Time) error {
	if job.ClaimSpread <= 0 || job.PerInstance {
		return nil
	}
	return clock.SleepUntil(ctx, s.o.Clock, startOf(job, slot).Add(s.spreadDelay(job, slot)-job.ClaimAhead))
}

// spreadDelay is this instance's work-spread delay before its first claim
// of (job, slot): its rank's among the peers it knows (its own delay when
// it knows none), plus the weight of the executions in progress here.
func (s *Scheduler) spreadDelay(job config.Job, slot time.Time) time.Duration {
	d := RankedDelay(s.o.Instance, s.peers.live(s.o.Clock.Now()), job.Name, slot.UnixMilli(), job.ClaimSpread)
	return weightedDelay(d, s.running.Load(), job.ClaimSpread, job.MaxLate)
}

// maxMissedWalk bounds the slots counted one by one after a long pause or a
// clock jump; beyond it the count is a lower bound.
const maxMissedWalk = 10000

// skipMissed logs and counts the slots of e from first on that are older
// than maxLate at now, and returns the first slot that is not.
func (s *Scheduler) skipMissed(e *entry, first, now time.Time) time.Time {
	n, last, next := 1, first, e.sched.Next(first)
	for !next.IsZero() && now.Sub(next) > lateFor(e.job, next) {
		if n == maxMissedWalk {
			next = firstAfter(e.job, e.sched, now.Add(-e.job.MaxLate))
			break
		}
		n, last, next = n+1, next, e.sched.Next(next)
	}
	s.o.Log.Warn("missed: slots older than maxLate were not claimed",
		zap.String("job", e.job.Name), zap.Int("slots", n), zap.String("reason", ReasonLate),
		zap.Time("first", first), zap.Time("last", last), zap.Duration("maxLate", e.job.MaxLate))
	s.countMissed(e.job.Name, ReasonLate, n)
	s.noteSpan(e.job.Name, e.sched, span{n: n, first: first, last: last}, ReasonLate)
	return next
}

// follow acts on the answer to a claim of (job, slot): run it when won,
// watch it as a backup when another instance holds its lease.
func (s *Scheduler) follow(ctx, runCtx context.Context, job config.Job, slot time.Time, c answered, ok bool) {
	for ok {
		switch c.res.Outcome {
		case claim.Won:
			if s.execute(ctx, runCtx, job, c) || s.leaser == nil {
				return
			}
			// The attempt ended with its result unrecorded: the runner
			// fenced itself (no renewal within the lease), or a backup
			// took the run over, or the result could not be written. The
			// run may now be running with an expired lease and no other
			// instance watching it (the backups may have died meanwhile):
			// this instance watches it as a backup does, until another
			// attempt ends it or the store marks it interrupted.
			c, ok = s.watch(ctx, job, slot, watchBackup)
		case claim.Running:
			if s.leaser == nil {
				return
			}
			c, ok = s.watch(ctx, job, slot, watchBackup)
		case claim.Overlap:
			// Skipped because another run of the job was live, when
			// the note of it stands. Otherwise another instance won
			// the slot first, or may still win it within maxLate (its
			// claim came after that run ended, the note unrecorded):
			// watch it too, so that such a run has backups.
			if s.skipped(ctx, job, slot) || s.leaser == nil {
				return
			}
			c, ok = s.watch(ctx, job, slot, watchPending)
		case claim.Late:
			// Nobody claimed the slot within maxLate: a slot missed, as
			// one older than maxLate before its claim is.
			s.countMissed(job.Name, ReasonLate, 1)
			s.note(job.Name, slot, claim.StatusMissed, ReasonLate)
			return
		case claim.Unknown:
			s.note(job.Name, slot, claim.StatusUnknown, reasonNoDecision)
			return
		default:
			return
		}
	}
}

// answered is a claim and its answer.
type answered struct {
	req claim.Request
	res claim.Result
	// leaseStart is the local instant from which the runner counts the
	// job's full lease: the send of the answered request, moved earlier
	// when the store answered with less than a full lease left (a re-sent
	// claim finding the lease its first copy took). The store computed its
	// answer after that send, so the local end it gives is never late.
	leaseStart time.Time
}

// held reports whether a first claim's answer is provisional: it found the
// job's previous run live (overlap: skip) before hold, the end of the
// slot's overlap hold (overlapHold). That run may still end in time: the
// claim is asked again (nothing was written: the same token).
func (c answered) held(hold time.Time) bool {
	return c.res.Outcome == claim.Overlap && c.req.Now.Before(hold)
}

// Overlap hold: a slot that finds the job's previous run live is asked
// again until that run ends, first at the slot (a claim sent ahead), then
// every overlapPoll, doubling up to overlapPollMax.
const (
	overlapPoll    = 50 * time.Millisecond
	overlapPollMax = 500 * time.Millisecond
)

// overlapHold is until when a slot of job that finds the previous run live
// waits for it to end: until the job's next slot is claimed, at most
// maxLate after the slot, never before the slot itself (overlap is decided
// at the slot, as without the head start). With overlap skip two runs never
// overlap; a run that ends a moment after the next slot (a fork on a
// starved machine, a result recorded late) delays that slot instead of
// costing it, as Kubernetes' Forbid starts a missed run once the active one
// is gone, within its startingDeadlineSeconds.
//
// With jitter every instant is the run's start: maxLate after the start,
// the next slot's claim before its own start, never before this start.
func overlapHold(job config.Job, sc schedule.Schedule, slot time.Time) time.Time {
	if claim.OverlapPolicy(job.Overlap) == claim.OverlapQueue {
		return queueHold(job, sc, slot)
	}
	start := startOf(job, slot)
	hold := start.Add(job.MaxLate)
	if next := sc.Next(slot); !next.IsZero() && startOf(job, next).Add(-job.ClaimAhead).Before(hold) {
		hold = startOf(job, next).Add(-job.ClaimAhead)
	}
	if hold.Before(start) {
		return start
	}
	return hold
}

// claimFirst sends the first claim of (job, slot) with a fresh token and
// asks again while its answer is held (overlap before hold): at the slot,
// then polling with backoff. It returns the slot's answer, or ok=false when
// the stop began or the claim got no answer.
func (s *Scheduler) claimFirst(ctx context.Context, job config.Job, slot, hold time.Time) (answered, bool) {
	tok := claim.NewToken()
	start := startOf(job, slot)
	c, ok := s.claimRetrying(ctx, job, slot, tok, hold)
	w := s.holderWatch(job, slot)
	for poll := overlapPoll; ok && c.held(hold); {
		at := start
		if !c.req.Now.Before(start) || (w != nil && !s.o.Clock.Now().Before(start)) {
			if at = s.o.Clock.Now().Add(poll); at.After(hold) {
				at = hold
			}
			poll = min(2*poll, overlapPollMax)
		}
		if clock.SleepUntil(ctx, s.o.Clock, at) != nil {
			return answered{}, false
		}
		if w.live(ctx, hold) {
			continue // overlap: queue: the holder still runs, by a plain read
		}
		c, ok = s.claimRetrying(ctx, job, slot, tok, hold)
	}
	return c, ok
}

// claimRetrying sends one claim and re-sends it with the same token after a
// transport error, with backoff, until it is answered, ctx is done, or (for
// a first claim) the slot is late. A refusal (claim.PermanentError) is not
// re-sent: the slot is missed, store_refused. A backup's takeover claim is re-sent
// too, never replaced by a fresh one: its first copy may have won the run
// with the answer lost (a connection whose replies are dropped), and only
// its own token learns that and runs it; a fresh token would find the run
// held by that lost attempt and wait out its whole lease before taking it
// over again.
//
// hold marks a first claim: the end of the slot's overlap hold, before
// which an overlap answer is provisional (not counted, logged at debug). A
// backup's takeover claim passes the zero time.
func (s *Scheduler) claimRetrying(ctx context.Context, job config.Job, slot time.Time, tok claim.Token, hold time.Time) (answered, bool) {
	r := s.newResender(job, slot, tok, hold)
	for {
		r.req.Now = s.o.Clock.Now()
		res, took, err := s.claimOnce(ctx, r.req, s.callTimeout(job))
		if err == nil {
			return r.answer(res, took), true
		}
		if !r.again(ctx, err) {
			return answered{}, false
		}
	}
}

// resender is one claim of claimRetrying, sent and re-sent with the same
// token: the request, and what its sends so far have left.
type resender struct {
	s     *Scheduler
	job   config.Job
	slot  time.Time
	hold  time.Time // zero for a backup's takeover claim
	first bool      // a first claim: hold is set
	req   claim.Request
	log   *zap.Logger
	// backoff is the base of the wait before the next re-send.
	backoff time.Duration
	sent    bool // a copy was sent and got no answer
}

// newResender builds the request of a claim of (job, slot) with token tok,
// and the logger that names it.
func (s *Scheduler) newResender(job config.Job, slot time.Time, tok claim.Token, hold time.Time) *resender {
	return &resender{
		s: s, job: job, slot: slot, hold: hold, first: !hold.IsZero(),
		req: claim.Request{
			Job: job.Name, Slot: slot.UnixMilli(), Token: tok, Instance: s.o.Instance,
			MaxLate: claimMaxLate(job, slot, hold), Lease: job.Lease, MaxAttempts: job.MaxAttempts,
			Overlap: claim.OverlapPolicy(job.Overlap),
		},
		log: s.o.Log.With(zap.String("job", job.Name), zap.Time("slot", slot),
			zap.String("instance", s.o.Instance), zap.String("token", tok.Short())),
		backoff: 100 * time.Millisecond,
	}
}

// answer takes the store's answer res (took to come) to the request last
// sent: it notes the holder as a peer, counts and logs the answer unless it
// is provisional (held), and sets the instant the run's lease counts from.
func (r *resender) answer(res claim.Result, took time.Duration) answered {
	s := r.s
	s.health.ok("claim")
	if res.Holder != "" && res.Holder != s.o.Instance {
		// Another instance holds the run, or ran it: a peer.
		s.peers.saw(res.Holder, s.o.Clock.Now())
	}
	c := answered{req: r.req, res: res}
	if r.first && c.held(r.hold) {
		// Not this slot's answer yet: the caller asks again,
		// and the last answer is the one counted.
		r.log.Debug("claim found the job's previous run live; asking again until it ends or the hold is over")
		return c
	}
	if s.o.Hooks.Claimed != nil {
		s.o.Hooks.Claimed(config.JobOfKey(r.job.Name), r.slot, res, took)
	}
	logAnswer(r.log, res)
	c.leaseStart = r.req.Now
	if !res.LeaseUntil.IsZero() && !res.StoreNow.IsZero() {
		if left := res.LeaseUntil.Sub(res.StoreNow); left < r.job.Lease {
			c.leaseStart = c.leaseStart.Add(left - r.job.Lease)
		}
	}
	return c
}

// again takes a send that got no answer (err) and reports whether to
// re-send: not once the stop began, nor after a refusal, nor (for a first
// claim) past resendFor; otherwise it waits the backoff first, jittered,
// and doubles it up to 2s.
func (r *resender) again(ctx context.Context, err error) bool {
	s, job, slot := r.s, r.job, r.slot
	if ctx.Err() != nil {
		// The stop began: a copy sent and left unanswered may have
		// won the run.
		if r.sent = r.sent || !errors.Is(err, errNotSent); r.sent {
			s.unanswered(r.req, err)
		}
		return false
	}
	r.sent = true
	s.health.failed("claim", err)
	if claim.IsPermanent(err) {
		// An answer: the store refused it, and would refuse it
		// again. health logged the cause and the fix.
		s.countMissed(job.Name, ReasonStoreRefused, 1)
		s.note(job.Name, slot, claim.StatusMissed, ReasonStoreRefused)
		return false
	}
	if r.first && s.o.Clock.Now().Sub(slot) > s.resendFor(job, slot) {
		r.log.Warn("claim abandoned: no answer from the store within maxLate of the slot (a lease more on a lease store)", zap.Error(err))
		s.countMissed(job.Name, ReasonStoreUnreachable, 1)
		s.note(job.Name, slot, claim.StatusMissed, ReasonStoreUnreachable)
		return false
	}
	wait := r.backoff/2 + rand.N(r.backoff/2+1)
	r.log.Debug("claim got no answer; re-sending with the same token", zap.Error(err), zap.Duration("after", wait))
	if clock.Sleep(ctx, s.o.Clock, wait) != nil {
		s.unanswered(r.req, err)
		return false
	}
	r.backoff = min(r.backoff*2, 2*time.Second)
	return true
}

// logAnswer logs a claim's answer at the level an operator needs: a slot
// lost (late: nobody claimed it within maxLate; unknown: the store gave no
// decision) is a warning, once per instance, on every backend; a win and an
// overlap skip are info; the routine outcomes of a race lost to another
// instance (running, done, lost) are debug.
func logAnswer(log *zap.Logger, res claim.Result) {
	fields := []zap.Field{zap.String("outcome", string(res.Outcome))}
	switch res.Outcome {
	case claim.Won:
		log.Info("claim", append(fields, zap.Int("attempt", res.Attempt))...)
	case claim.Overlap:
		log.Info("claim", fields...)
	case claim.Late, claim.Unknown:
		log.Warn("claim", append(fields, zap.String("lost", lossReason[res.Outcome]))...)
	default:
		log.Debug("claim", fields...)
	}
}

// lossReason says why a claim answered late or unknown lost its slot.
var lossReason = map[claim.Outcome]string{
	claim.Late:    "slot not run: nobody claimed it within maxLate of the slot",
	claim.Unknown: "slot not run: the store gave no decision",
}

// resendFor is how long after its slot a first claim with no answer is
// still re-sent. maxLate: after it, the store answers late to a copy when
// none landed before. On a lease store, a lease more: a copy that landed
// in time may have won the run with its answer lost (replies dropped on
// the way back), and only the same token learns that. Given up at maxLate,
// the run would be held by nobody until that lease ended and a backup took
// it over, a whole lease late. Past it, such a copy's lease has run out
// and the runner would not start on it anyway.
//
// Both count from the run's start: maxLate is lateFor's.
func (s *Scheduler) resendFor(job config.Job, slot time.Time) time.Duration {
	if s.leaser == nil {
		return lateFor(job, slot)
	}
	return lateFor(job, slot) + job.Lease
}

// callTimeout bounds one claim or read of job's runs: the job's heartbeat,
// at least a second, at most ClaimTimeout. A call stuck on a connection
// whose replies are lost is sent again on a fresh one instead of holding a
// connection that the renewals of running jobs need, and instead of
// stopping a backup's watch for good.
func (s *Scheduler) callTimeout(job config.Job) time.Duration {
	return min(s.o.ClaimTimeout, max(job.Heartbeat, time.Second))
}

// claimOnce sends one claim within the concurrency bound and the timeout
// (callTimeout). A claim is not sent once ctx is done (errNotSent); one
// sent before is awaited after it, within the stop's window (stop.go).
func (s *Scheduler) claimOnce(ctx context.Context, req claim.Request, timeout time.Duration) (claim.Result, time.Duration, error) {
	if s.batch != nil {
		// Batches bound the claims in flight themselves.
		cctx, cancel := context.WithTimeout(s.drain, timeout)
		defer cancel()
		t0 := s.o.Clock.Now()
		res, err := s.batch.claimBefore(cctx, ctx, req)
		return res, s.o.Clock.Now().Sub(t0), err
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return claim.Result{}, 0, errNotSent
	}
	defer func() { <-s.sem }()
	if ctx.Err() != nil {
		return claim.Result{}, 0, errNotSent
	}
	cctx, cancel := context.WithTimeout(s.drain, timeout)
	defer cancel()
	t0 := s.o.Clock.Now()
	res, err := s.o.Backend.Claim(cctx, req)
	return res, s.o.Clock.Now().Sub(t0), err
}

// watchKind says why an instance watches a run.
type watchKind int

const (
	// watchBackup: this instance's claim was answered "running".
	watchBackup watchKind = iota
	// watchPending: the slot was skipped here for overlap; the run may not
	// exist yet (another instance may still win the slot).
	watchPending
	// watchAdopted: the run was found running at this instance's start,
	// older than the start's catch-up; no instance may be watching it.
	watchAdopted
)

// watch is a backup's loop over a run another instance holds: every
// heartbeat it reads the run (no lock; each read bounded by callTimeout),
// and claims it again with a fresh
// token once the lease has expired. It returns the answer of such a claim,
// or ok=false when the run is finished or ctx is done. With watchPending
// the run may not exist yet: the watch goes on while another instance
// could still win the slot, until store now is past slot + maxLate. With
// watchAdopted the first read is made at once, and a lease found ended
// more than maxLate before it is not taken over: the claim is sent with no
// attempts left, so the store marks the run interrupted (docs/spec.md#s3-1),
// as a slot never claimed within maxLate is missed rather than run late.
func (s *Scheduler) watch(ctx context.Context, job config.Job, slot time.Time, kind watchKind) (answered, bool) {
	// adopting: no read of the run has succeeded yet on an adopted watch.
	adopting := kind == watchAdopted
	for first := true; ; first = false {
		if !(first && adopting) && clock.Sleep(ctx, s.o.Clock, job.Heartbeat) != nil {
			return answered{}, false
		}
		rctx, cancel := context.WithTimeout(ctx, s.callTimeout(job))
		run, now, err := s.leaser.Read(rctx, job.Name, slot.UnixMilli())
		cancel()
		switch {
		case errors.Is(err, claim.ErrNotFound):
			if kind == watchPending && !now.IsZero() && now.Sub(slot) <= lateFor(job, slot) {
				s.health.ok("read")
				continue
			}
			return answered{}, false
		case err != nil:
			if ctx.Err() != nil {
				return answered{}, false
			}
			s.health.failed("read", err)
			continue
		}
		s.health.ok("read")
		adopted := adopting
		adopting = false
		if run.Status.Final() {
			return answered{}, false
		}
		if !run.LeaseUntil.Before(now) {
			continue
		}
		j := job
		if adopted && now.Sub(run.LeaseUntil) > job.MaxLate {
			s.o.Log.Warn("abandoned run: its lease ended more than maxLate ago with no instance to take it over; marking it interrupted, not running it again",
				zap.String("job", job.Name), zap.Time("slot", slot), zap.Int("attempt", run.Attempt),
				zap.String("instance", run.Instance), zap.Time("lease_until", run.LeaseUntil),
				zap.Duration("maxLate", job.MaxLate))
			j.MaxAttempts = run.Attempt
			s.countMissed(job.Name, ReasonLate, 1)
		}
		c, ok := s.claimRetrying(ctx, j, slot, claim.NewToken(), time.Time{})
		if ok && c.res.Outcome != claim.Running {
			return c, true
		}
	}
}

// execute runs a won attempt at its slot. A win that arrives after the
// stop began, or before its slot when the stop begins, is not started: it
// is released at once so that another instance can take it, or recorded
// interrupted on a claim-only store (unstarted). It reports whether the
// run needs nothing more from this instance: the result was recorded, or
// the stop began.
func (s *Scheduler) execute(ctx, runCtx context.Context, job config.Job, c answered) bool {
	fence := c.req.Fence(c.res.Attempt)
	// A claim sent ahead of its slot was won before it: the command starts
	// at the slot (plus its jitter), as it would have without the head
	// start. A stop that comes at that instant comes first.
	if clock.SleepUntil(ctx, s.o.Clock, startOf(job, c.req.SlotTime())) != nil || ctx.Err() != nil {
		s.unstarted(job, c)
		return true
	}
	s.running.Add(1)
	defer s.running.Add(-1)
	// The job is run under its own name (ANARCHON_JOB); the fence names
	// the key its run was claimed under.
	named := job
	named.Name = config.JobOfKey(job.Name)
	e := runner.Execution{
		Job: named, Fence: fence, Slot: c.req.SlotTime(), LeaseUntil: c.res.LeaseUntil, ClaimedAt: c.leaseStart,
		Replace: s.replacerOf(named),
	}
	if tr, ok := s.triggerOf(job.Name, c.req.Slot); ok {
		e.Trigger = &tr
	}
	rep := s.o.Executor.Run(runCtx, e)
	if s.o.Hooks.Finished != nil {
		s.o.Hooks.Finished(named.Name, c.req.SlotTime(), rep)
	}
	if !s.scheduleRetry(ctx, job, e.Trigger, c.req.Slot, rep) {
		// The outcome is final: no retry follows.
		s.afterRun(named, e, rep)
	}
	return rep.Recorded || ctx.Err() != nil
}

// pruneLoop deletes old finished runs every PruneEvery, each prune bounded
// by that interval (at least ClaimTimeout): one whose reply was lost is
// sent again at the next turn instead of ending the pruning for good.
func (s *Scheduler) pruneLoop(ctx context.Context, p claim.Pruner) {
	for clock.Sleep(ctx, s.o.Clock, s.o.PruneEvery) == nil {
		pctx, cancel := context.WithTimeout(ctx, max(s.o.PruneEvery, s.o.ClaimTimeout))
		n, err := p.Prune(pctx, s.o.Retention)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.health.failed("prune", err)
			}
			continue
		}
		s.health.ok("prune")
		if n > 0 {
			s.o.Log.Info("pruned old runs", zap.Int64("runs", n), zap.Duration("retention", s.o.Retention))
		}
	}
}

// health logs a store outage once when it starts and once when it ends,
// not on every retry. An outage ends when the store answers and nothing has
// failed for healthSettle: a lossy store whose fresh connections succeed
// while stuck ones fail is one outage, not many. A refusal
// (claim.PermanentError) is no outage: it is logged as an error once per
// cause, with its fix, however many slots it refuses.
type health struct {
	log      *zap.Logger
	clock    clock.Clock
	hooks    *Hooks
	mu       sync.Mutex
	down     bool
	since    time.Time // when the outage began
	lastFail time.Time
	refused  map[string]bool // the refusals logged, by cause and fix
}

// healthSettle is how long the store must answer without a failure before
// an outage is reported over.
const healthSettle = 3 * time.Second

func (h *health) failed(op string, err error) {
	if h.hooks.StoreError != nil {
		h.hooks.StoreError(op, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if p, ok := claim.AsPermanent(err); ok {
		h.refusedOnce(op, p, err)
		return
	}
	h.lastFail = h.clock.Now()
	if !h.down {
		h.down, h.since = true, h.lastFail
		h.log.Warn("store unreachable; retrying", zap.String("op", op), zap.Error(err))
	}
}

// refusedOnce logs the refusal err (p) once per cause and fix; h.mu is
// held.
func (h *health) refusedOnce(op string, p *claim.PermanentError, err error) {
	key := p.Store + "\x00" + p.Cause + "\x00" + p.Fix
	if h.refused[key] {
		return
	}
	if h.refused == nil {
		h.refused = map[string]bool{}
	}
	h.refused[key] = true
	h.log.Error("store refused; not retried: the slots it refuses are missed until this is fixed",
		zap.String("op", op), zap.String("store", p.Store), zap.String("cause", p.Cause),
		zap.String("fix", p.Fix), zap.Error(err))
}

func (h *health) ok(op string) {
	if h.hooks.StoreOK != nil {
		h.hooks.StoreOK(op)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if now := h.clock.Now(); h.down && now.Sub(h.lastFail) >= healthSettle {
		h.down = false
		h.log.Info("store reachable again", zap.String("op", op), zap.Duration("outage", h.lastFail.Sub(h.since)))
	}
}
