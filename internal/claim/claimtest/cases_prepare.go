package claimtest

import (
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
)

// The cases of a claim.Preparer: a claim decides the same whether its run
// was prepared or not.

// testPreparedRace: every connection prepares every run, then the claimers
// race on them as in Claim/Race: exactly one won per run.
func (s *suite) testPreparedRace(t *testing.T) {
	ctx, b, now := s.begin(t)
	s.raceSlots(ctx, t, b, s.connections(t, b), newJob("prepared"), now, preparedAhead, "prepared runs")
}

// testPreparedDuringRace: every connection prepares every run while the
// claimers race on them (instances whose clocks differ prepare a run
// another one claims already): a preparation never takes a run's place,
// so exactly one claim won per run.
func (s *suite) testPreparedDuringRace(t *testing.T) {
	ctx, b, now := s.begin(t)
	s.raceSlots(ctx, t, b, s.connections(t, b), newJob("prepduring"), now, preparedDuring, "runs prepared during the race")
}

// testPreparedResent: a prepared claim re-sent with its token is won again;
// another token loses; preparing a run again after its claim changes
// nothing.
func (s *suite) testPreparedResent(t *testing.T) {
	ctx, b, now := s.begin(t)
	p := as[claim.Preparer](t, b)
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
