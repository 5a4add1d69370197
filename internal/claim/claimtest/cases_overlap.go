package claimtest

import (
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The overlap policies replace and queue (docs/spec.md#s3-1-replace,
// docs/spec.md#s3-1-queue) are decided by the store as skip: a slot that
// finds another live run of the job is answered overlap, and a takeover
// beside a live run is refused. Under replace the running attempt stops
// its command at the next slot and records the run replaced, a final
// status every lease store keeps, lists and filters on.

// testOverlapReplace: the next slot is answered overlap while run A is
// live; A's attempt records replaced (fenced by its token); A then reads,
// lists and filters as replaced, its renewals are fenced, a re-sent copy
// of that Finish is accepted, and the next slot wins.
func (s *suite) testOverlapReplace(t *testing.T) {
	ctx, b, now := s.begin(t)
	l := as[claim.Leaser](t, b)
	a := request(newJob("ovreplace"), now.UnixMilli(), now)
	a.Overlap = claim.OverlapReplace
	wantWon(t, mustClaim(ctx, t, b, a), 1, "run A of the job")
	next := request(a.Job, a.Slot+60_000, now)
	next.Overlap = claim.OverlapReplace
	wantOutcome(t, mustClaim(ctx, t, b, next), claim.Overlap,
		"the next slot while run A is live (overlap replace: it waits for A's command to stop)")
	fin := finishOf(claim.StatusReplaced, 143, "stopped\n", now)
	finish(ctx, t, b, a, 1, fin)
	if err := b.Finish(ctx, a.Fence(1), fin); err != nil {
		t.Fatalf("the replaced Finish re-sent (its answer lost) must succeed: %v", err)
	}
	run, _ := mustRead(ctx, t, b, a)
	checkFinished(t, run, a, 1, fin)
	if _, err := l.Renew(ctx, a.Fence(1), a.Lease); err == nil {
		t.Fatal("a renewal of a replaced run must be fenced, got no error")
	} else {
		wantFenced(t, err, "a renewal of the replaced run A")
	}
	wantOutcome(t, mustClaim(ctx, t, b, backup(a)), claim.Done, "a backup's claim of the replaced run A")
	wantWon(t, mustClaim(ctx, t, b, next), 1, "the next slot once A is recorded replaced")
	got := listOf(ctx, t, b, a.Job, 10, claim.StatusReplaced)
	if len(got) != 1 || got[0].Slot != a.Slot || got[0].Status != claim.StatusReplaced {
		t.Fatalf("ListRuns of the replaced runs: got %d runs %+v, want run A only", len(got), got)
	}
	all := listOf(ctx, t, b, a.Job, 10, claim.RunStatuses...)
	if len(all) != 2 || all[0].Slot != next.Slot || all[1].Status != claim.StatusReplaced {
		t.Fatalf("ListRuns of the runs: got %+v, want the next slot running, then A replaced", all)
	}
}

// testOverlapReplaceGuardsTakeover: under replace too, a backup finding an
// expired run while a later slot of the job is live does not start a
// second run (the run is marked interrupted).
func (s *suite) testOverlapReplaceGuardsTakeover(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	a, _ := s.expiredBesideLive(ctx, t, b)
	bk := backup(a)
	bk.Overlap = claim.OverlapReplace
	wantOutcome(t, mustClaim(ctx, t, b, bk), claim.Done,
		"a backup (overlap replace) finding slot1 expired while slot2 is live must not start a second run")
}

// testOverlapQueue: a queued slot's claim carries a maxLate stretched to
// the job's next slot; the store answers it overlap while run A is live
// (not late, though past the job's own maxLate), and won once A ended.
func (s *suite) testOverlapQueue(t *testing.T) {
	ctx, b, now := s.begin(t)
	a := request(newJob("ovqueue"), now.Add(-10*time.Second).UnixMilli(), now)
	a.Overlap = claim.OverlapQueue
	wantWon(t, mustClaim(ctx, t, b, a), 1, "run A of the job")
	q := request(a.Job, now.Add(-5*time.Second).UnixMilli(), now)
	q.Overlap, q.MaxLate = claim.OverlapQueue, 2*time.Second
	wantOutcome(t, mustClaim(ctx, t, b, q), claim.Late, "a queued slot past its maxLate (the scheduler stretches it)")
	q.MaxLate = time.Minute
	wantOutcome(t, mustClaim(ctx, t, b, q), claim.Overlap, "a queued slot while run A is live (overlap queue)")
	finish(ctx, t, b, a, 1, succeeded(now))
	wantWon(t, mustClaim(ctx, t, b, q), 1, "the queued slot once A finished")
}
