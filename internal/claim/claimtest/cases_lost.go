package claimtest

import (
	"errors"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The cases of a claim the store lost (docs/spec.md#s4): a fenced write
// says whether another attempt took the run over (claim.ErrFenced) or the
// store no longer holds the writer's claim at all (claim.ErrRunLost), as
// after a failover to a replica that had not received it. The loss is
// made with Prune, the one way every lease store forgets a run.

// wantLost fails unless err is claim.ErrRunLost (which is a claim.ErrFenced).
func wantLost(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, claim.ErrRunLost) || !errors.Is(err, claim.ErrFenced) {
		t.Fatalf("%s: want an error wrapping claim.ErrRunLost (the store lost the claim), got %v", what, err)
	}
}

// wantTakenOver fails unless err is claim.ErrFenced and not
// claim.ErrRunLost: the run belongs to another attempt.
func wantTakenOver(t *testing.T, err error, what string) {
	t.Helper()
	wantFenced(t, err, what)
	if errors.Is(err, claim.ErrRunLost) {
		t.Fatalf("%s: the run was taken over, not lost: want claim.ErrFenced without claim.ErrRunLost, got %v", what, err)
	}
}

func (s *suite) testLostClaim(t *testing.T) {
	ctx, b, now := s.begin(t)
	l, p := as[claim.Leaser](t, b), as[claim.Pruner](t, b)
	a := request(newJob("lost"), now.Add(-2*time.Hour).UnixMilli(), now)
	a.MaxLate = 3 * time.Hour
	a = s.claimExpired(ctx, t, b, a, "A's claim of a 2h-old slot (maxLate 3h) with a short lease")
	// Prune with age 0 forgets every run whose lease has ended: the
	// store loses A's claim as a failover to a stale replica would.
	if _, err := p.Prune(ctx, 0); err != nil {
		t.Fatalf("prune: %v", err)
	}
	if _, _, err := l.Read(ctx, a.Job, a.Slot); !isNotFound(err) {
		t.Fatalf("after the prune the run must be gone: want claim.ErrNotFound, got %v", err)
	}
	_, err := l.Renew(ctx, a.Fence(1), time.Minute)
	wantLost(t, err, "A's heartbeat once the store has no record of its claim")
	wantLost(t, b.Finish(ctx, a.Fence(1), succeeded(now)), "A's Finish once the store has no record of its claim")
	wantLost(t, l.Release(ctx, a.Fence(1)), "A's Release once the store has no record of its claim")

	// Another instance claims the forgotten slot anew: attempt 1 again,
	// which is no takeover of A's attempt.
	bk := backup(a)
	bk.Lease = time.Minute
	wantWon(t, mustClaim(ctx, t, b, bk), 1, "a backup's claim of the forgotten slot (attempt 1 again)")
	wantLost(t, b.Finish(ctx, a.Fence(1), succeeded(now)), "A's Finish once the slot was claimed anew")
	// A takeover's claim lost the same way leaves the run at the attempt
	// before it: that writer's claim is lost too, not taken over.
	wantLost(t, b.Finish(ctx, backup(a).Fence(2), succeeded(now)),
		"a Finish by an attempt 2 the store has no record of, while attempt 1 holds the run")
	finish(ctx, t, b, bk, 1, succeeded(now))
}

func (s *suite) testFinishResent(t *testing.T) {
	ctx, b, now := s.begin(t)
	a := request(newJob("finresent"), now.UnixMilli(), now)
	wantWon(t, mustClaim(ctx, t, b, a), 1, "the claim")
	fin := finishOf(claim.StatusFailed, 3, "once\n", now)
	finish(ctx, t, b, a, 1, fin)
	// The same Finish again, as after its answer was lost (a connection
	// cut, a failover once the commit had reached the standby): recorded.
	if err := b.Finish(ctx, a.Fence(1), fin); err != nil {
		t.Fatalf("the same Finish re-sent by its token must succeed: %v", err)
	}
	other := fin
	other.ExitCode = 4
	wantTakenOver(t, b.Finish(ctx, a.Fence(1), other), "a Finish of another result once the run finished")
	run, _ := mustRead(ctx, t, b, a)
	checkFinished(t, run, a, 1, fin)
}
