package claimtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The cases every backend runs, lease and claim-only alike.

// loserOutcome is what everyone but the winner of a live run is told:
// running on a lease backend, lost on a claim-only one.
func (s *suite) loserOutcome() claim.Outcome {
	if s.leaser {
		return claim.Running
	}
	return claim.Lost
}

func (s *suite) testFirstClaimWins(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := request(newJob("first"), now.UnixMilli(), now)
	res := mustClaim(ctx, t, b, r)
	wantWon(t, res, 1, "the first claim of a run nobody holds")
	if s.leaser {
		s.checkLease(t, res, r.Lease, "the first claim's lease")
	}
}

// checkLease checks a won result's store time and lease end.
func (s *suite) checkLease(t *testing.T, res claim.Result, lease time.Duration, what string) {
	t.Helper()
	if res.StoreNow.IsZero() {
		t.Fatalf("%s: Result.StoreNow is zero; a lease backend reports its store time", what)
	}
	if s.h.Advance == nil {
		wantNear(t, res.StoreNow, time.Now(), s.h.ClockSkew, what+": store time vs the local clock (a unit or time-zone mistake?)")
	}
	wantNear(t, res.LeaseUntil, res.StoreNow.Add(lease), s.h.LeaseTolerance, what+": LeaseUntil = StoreNow + lease")
}

func (s *suite) testResentTokenWins(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := request(newJob("resent"), now.UnixMilli(), now)
	wantWon(t, mustClaim(ctx, t, b, r), 1, "the first claim")
	// The answer was lost in transport; the daemon re-sends the same
	// claim, same token (docs/spec.md#s3-3). It must not lose its own claim.
	for i := range 3 {
		wantWon(t, mustClaim(ctx, t, b, r), 1, fmt.Sprintf("re-send #%d of the same claim (same token)", i+1))
	}
}

func (s *suite) testOtherTokenLoses(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := request(newJob("other"), now.UnixMilli(), now)
	won := mustClaim(ctx, t, b, r)
	wantWon(t, won, 1, "the first claim")
	for i := range 3 {
		res := mustClaim(ctx, t, b, backup(r))
		wantOutcome(t, res, s.loserOutcome(), fmt.Sprintf("claim #%d by another instance after the run was won", i+1))
		if s.leaser && !res.LeaseUntil.Equal(won.LeaseUntil) {
			t.Fatalf("a running answer reports the holder's lease end: want %s, got %s", won.LeaseUntil, res.LeaseUntil)
		}
		if s.leaser && res.Holder != r.Instance {
			t.Fatalf("a running answer names the holder: Holder %q, want %q", res.Holder, r.Instance)
		}
	}
}

func (s *suite) testLate(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("late")
	r := request(job, now.Add(-10*time.Second).UnixMilli(), now)
	r.MaxLate = 5 * time.Second
	wantOutcome(t, mustClaim(ctx, t, b, r), claim.Late,
		"a slot 10s old with maxLate 5s and no state (now - slot > maxLate)")
	if s.leaser {
		if _, _, err := as[claim.Leaser](t, b).Read(ctx, job, r.Slot); !isNotFound(err) {
			t.Fatalf("a late answer writes nothing: Read must say claim.ErrNotFound, got %v", err)
		}
	}
	// Nobody else can win it either.
	wantOutcome(t, mustClaim(ctx, t, b, backup(r)), claim.Late, "a second instance's claim of the same late slot")
}

func (s *suite) testWithinMaxLate(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := request(newJob("inlate"), now.Add(-10*time.Second).UnixMilli(), now)
	r.MaxLate = 30 * time.Second
	wantWon(t, mustClaim(ctx, t, b, r), 1, "a slot 10s old with maxLate 30s")
}

func (s *suite) testFinishThenListed(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := request(newJob("listed"), now.UnixMilli(), now)
	res := mustClaim(ctx, t, b, r)
	wantWon(t, res, 1, "the claim")
	fin := claim.Finish{Status: claim.StatusFailed, ExitCode: 3, OutputTail: "line 1\nerror: disk full ✗\n",
		StartedAt: now, FinishedAt: now.Add(time.Second)}
	if err := b.Finish(ctx, r.Fence(res.Attempt), fin); err != nil {
		t.Fatalf("finish by the winner: %v", err)
	}
	runs := listOf(ctx, t, b, r.Job, 0)
	if len(runs) != 1 {
		t.Fatalf("anarchond status --job %s: want the 1 finished run, got %d: %+v", r.Job, len(runs), runs)
	}
	checkFinished(t, runs[0], r, 1, fin)
}

