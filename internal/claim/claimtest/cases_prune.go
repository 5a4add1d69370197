package claimtest

import (
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The retention cases of backends that are claim.Pruner.

func (s *suite) testPrune(t *testing.T) {
	ctx, b, now := s.begin(t)
	p := as[claim.Pruner](t, b)
	job := newJob("prune")
	at := func(age time.Duration, fin bool) claim.Request {
		r := request(job, now.Add(-age).UnixMilli(), now)
		r.MaxLate, r.Overlap = 3*time.Hour, claim.OverlapAllow
		return claimRun(ctx, t, b, r, fin, "claim of a run "+age.String()+" old")
	}
	oldDone := at(2*time.Hour, true)
	oldLive := at(2*time.Hour+time.Second, false) // still holds a live lease
	newDone := at(10*time.Minute, true)

	n, err := p.Prune(ctx, time.Hour)
	if err != nil {
		t.Fatalf("prune older than 1h: %v", err)
	}
	if n != 1 {
		t.Fatalf("prune older than 1h: want 1 run deleted (the 2h-old finished one), got %d", n)
	}
	if l, ok := b.(claim.Leaser); ok {
		if _, _, err := l.Read(ctx, job, oldDone.Slot); !isNotFound(err) {
			t.Fatalf("the 2h-old finished run must be gone: want claim.ErrNotFound, got %v", err)
		}
		if run, _, err := l.Read(ctx, job, oldLive.Slot); err != nil || run.Status != claim.StatusRunning {
			t.Fatalf("a 2h-old run with a live lease must never be pruned: got %+v, %v", run, err)
		}
		if run, _, err := l.Read(ctx, job, newDone.Slot); err != nil || !run.Status.Final() {
			t.Fatalf("a 10m-old finished run is younger than 1h and must stay: got %+v, %v", run, err)
		}
	}
	if n, err := p.Prune(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("a second prune must find nothing: got %d, %v", n, err)
	}
}

func (s *suite) testPrunedSlotIsLate(t *testing.T) {
	ctx, b, now := s.begin(t)
	p := as[claim.Pruner](t, b)
	r := request(newJob("pruned"), now.Add(-2*time.Hour).UnixMilli(), now)
	r.MaxLate = 3 * time.Hour
	claimRun(ctx, t, b, r, true, "a claim of a 2h-old slot (maxLate 3h)")
	if _, err := p.Prune(ctx, time.Hour); err != nil {
		t.Fatalf("prune: %v", err)
	}
	// Retention (1h) longer than maxLate (30m): the forgotten slot is late,
	// never won a second time (docs/spec.md#s2).
	late := backup(r)
	late.MaxLate = 30 * time.Minute
	wantOutcome(t, mustClaim(ctx, t, b, late), claim.Late, "a claim of a pruned slot older than maxLate")
}
