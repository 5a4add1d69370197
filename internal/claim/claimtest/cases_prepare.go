package claimtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The cases of a claim.Preparer: a claim decides the same whether its run
// was prepared or not.

// testPreparedRace: every connection prepares every run, then the claimers
// race on them as in Claim/Race: exactly one won per run.
func (s *suite) testPreparedRace(t *testing.T) {
	const (
		slots      = 50
		goroutines = 16
	)
	ctx, b := s.ctx(t), s.h.New(t)
	conns := s.connections(t, b)
	now := s.storeNow(ctx, t, b)
	job := newJob("prepared")
	base := now.Truncate(time.Second).Add(-slots * time.Second).UnixMilli()
	for _, c := range conns {
		p := c.(claim.Preparer)
		for i := range slots {
			if err := p.Prepare(ctx, job, base+int64(i)*1000); err != nil {
				t.Fatalf("prepare %s@%d: %v", job, base+int64(i)*1000, err)
			}
		}
	}
	plans := make([][]claim.Request, goroutines)
	for g := range plans {
		tok, inst := claim.NewToken(), fmt.Sprintf("racer-%d", g)
		for i := range slots {
			r := request(job, base+int64(i)*1000, now)
			r.Token, r.Instance = tok, inst
			r.Overlap = claim.OverlapAllow
			plans[g] = append(plans[g], r)
		}
	}
	results := s.race(ctx, conns, plans)
	s.checkOneWinner(ctx, t, b, results, s.loserOutcome(), 1,
		fmt.Sprintf("prepared runs: %d claimers over %d connection(s)", goroutines, len(conns)))
}

// testPreparedResent: a prepared claim re-sent with its token is won again;
// another token loses; preparing a run again after its claim changes
// nothing.
func (s *suite) testPreparedResent(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	p := b.(claim.Preparer)
	now := s.storeNow(ctx, t, b)
	r := request(newJob("prepresent"), now.UnixMilli(), now)
	if err := p.Prepare(ctx, r.Job, r.Slot); err != nil {
		t.Fatal(err)
	}
	wantWon(t, mustClaim(ctx, t, b, r), 1, "the first claim of a prepared run")
	if err := p.Prepare(ctx, r.Job, r.Slot); err != nil {
		t.Fatal(err)
	}
	wantWon(t, mustClaim(ctx, t, b, r), 1, "the same claim re-sent after the run was prepared again")
	other := r
	other.Token = claim.NewToken()
	wantOutcome(t, mustClaim(ctx, t, b, other), s.loserOutcome(), "a claim by another instance")
}
