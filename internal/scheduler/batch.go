package scheduler

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// coalescer sends the claims of a claim.Batcher together, as group commit
// does: a claim that arrives while maxFlight batches are in flight waits
// for the next batch. Alone, a claim goes at once, as a batch of one; the
// claims of slots due together (a tick of many jobs) go in a few round
// trips instead of one each. Each claim keeps every guarantee of a single
// claim: the backend decides a batch's claims one by one.
type coalescer struct {
	b         claim.Batcher
	maxFlight int // batches in flight at once
	maxSize   int // claims per batch

	mu       sync.Mutex
	queue    []*pending
	inFlight int
}

// pending is one claim waiting for its batch's answer.
type pending struct {
	// ctx: its caller awaits the answer until ctx is done.
	ctx context.Context
	// send: the claim is not sent once send is done (the stop began).
	send context.Context
	req  claim.Request
	done chan struct{}
	res  claim.Result
	err  error
}

// givenUp is why p is not sent: its caller gave up, or the stop began
// before it left (errNotSent); nil when it is to be sent.
func (p *pending) givenUp() error {
	if err := p.ctx.Err(); err != nil {
		return err
	}
	if p.send.Err() != nil {
		return errNotSent
	}
	return nil
}

// Defaults of the coalescer: up to 256 claims per batch (a PostgreSQL
// batch holds its jobs' locks until it commits: bounded), 4 batches in
// flight.
const (
	batchMaxSize   = 256
	batchMaxFlight = 4
)

func newCoalescer(b claim.Batcher) *coalescer {
	return &coalescer{b: b, maxFlight: batchMaxFlight, maxSize: batchMaxSize}
}

// claim sends req in the next batch and waits for its answer or for ctx.
// A claim given up by its caller may still be sent; its caller re-sends
// it with the same token, which the store recognises (docs/spec.md#s3-3).
func (c *coalescer) claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	return c.claimBefore(ctx, ctx, req)
}

// claimBefore is claim for a request that is not sent once send is done
// (the stop began: errNotSent), but whose answer, once it was sent, is
// awaited until ctx is done (stop.go).
func (c *coalescer) claimBefore(ctx, send context.Context, req claim.Request) (claim.Result, error) {
	p := &pending{ctx: ctx, send: send, req: req, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	c.kick()
	c.mu.Unlock()
	sendDone := send.Done()
	for {
		select {
		case <-p.done:
			return p.res, p.err
		case <-ctx.Done():
			return claim.Result{}, ctx.Err()
		case <-sendDone:
			sendDone = nil
			if c.unqueue(p) {
				return claim.Result{}, errNotSent
			}
		}
	}
}

// unqueue removes p from the queue and reports whether it was there (not
// yet in a batch).
func (c *coalescer) unqueue(p *pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.queue, p)
	if i < 0 {
		return false
	}
	c.queue = slices.Delete(c.queue, i, i+1)
	return true
}

// kick starts batches while there is room in flight; c.mu must be held.
func (c *coalescer) kick() {
	for c.inFlight < c.maxFlight && len(c.queue) > 0 {
		n := min(len(c.queue), c.maxSize)
		batch := slices.Clone(c.queue[:n])
		c.queue = slices.Delete(c.queue, 0, n)
		c.inFlight++
		go c.send(batch)
	}
}

// send sends one batch, ordered by job then slot (so that two instances'
// batches take the jobs' locks in the same order), and hands out the
// answers. Claims whose callers are gone are not sent. The batch's
// deadline is the earliest of its callers'.
func (c *coalescer) send(batch []*pending) {
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.kick()
		c.mu.Unlock()
	}()
	live := batch[:0]
	var deadline time.Time
	for _, p := range batch {
		if err := p.givenUp(); err != nil {
			p.err = err
			close(p.done)
			continue
		}
		if d, ok := p.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	slices.SortStableFunc(live, func(a, b *pending) int {
		return cmp.Or(cmp.Compare(a.req.Job, b.req.Job), cmp.Compare(a.req.Slot, b.req.Slot))
	})
	ctx := context.Background()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	reqs := make([]claim.Request, len(live))
	for i, p := range live {
		reqs[i] = p.req
	}
	res, err := c.b.ClaimBatch(ctx, reqs)
	for i, p := range live {
		if err != nil {
			p.err = err
		} else {
			p.res = res[i]
		}
		close(p.done)
	}
}
