package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/clock"
)

// gatedBatcher records the batches it is sent and holds each until the
// test lets it through.
type gatedBatcher struct {
	claim.Batcher
	sent chan []claim.Request
	gate chan struct{}
}

func (g *gatedBatcher) ClaimBatch(ctx context.Context, reqs []claim.Request) ([]claim.Result, error) {
	g.sent <- reqs
	<-g.gate
	return g.Batcher.ClaimBatch(ctx, reqs)
}

// TestCoalescerBatchesWhileBusy: a lone claim goes at once as a batch of
// one; the claims that arrive while the batches in flight are busy go
// together in the next one, ordered by job, and each caller gets its own
// answer.
func TestCoalescerBatchesWhileBusy(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	g := &gatedBatcher{Batcher: memclaim.New(fake), sent: make(chan []claim.Request, 10), gate: make(chan struct{})}
	c := newCoalescer(g)
	c.maxFlight = 1
	slot := fake.Now().UnixMilli()
	req := func(job string) claim.Request {
		return claim.Request{Job: job, Slot: slot, Token: claim.NewToken(), Instance: "i",
			MaxLate: time.Minute, Lease: time.Minute, MaxAttempts: 1, Overlap: claim.OverlapSkip}
	}
	type answer struct {
		job string
		res claim.Result
		err error
	}
	answers := make(chan answer, 10)
	ask := func(r claim.Request) {
		go func() {
			res, err := c.claim(t.Context(), r)
			answers <- answer{r.Job, res, err}
		}()
	}
	ask(req("first"))
	if got := <-g.sent; len(got) != 1 || got[0].Job != "first" {
		t.Fatalf("a lone claim must go at once, alone: %v", got)
	}
	// While "first" is in flight, nine more arrive.
	jobs := []string{"j8", "j3", "j5", "j1", "j9", "j2", "j7", "j4", "j6"}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() { ask(req(j)) })
	}
	wg.Wait()
	waitQueued(t, c, len(jobs))
	g.gate <- struct{}{} // "first" answers
	next := <-g.sent
	if len(next) != len(jobs) {
		t.Fatalf("the claims that arrived meanwhile must go in one batch: got %d of %d", len(next), len(jobs))
	}
	for i := range next {
		if want := fmt.Sprintf("j%d", i+1); next[i].Job != want {
			t.Fatalf("a batch is sent ordered by job: position %d is %s, want %s", i, next[i].Job, want)
		}
	}
	close(g.gate)
	for range len(jobs) + 1 {
		a := <-answers
		if a.err != nil || a.res.Outcome != claim.Won {
			t.Fatalf("claim %s: want won, got %+v %v", a.job, a.res, a.err)
		}
	}
}

// waitQueued waits until n claims are queued behind the batch in flight.
func waitQueued(t *testing.T, c *coalescer, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		c.mu.Lock()
		q := len(c.queue)
		c.mu.Unlock()
		if q == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d claims never queued", n)
}

// waitIdle waits until no batch is in flight and none is queued.
func waitIdle(t *testing.T, c *coalescer) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		c.mu.Lock()
		idle := c.inFlight == 0 && len(c.queue) == 0
		c.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the coalescer never became idle")
}

// TestCoalescerDropsGivenUpClaims: a claim whose caller gave up before its
// batch left is not sent.
func TestCoalescerDropsGivenUpClaims(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_800_000_000, 0))
	g := &gatedBatcher{Batcher: memclaim.New(fake), sent: make(chan []claim.Request, 10), gate: make(chan struct{})}
	c := newCoalescer(g)
	c.maxFlight = 1
	slot := fake.Now().UnixMilli()
	r := claim.Request{Job: "a", Slot: slot, Token: claim.NewToken(), Instance: "i",
		MaxLate: time.Minute, Lease: time.Minute, MaxAttempts: 1}
	done := make(chan error, 2)
	go func() { _, err := c.claim(t.Context(), r); done <- err }()
	<-g.sent
	ctx, cancel := context.WithCancel(t.Context())
	gone := r
	gone.Job = "gone"
	go func() { _, err := c.claim(ctx, gone); done <- err }()
	waitQueued(t, c, 1)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a caller that gave up must get its context's error")
	}
	g.gate <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("the first claim: %v", err)
	}
	waitIdle(t, c)
	select {
	case b := <-g.sent:
		t.Fatalf("a batch of given-up claims must not be sent: %v", b)
	default:
	}
}
