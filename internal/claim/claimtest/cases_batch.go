package claimtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

func mustBatch(ctx context.Context, t *testing.T, b claim.Backend, reqs []claim.Request) []claim.Result {
	t.Helper()
	res, err := as[claim.Batcher](t, b).ClaimBatch(ctx, reqs)
	if err != nil {
		t.Fatalf("claim a batch of %d: unexpected error: %v", len(reqs), err)
	}
	if len(res) != len(reqs) {
		t.Fatalf("claim a batch of %d: %d results", len(reqs), len(res))
	}
	return res
}

// testBatchDecidesEachInOrder: a batch is decided as its claims would be
// one by one, in order: a fresh run is won, the same run re-sent by its
// token later in the batch is won again with the same attempt, another
// token's claim of it loses, a late slot is late, and a run claimed
// before the batch is not won again.
func (s *suite) testBatchDecidesEachInOrder(t *testing.T) {
	ctx, b, now := s.begin(t)
	slot := now.Truncate(time.Second).UnixMilli()
	before := request(newJob("batch-before"), slot, now)
	wantWon(t, mustClaim(ctx, t, b, before), 1, "the claim before the batch")

	a := request(newJob("batch-a"), slot, now)
	other := backup(a)
	late := request(newJob("batch-late"), now.Add(-2*time.Hour).UnixMilli(), now)
	again := backup(before)
	res := mustBatch(ctx, t, b, []claim.Request{a, a, other, late, again})
	wantWon(t, res[0], 1, "a fresh run in a batch")
	wantWon(t, res[1], 1, "the same run re-sent by its token later in the batch")
	wantOutcome(t, res[2], s.loserOutcome(), "another token's claim of a run won earlier in the batch")
	wantOutcome(t, res[3], claim.Late, "a slot older than maxLate in a batch")
	wantOutcome(t, res[4], s.loserOutcome(), "a run claimed before the batch")
	if res := mustBatch(ctx, t, b, nil); len(res) != 0 {
		t.Fatalf("an empty batch: want no results, got %v", res)
	}
}

// testBatchOverlap: with overlap skip, the second slot of a job in the
// same batch sees the first's live run.
func (s *suite) testBatchOverlap(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("batch-overlap")
	first := request(job, now.Add(-2*time.Second).Truncate(time.Second).UnixMilli(), now)
	second := request(job, first.Slot+1000, now)
	res := mustBatch(ctx, t, b, []claim.Request{first, second})
	wantWon(t, res[0], 1, "the first slot of a job in a batch")
	wantOutcome(t, res[1], claim.Overlap, "the next slot of the same job later in the batch, overlap skip")
}

// testBatchRace: instances sending batches of the same runs at once (as
// instances whose timers fire together do) get exactly one won per run.
func (s *suite) testBatchRace(t *testing.T) {
	const (
		jobs     = 40
		claimers = 6
	)
	ctx, b, now := s.begin(t)
	conns := s.connections(t, b)
	slot := now.Truncate(time.Second).UnixMilli()
	runs := make([]claim.Request, jobs)
	for j := range runs { // the scheduler's order: by job
		runs[j] = request(newJob(fmt.Sprintf("batchrace%02d", j)), slot, now)
	}
	results := make([][]attempt, claimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g, reqs := range plansOf(claimers, "batcher", runs) {
		be := conns[g%len(conns)]
		wg.Go(func() {
			<-start
			var res []claim.Result
			var err error
			for {
				res, err = as[claim.Batcher](t, be).ClaimBatch(ctx, reqs)
				if err == nil || s.h.Transient == nil || !s.h.Transient(err) || ctx.Err() != nil {
					break
				}
			}
			results[g] = make([]attempt, jobs)
			for j := range reqs {
				results[g][j] = attempt{req: reqs[j], err: err}
				if err == nil {
					results[g][j].res = res[j]
				}
			}
		})
	}
	close(start)
	wg.Wait()
	s.checkOneWinner(ctx, t, b, results, s.loserOutcome(), 1,
		fmt.Sprintf("%d batches of %d runs over %d connection(s)", claimers, jobs, len(conns)))
}
