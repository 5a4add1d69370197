package redisclaim

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// The index of jobs, <ns>:jobs, off the claim path.
//
// status and Prune find a namespace's jobs in the set <ns>:jobs. In a
// Cluster that key lives on one shard, outside every job's hash tag: a
// claim that waited for it would stop with that shard, whatever shard the
// job is on. So no claim waits for the index. A backend adds a job to the
// index the first time it claims it (or records a note of it), with an
// SADD sent beside the claim; the claim waits for that SADD at most
// indexGrace, once per job and process (so that, with the shard up, the
// index names the job when the first claim is answered, as status right
// after it expects), and never again: while the SADD fails, each later
// claim of the job sends one more in the background, until one lands. The
// lease strategy also indexes a job whose state its claim would create
// (a new job, or one Prune forgot; the script answers "index") before it
// sends the claim again, within the same bound.
//
// The cost: a run can exist for a while before its job is in the index
// (the index shard down when the job was first claimed, or the process
// killed between the claim and the SADD); status does not list that job's
// runs until one instance's SADD lands, which the next claim of the job
// by any instance just started, or still retrying, brings.

// indexGrace bounds how long a job's first claim waits for its SADD.
const indexGrace = 250 * time.Millisecond

// indexTimeout bounds one SADD.
const indexTimeout = 5 * time.Second

// indexer adds job names to the index of jobs. It is safe for concurrent
// use.
type indexer struct {
	c   redis.UniversalClient
	key string
	log *zap.Logger

	mu   sync.Mutex
	jobs map[string]*indexState
	// stop cancels the SADDs in flight when the backend closes.
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// indexState is one job's standing in the index, as this process knows it.
type indexState struct {
	done     bool          // an SADD of the job succeeded
	tried    bool          // an SADD was sent: later claims do not wait for one
	inFlight chan struct{} // closed when the SADD in flight ends; nil when none
	warned   bool          // a failure was logged: the next is not
}

func newIndexer(c redis.UniversalClient, key string, log *zap.Logger) *indexer {
	ctx, stop := context.WithCancel(context.Background())
	return &indexer{c: c, key: key, log: log, jobs: map[string]*indexState{}, ctx: ctx, stop: stop}
}

// touch makes sure job is, or will be, in the index: it starts an SADD
// unless one succeeded or is in flight. It returns what the caller waits
// for after its claim: the SADD's end, bounded by indexGrace, on the
// job's first SADD; nothing (a no-op) otherwise.
func (x *indexer) touch(job string) (wait func(ctx context.Context)) {
	return x.send(job, false)
}

// force sends an SADD of job even when one succeeded before (the job's
// state is gone and comes back) and returns the wait for it, bounded by
// indexGrace.
func (x *indexer) force(job string) (wait func(ctx context.Context)) {
	return x.send(job, true)
}

func (x *indexer) send(job string, force bool) func(ctx context.Context) {
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.jobs[job]
	if st == nil {
		st = &indexState{}
		x.jobs[job] = st
	}
	if st.done && !force {
		return noWait
	}
	first := !st.tried || force
	if st.inFlight == nil {
		st.tried = true
		done := make(chan struct{})
		st.inFlight = done
		x.wg.Add(1)
		go x.add(job, st, done)
	}
	if !first {
		return noWait
	}
	done := st.inFlight
	return func(ctx context.Context) {
		t := time.NewTimer(indexGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

func noWait(context.Context) {}

// add sends one SADD of job and records its outcome.
func (x *indexer) add(job string, st *indexState, done chan struct{}) {
	defer x.wg.Done()
	ctx, cancel := context.WithTimeout(x.ctx, indexTimeout)
	err := x.c.SAdd(ctx, x.key, job).Err()
	cancel()
	x.mu.Lock()
	st.inFlight = nil
	warn, recovered := err != nil && !st.warned && x.ctx.Err() == nil, err == nil && st.warned
	st.done, st.warned = err == nil, err != nil && (st.warned || warn)
	x.mu.Unlock()
	close(done)
	switch {
	case warn:
		x.log.Warn("redis: cannot add the job to the index of jobs yet; its claims go on, each sending the SADD again, and status lists its runs once one lands",
			zap.String("job", job), zap.String("index", x.key), zap.Error(err))
	case recovered:
		x.log.Info("redis: the job is in the index of jobs now", zap.String("job", job), zap.String("index", x.key))
	}
}

// close cancels the SADDs in flight and waits for them.
func (x *indexer) close() {
	x.stop()
	x.wg.Wait()
}

// forget makes the next touch of job send an SADD again (Prune removed the
// job from the index).
func (x *indexer) forget(job string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if st := x.jobs[job]; st != nil {
		st.done = false
	}
}