// A run claimed ahead of its slot (the scheduler's claimAhead) is won at
// once, a lease backend's lease counted from the claim, but it starts at
// its slot: status must not show it started before the slot.
func (s *suite) testClaimedAhead(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := request(newJob("ahead"), now.Add(2*time.Second).UnixMilli(), now)
	res := mustClaim(ctx, t, b, r)
	wantWon(t, res, 1, "a claim 2s ahead of its slot")
	if s.leaser {
		s.checkLease(t, res, r.Lease, "a claim ahead of its slot (the lease runs from the claim)")
		run, _ := mustRead(ctx, t, b, r)
		if !run.StartedAt.Equal(r.SlotTime()) {
			t.Fatalf("a run claimed ahead of its slot started at %s, want its slot %s", run.StartedAt, r.SlotTime())
		}
	}
	runs := listOf(ctx, t, b, r.Job, 0)
	if len(runs) != 1 || runs[0].Status != claim.StatusRunning || !runs[0].StartedAt.Equal(r.SlotTime()) {
		t.Fatalf("status must list the run claimed ahead as running, started at its slot %s: got %+v", r.SlotTime(), runs)
	}
}

// checkFinished checks what status shows of a run finished by r's attempt.
func checkFinished(t *testing.T, got claim.Run, r claim.Request, attempt int, fin claim.Finish) {
	t.Helper()
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if got.Job != r.Job || got.Slot != r.Slot {
		add("run is %s@%d, want %s@%d", got.Job, got.Slot, r.Job, r.Slot)
	}
	if got.Status != fin.Status {
		add("status %q, want %q", got.Status, fin.Status)
	}
	if got.ExitCode == nil || *got.ExitCode != fin.ExitCode {
		add("exit code %v, want %d", fmtExit(got.ExitCode), fin.ExitCode)
	}
	if got.OutputTail != fin.OutputTail {
		add("output tail %q, want %q", got.OutputTail, fin.OutputTail)
	}
	if got.Attempt != attempt {
		add("attempt %d, want %d", got.Attempt, attempt)
	}
	if got.Instance != r.Instance {
		add("instance %q, want the finisher %q", got.Instance, r.Instance)
	}
	if got.Token != r.Token {
		add("token %s, want the finisher's %s", got.Token.Short(), r.Token.Short())
	}
	if got.StartedAt.IsZero() || got.FinishedAt.IsZero() {
		add("started %v / finished %v: both must be set", got.StartedAt, got.FinishedAt)
	} else if got.FinishedAt.Before(got.StartedAt) {
		add("finished %v before started %v", got.FinishedAt, got.StartedAt)
	}
	if len(problems) > 0 {
		t.Fatalf("status of the finished run %s@%d:\n  %s", r.Job, r.Slot, strings.Join(problems, "\n  "))
	}
}

