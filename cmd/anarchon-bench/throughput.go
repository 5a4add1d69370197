package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// rate is how many claims some claimers got answered in a time.
type rate struct {
	Claimers int           `json:"claimers"`
	Claims   int           `json:"claims"`
	Elapsed  time.Duration `json:"elapsed_ns"`
}

// PerSecond is the claims answered per second.
func (r rate) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Claims) / r.Elapsed.Seconds()
}

// throughput has k claimers, each its own backend (its own connections, as
// k instances have), claim m runs each, one after the other: distinct runs
// (the next slots of ten jobs of its own, overlap allow, so that every
// claim is won). It returns the claims answered per second, all claimers
// together.
func throughput(ctx context.Context, st *store, k, m int, runs *[]runKey) (rate, error) {
	bes, err := openN(ctx, st, k)
	defer closeAll(bes)
	if err != nil {
		return rate{}, err
	}
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	reqs := make([][]claim.Request, k)
	for g := range k {
		for i := range m + 10 { // the first ten give each job its state: warm-up
			r := newRequest(fmt.Sprintf("tp%d-%d-%d", k, g, i%10), base+int64(i), fmt.Sprintf("tp-%d", g))
			r.Overlap = claim.OverlapAllow
			reqs[g] = append(reqs[g], r)
			*runs = append(*runs, runKey{r.Job, r.Slot})
		}
		for _, r := range reqs[g][:10] {
			if _, err := claimWon(ctx, bes[g], r, new([]runKey)); err != nil {
				return rate{}, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	errs := make([]error, k)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range k {
		wg.Go(func() {
			<-start
			for _, r := range reqs[g][10:] {
				if _, err := claimWon(ctx, bes[g], r, new([]runKey)); err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	el := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return rate{}, err
	}
	return rate{Claimers: k, Claims: k * m, Elapsed: el}, nil
}

// ceilingResult is the claim throughput ceiling: n distinct runs due at the
// same instant, every one claimed by each of the claimers (as every
// instance claims every due run).
type ceilingResult struct {
	rate
	Runs    int  `json:"runs"`
	Batched bool `json:"batched"`
	Batch   int  `json:"batch"`
}

// ceilingBatch is how many claims one batch carries on a claim.Batcher.
const ceilingBatch = 200

// ceiling has claimers backends claim the same n runs, each in job order,
// with the daemon's concurrency: claimConcurrency claims (or batches of
// ceilingBatch on a claim.Batcher) in flight per claimer. Every run must
// have exactly one won.
func ceiling(ctx context.Context, st *store, claimers, n int, runs *[]runKey) (ceilingResult, []string, error) {
	bes, err := openN(ctx, st, claimers)
	defer closeAll(bes)
	if err != nil {
		return ceilingResult{}, nil, err
	}
	slot := time.Now().Add(-time.Second).Truncate(time.Second).UnixMilli()
	c := &ceilingRace{slot: slot, jobs: make([]string, n), won: make([]atomic.Int32, n)}
	for i := range c.jobs {
		c.jobs[i] = fmt.Sprintf("ceil-%05d", i)
		*runs = append(*runs, runKey{c.jobs[i], slot})
	}
	_, batched := bes[0].(claim.Batcher)
	batched = batched && *batchFlag
	// The scheduler's concurrency: claims one by one with 16 in flight, or
	// batches with 4 in flight (its coalescer's bound).
	inFlight := claimConcurrency
	c.chunk = 1
	if batched {
		c.chunk, inFlight = ceilingBatch, batchesInFlight
	}
	el, err := c.race(ctx, bes, inFlight)
	if err != nil {
		return ceilingResult{}, nil, err
	}
	return ceilingResult{rate: rate{Claimers: claimers, Claims: claimers * n, Elapsed: el}, Runs: n,
		Batched: batched, Batch: c.chunk}, c.violations(), nil
}

// ceilingRace is the ceiling's runs as its claimers share them: the same
// slot of every job, claimed chunk runs at a time, and how many claims of
// each run were won.
type ceilingRace struct {
	jobs  []string
	slot  int64 // ms since the epoch
	chunk int   // runs per claim (or per batch)
	won   []atomic.Int32
}

// race starts inFlight workers per backend of bes, lets them all go at
// once, and returns how long they took to claim every run; the error is
// every claimer's first.
func (c *ceilingRace) race(ctx context.Context, bes []claim.Backend, inFlight int) (time.Duration, error) {
	cls := make([]*ceilingClaimer, len(bes))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g, be := range bes {
		cls[g] = &ceilingClaimer{race: c, be: be, tok: claim.NewToken(), inst: fmt.Sprintf("ceil-%d", g)}
		for range inFlight {
			wg.Go(func() {
				<-start
				cls[g].work(ctx)
			})
		}
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	el := time.Since(t0)
	errs := make([]error, len(cls))
	for g, cl := range cls {
		errs[g] = cl.err
	}
	return el, errors.Join(errs...)
}

// violations lists the runs that did not have exactly one won.
func (c *ceilingRace) violations() []string {
	var out []string
	for i := range c.won {
		if w := c.won[i].Load(); w != 1 {
			out = append(out, fmt.Sprintf("run %s@%d: %d won, want exactly 1", c.jobs[i], c.slot, w))
		}
	}
	return out
}

// ceilingClaimer is one claimer of the ceiling: one backend, as one
// instance, whose workers take the runs' chunks in turn.
type ceilingClaimer struct {
	race *ceilingRace
	be   claim.Backend
	tok  claim.Token
	inst string
	next atomic.Int64 // the next chunk's first run
	mu   sync.Mutex   // guards err
	err  error        // the first error of its workers
}

// work is one worker: it claims the next chunk until none is left, the
// context is done or a claim fails.
func (cl *ceilingClaimer) work(ctx context.Context) {
	c := cl.race
	n := len(c.jobs)
	for {
		lo := int(cl.next.Add(int64(c.chunk))) - c.chunk
		if lo >= n || ctx.Err() != nil {
			return
		}
		reqs := make([]claim.Request, 0, c.chunk)
		for i := lo; i < min(lo+c.chunk, n); i++ {
			r := newRequest(c.jobs[i], c.slot, cl.inst)
			r.Token = cl.tok
			reqs = append(reqs, r)
		}
		res, err := claimChunk(ctx, cl.be, reqs)
		if err != nil {
			cl.mu.Lock()
			if cl.err == nil {
				cl.err = err
			}
			cl.mu.Unlock()
			return
		}
		for j, x := range res {
			if x.Outcome == claim.Won {
				c.won[lo+j].Add(1)
			}
		}
	}
}

// claimConcurrency is the scheduler's default bound on claims in flight,
// and batchesInFlight its coalescer's bound on batches in flight.
const (
	claimConcurrency = 16
	batchesInFlight  = 4
)

// claimChunk claims reqs: one batch on a claim.Batcher, else one by one.
func claimChunk(ctx context.Context, be claim.Backend, reqs []claim.Request) ([]claim.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	if b, ok := be.(claim.Batcher); ok && *batchFlag {
		return b.ClaimBatch(ctx, reqs)
	}
	out := make([]claim.Result, len(reqs))
	for i, r := range reqs {
		res, err := be.Claim(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("claim %s@%d: %w", r.Job, r.Slot, err)
		}
		out[i] = res
	}
	return out, nil
}

// openN opens n backends on st; the ones opened are returned on error too.
func openN(ctx context.Context, st *store, n int) ([]claim.Backend, error) {
	bes := make([]claim.Backend, 0, n)
	for g := range n {
		be, err := st.open(ctx)
		if err != nil {
			return bes, fmt.Errorf("open claimer %d: %w", g, err)
		}
		bes = append(bes, be)
	}
	return bes, nil
}

func closeAll(bes []claim.Backend) {
	for _, be := range bes {
		be.Close()
	}
}