func fmtExit(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func (s *suite) testRace(t *testing.T) {
	ctx, b, now := s.begin(t)
	conns := s.connections(t, b)
	for round := range 3 {
		s.raceSlots(ctx, t, b, conns, newJob(fmt.Sprintf("race%d", round)), now, unprepared, fmt.Sprintf("round %d", round+1))
	}
}

// preparation is when raceSlots prepares its runs (claim.Preparer).
type preparation int

const (
	unprepared     preparation = iota
	preparedAhead              // every connection prepares every run, then the race
	preparedDuring             // every connection prepares every run, during the race
)

// raceSlots races racers claimers, each with a token of its own, over conns
// on 50 consecutive slots of job (overlap allow: every slot is its own race),
// and checks one winner per slot. Preparations are made as prep says.
func (s *suite) raceSlots(ctx context.Context, t *testing.T, b claim.Backend, conns []claim.Backend,
	job string, now time.Time, prep preparation, what string) {
	t.Helper()
	const slots = 50
	base := now.Truncate(time.Second).Add(-time.Duration(slots) * time.Second).UnixMilli()
	prepareAll := func(c claim.Backend) error {
		for i := range slots {
			if err := c.(claim.Preparer).Prepare(ctx, job, base+int64(i)*1000); err != nil {
				return fmt.Errorf("prepare %s@%d: %w", job, base+int64(i)*1000, err)
			}
		}
		return nil
	}
	var during sync.WaitGroup
	duringErrs := make([]error, len(conns))
	for i, c := range conns {
		switch prep {
		case preparedAhead:
			if err := prepareAll(c); err != nil {
				t.Fatal(err)
			}
		case preparedDuring:
			during.Go(func() { duringErrs[i] = prepareAll(c) })
		}
	}
	reqs := make([]claim.Request, slots)
	for i := range reqs {
		reqs[i] = request(job, base+int64(i)*1000, now)
		reqs[i].Overlap = claim.OverlapAllow
	}
	results := s.race(ctx, conns, plansOf(racers, "racer", reqs))
	during.Wait()
	if err := errors.Join(duringErrs...); err != nil {
		t.Fatal(err)
	}
	s.checkOneWinner(ctx, t, b, results, s.loserOutcome(), 1,
		fmt.Sprintf("%s: %d claimers over %d connection(s)", what, racers, len(conns)))
}

// checkOneWinner asserts that every slot raced in results has exactly one
// won(attempt), that every other answer is loser, and that no claim ended
// in an error. On a lease backend it also checks that the store's record
// names the winner.
func (s *suite) checkOneWinner(ctx context.Context, t *testing.T, b claim.Backend, results [][]attempt,
	loser claim.Outcome, attempt int, what string) {
	t.Helper()
	type slotKey struct {
		job  string
		slot int64
	}
	winners := map[slotKey][]claim.Request{}
	var problems []string
	retries := 0
	for _, plan := range results {
		for _, a := range plan {
			k := slotKey{a.req.Job, a.req.Slot}
			if _, ok := winners[k]; !ok {
				winners[k] = nil
			}
			retries += a.retries
			switch {
			case a.err != nil:
				problems = append(problems, fmt.Sprintf("%s@%d token %s: error %v", k.job, k.slot, a.req.Token.Short(), a.err))
			case a.res.Outcome == claim.Won:
				if a.res.Attempt != attempt {
					problems = append(problems, fmt.Sprintf("%s@%d: won(%d), want attempt %d", k.job, k.slot, a.res.Attempt, attempt))
				}
				winners[k] = append(winners[k], a.req)
			case a.res.Outcome != loser:
				problems = append(problems, fmt.Sprintf("%s@%d token %s: %s, want won or %s",
					k.job, k.slot, a.req.Token.Short(), a.res.Outcome, loser))
			}
		}
	}
	for k, w := range winners {
		if len(w) != 1 {
			problems = append(problems, fmt.Sprintf("%s@%d: %d winners, want exactly 1", k.job, k.slot, len(w)))
		}
	}
	if retries > 0 {
		t.Logf("%s: %d transient errors re-sent with the same token", what, retries)
	}
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
		}
		t.Fatalf("%s: racing claimers must get exactly one won per run and no errors:\n  %s", what, strings.Join(problems, "\n  "))
	}
	if !s.leaser {
		return
	}
	l := as[claim.Leaser](t, b)
	for k, w := range winners {
		run, _, err := l.Read(ctx, k.job, k.slot)
		if err != nil {
			t.Fatalf("%s: read %s@%d after the race: %v", what, k.job, k.slot, err)
		}
		if run.Token != w[0].Token || run.Attempt != attempt || run.Status != claim.StatusRunning {
			t.Fatalf("%s: the store's record of %s@%d (token %s, attempt %d, %s) must name the one winner (token %s, attempt %d, running)",
				what, k.job, k.slot, run.Token.Short(), run.Attempt, run.Status, w[0].Token.Short(), attempt)
		}
	}
}

func (s *suite) testLateUsesInstanceClock(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	now := time.Now()
	r := request(newJob("instclock"), now.UnixMilli(), now.Add(2*time.Minute))
	r.MaxLate = time.Minute
	wantOutcome(t, mustClaim(ctx, t, b, r), claim.Late,
		"a claim-only backend checks late with Request.Now (2m after the slot, maxLate 1m)")
	r2 := request(r.Job, now.Add(time.Second).UnixMilli(), now.Add(30*time.Second))
	r2.MaxLate = time.Minute
	wantWon(t, mustClaim(ctx, t, b, r2), 1, "a slot 29s old by Request.Now with maxLate 1m")
}

func isNotFound(err error) bool { return errors.Is(err, claim.ErrNotFound) }
