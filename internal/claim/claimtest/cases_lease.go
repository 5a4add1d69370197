package claimtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The cases of lease backends (docs/spec.md#s3-1, docs/spec.md#s4).

func (s *suite) testStoreTime(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("storetime")
	for i, lease := range []time.Duration{1500 * time.Millisecond, 45 * time.Second, 2 * time.Hour} {
		r := request(job, now.UnixMilli()+int64(i), now)
		r.Lease, r.Overlap = lease, claim.OverlapAllow
		res := mustClaim(ctx, t, b, r)
		wantWon(t, res, 1, fmt.Sprintf("claim with lease %v", lease))
		s.checkLease(t, res, lease, fmt.Sprintf("claim with lease %v (millisecond precision)", lease))
	}
}

func (s *suite) testIgnoresInstanceClock(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("skewed")
	// An instance whose clock is a day behind still gets late from the
	// store's clock.
	r := request(job, now.Add(-2*time.Hour).UnixMilli(), now.Add(-24*time.Hour))
	wantOutcome(t, mustClaim(ctx, t, b, r), claim.Late,
		"slot 2h old by store time, maxLate 1h, instance clock a day behind: lease backends decide with store time")
	// An instance whose clock is a day ahead still wins a fresh slot.
	r = request(job, now.UnixMilli(), now.Add(24*time.Hour))
	wantWon(t, mustClaim(ctx, t, b, r), 1,
		"a fresh slot by store time, instance clock a day ahead: lease backends ignore Request.Now")
}

func (s *suite) testReadShowsClaim(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := request(newJob("read"), now.UnixMilli(), now)
	res := mustClaim(ctx, t, b, r)
	wantWon(t, res, 1, "the claim")
	run, readNow := mustRead(ctx, t, b, r)
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if run.Job != r.Job || run.Slot != r.Slot {
		add("run is %s@%d, want %s@%d", run.Job, run.Slot, r.Job, r.Slot)
	}
	if run.Status != claim.StatusRunning || run.Attempt != 1 {
		add("%s attempt %d, want running attempt 1", run.Status, run.Attempt)
	}
	if run.Token != r.Token || run.Instance != r.Instance {
		add("held by %s/%s, want the winner %s/%s", run.Instance, run.Token.Short(), r.Instance, r.Token.Short())
	}
	if !run.LeaseUntil.Equal(res.LeaseUntil) {
		add("lease until %s, want the claim's %s", run.LeaseUntil, res.LeaseUntil)
	}
	if d := run.StartedAt.Sub(res.StoreNow); d < -s.h.LeaseTolerance || d > s.h.LeaseTolerance {
		add("started %s, want the claim's store time %s", run.StartedAt, res.StoreNow)
	}
	if !run.FinishedAt.IsZero() || run.ExitCode != nil {
		add("finished %v exit %s, want neither while running", run.FinishedAt, fmtExit(run.ExitCode))
	}
	if readNow.IsZero() || readNow.Before(res.StoreNow.Add(-s.h.LeaseTolerance)) {
		add("Read's store time %s is before the claim's %s", readNow, res.StoreNow)
	}
	if len(problems) > 0 {
		t.Fatalf("the cheap read of a just-won run:\n  %s", strings.Join(problems, "\n  "))
	}
	runs := listOf(ctx, t, b, r.Job, 0)
	if len(runs) != 1 || runs[0].Status != claim.StatusRunning || runs[0].Token != r.Token {
		t.Fatalf("status must list the running run: got %+v", runs)
	}
}

func (s *suite) testReadNotFound(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	l := as[claim.Leaser](t, b)
	job := newJob("unknown")
	if _, _, err := l.Read(ctx, job, 1_700_000_000_000); !isNotFound(err) {
		t.Fatalf("read of a run the store never saw: want claim.ErrNotFound, got %v", err)
	}
	now := s.storeNow(ctx, t, b)
	wantWon(t, mustClaim(ctx, t, b, request(job, now.UnixMilli(), now)), 1, "a claim of the job")
	if _, _, err := l.Read(ctx, job, now.UnixMilli()+1000); !isNotFound(err) {
		t.Fatalf("read of another slot of a known job: want claim.ErrNotFound, got %v", err)
	}
}

// finish records fin for r's attempt, failing the case on error.
func finish(ctx context.Context, t *testing.T, b claim.Backend, r claim.Request, attempt int, fin claim.Finish) {
	t.Helper()
	if err := b.Finish(ctx, r.Fence(attempt), fin); err != nil {
		t.Fatalf("finish %s@%d attempt %d by its owner: %v", r.Job, r.Slot, attempt, err)
	}
}

// claimRun claims r, wants it won(1), and when done finishes it as
// succeeded. It returns r.
func claimRun(ctx context.Context, t *testing.T, b claim.Backend, r claim.Request, done bool, what string) claim.Request {
	t.Helper()
	wantWon(t, mustClaim(ctx, t, b, r), 1, what)
	if done {
		finish(ctx, t, b, r, 1, succeeded(r.Now))
	}
	return r
}

// finishOf is the result of an attempt started and finished at now.
func finishOf(st claim.Status, code int, tail string, now time.Time) claim.Finish {
	return claim.Finish{Status: st, ExitCode: code, OutputTail: tail, StartedAt: now, FinishedAt: now}
}

// succeeded is a successful result at now.
func succeeded(now time.Time) claim.Finish { return finishOf(claim.StatusSucceeded, 0, "ok\n", now) }

func (s *suite) testDoneAfterFinish(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := claimRun(ctx, t, b, request(newJob("done"), now.Add(-10*time.Second).UnixMilli(), now), true, "the claim")
	res := mustClaim(ctx, t, b, backup(r))
	wantOutcome(t, res, claim.Done, "another instance's claim of a finished run")
	if res.Holder != r.Instance {
		t.Fatalf("done answers name the instance that ran the run: Holder %q, want %q", res.Holder, r.Instance)
	}
	wantOutcome(t, mustClaim(ctx, t, b, r), claim.Done, "the finisher's own claim re-sent after Finish")
	late := backup(r)
	late.MaxLate = time.Millisecond
	wantOutcome(t, mustClaim(ctx, t, b, late), claim.Done,
		"a claim of a finished run that is also past maxLate: the stored state answers, not the late rule")
}

func (s *suite) testFinishRecords(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := request(newJob("records"), now.UnixMilli(), now)
	wantWon(t, mustClaim(ctx, t, b, r), 1, "the claim")
	tail := strings.Repeat("0123456789abcdef", 255) + "last line ünï ✓\n" // ~4 KiB
	fin := finishOf(claim.StatusSucceeded, 0, tail, now)
	finish(ctx, t, b, r, 1, fin)
	run, _ := mustRead(ctx, t, b, r)
	checkFinished(t, run, r, 1, fin) // exit code 0 must be recorded as 0, not as "none"
	runs := listOf(ctx, t, b, r.Job, 0)
	if len(runs) != 1 {
		t.Fatalf("status --job %s: want 1 run, got %d", r.Job, len(runs))
	}
	checkFinished(t, runs[0], r, 1, fin)

	timeout := request(r.Job, r.Slot+1000, now)
	timeout.Overlap = claim.OverlapAllow
	wantWon(t, mustClaim(ctx, t, b, timeout), 1, "a second run")
	tf := finishOf(claim.StatusTimeout, -1, "", now)
	finish(ctx, t, b, timeout, 1, tf)
	run, _ = mustRead(ctx, t, b, timeout)
	checkFinished(t, run, timeout, 1, tf)
}

func (s *suite) testListRuns(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	// No storeNow probe here: its run would show up in the every-job list.
	now := time.Now().Truncate(time.Second)
	base := now.Add(-10 * time.Minute).UnixMilli()
	jobL, jobM := newJob("listl"), newJob("listm")
	claimAt := func(job string, slot int64, fin bool) {
		r := request(job, slot, now)
		r.Overlap = claim.OverlapAllow
		claimRun(ctx, t, b, r, fin, fmt.Sprintf("claim %s@%d", job, slot))
	}
	// L at base+0,2,4,6,8 s; M at base+1,3 s: newest first interleaves them.
	for i := range 5 {
		claimAt(jobL, base+int64(2*i)*1000, i%2 == 0)
	}
	for i := range 2 {
		claimAt(jobM, base+int64(2*i+1)*1000, true)
	}
	list := func(q claim.ListQuery) []claim.Run {
		t.Helper()
		runs, err := b.ListRuns(ctx, q)
		if err != nil {
			t.Fatalf("list runs %+v: %v", q, err)
		}
		return runs
	}
	wantSlots := func(runs []claim.Run, what string, want ...int64) {
		t.Helper()
		var got []string
		for _, r := range runs {
			got = append(got, fmt.Sprintf("%s@+%ds", r.Job[:5], (r.Slot-base)/1000))
		}
		ok := len(runs) == len(want)
		for i := 0; ok && i < len(want); i++ {
			ok = runs[i].Slot == base+want[i]*1000
		}
		if !ok {
			t.Fatalf("%s: want slots +%v s (newest first), got %v", what, want, got)
		}
	}
	l := list(claim.ListQuery{Job: jobL})
	wantSlots(l, "status --job L", 8, 6, 4, 2, 0)
	for _, r := range l {
		if r.Job != jobL {
			t.Fatalf("status --job L listed a run of %s", r.Job)
		}
	}
	wantSlots(list(claim.ListQuery{Job: jobL, Limit: 3}), "status --job L --limit 3", 8, 6, 4)
	wantSlots(list(claim.ListQuery{}), "status (every job)", 8, 6, 4, 3, 2, 1, 0)
	wantSlots(list(claim.ListQuery{Limit: 2}), "status --limit 2", 8, 6)
	if got := list(claim.ListQuery{Job: newJob("nobody")}); len(got) != 0 {
		t.Fatalf("status --job of a job with no runs: want none, got %d", len(got))
	}
	jobN := newJob("listn")
	for i := range 50 {
		claimAt(jobN, base-int64(i+1)*1000, false)
	}
	if got := list(claim.ListQuery{}); len(got) != 50 {
		t.Fatalf("status with no --limit over 57 runs: want the default limit of 50, got %d", len(got))
	}
}

func (s *suite) testOverlapSkip(t *testing.T) {
	ctx, b, now := s.begin(t)
	l := as[claim.Leaser](t, b)
	a := request(newJob("ovskip"), now.UnixMilli(), now)
	wantWon(t, mustClaim(ctx, t, b, a), 1, "run A of the job")
	next := request(a.Job, a.Slot+60_000, now)
	wantOutcome(t, mustClaim(ctx, t, b, next), claim.Overlap, "the next slot while run A holds a live lease (overlap skip)")
	if _, _, err := l.Read(ctx, next.Job, next.Slot); !isNotFound(err) {
		t.Fatalf("an overlap answer writes nothing: Read must say claim.ErrNotFound, got %v", err)
	}
	prev := request(a.Job, a.Slot-60_000, now)
	wantOutcome(t, mustClaim(ctx, t, b, prev), claim.Overlap, "an earlier slot while run A holds a live lease (overlap skip)")
	wantWon(t, mustClaim(ctx, t, b, a), 1, "run A's own claim re-sent (its own lease does not overlap it)")
}

func (s *suite) testOverlapAllow(t *testing.T) {
	ctx, b, now := s.begin(t)
	a := request(newJob("ovallow"), now.UnixMilli(), now)
	a.Overlap = claim.OverlapAllow
	wantWon(t, mustClaim(ctx, t, b, a), 1, "run A of the job")
	next := request(a.Job, a.Slot+60_000, now)
	next.Overlap = claim.OverlapAllow
	wantWon(t, mustClaim(ctx, t, b, next), 1, "the next slot while run A is live, overlap allow")
}

func (s *suite) testOverlapAfterFinish(t *testing.T) {
	ctx, b, now := s.begin(t)
	a := request(newJob("ovfin"), now.UnixMilli(), now)
	wantWon(t, mustClaim(ctx, t, b, a), 1, "run A of the job")
	next := request(a.Job, a.Slot+60_000, now)
	wantOutcome(t, mustClaim(ctx, t, b, next), claim.Overlap, "the next slot while A is live")
	finish(ctx, t, b, a, 1, succeeded(now))
	wantWon(t, mustClaim(ctx, t, b, next), 1, "the next slot after A finished (overlap skip)")
}

func (s *suite) testOverlapOtherJob(t *testing.T) {
	ctx, b, now := s.begin(t)
	a := request(newJob("ovjobj"), now.UnixMilli(), now)
	wantWon(t, mustClaim(ctx, t, b, a), 1, "run of job J")
	k := request(newJob("ovjobk"), a.Slot, now)
	wantWon(t, mustClaim(ctx, t, b, k), 1, "the same slot of another job K while J runs (overlap is per job)")
}

// testOverlapIgnoresExpiredLease: the next slot is won once run A's lease
// expired (expiredBesideLive checks it): only live leases overlap.
func (s *suite) testOverlapIgnoresExpiredLease(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	s.expiredBesideLive(ctx, t, b)
}

// claimExpired claims r with the short lease, wants it won(1), and waits
// until that lease has expired. It returns r as claimed.
func (s *suite) claimExpired(ctx context.Context, t *testing.T, b claim.Backend, r claim.Request, what string) claim.Request {
	t.Helper()
	r.Lease = s.h.ShortLease
	wantWon(t, mustClaim(ctx, t, b, r), 1, what)
	s.awaitExpired(ctx, t, b, r.Job, r.Slot)
	return r
}

// expiredBesideLive builds the state of "overlap also guards takeovers"
// (docs/spec.md#s3-1, row 7): run A (slot1) whose lease expired, and run B of
// the next slot live. It returns A's request.
func (s *suite) expiredBesideLive(ctx context.Context, t *testing.T, b claim.Backend) (claim.Request, claim.Request) {
	t.Helper()
	now := s.storeNow(ctx, t, b)
	a := s.claimExpired(ctx, t, b, request(newJob("ovguard"), now.UnixMilli(), now), "run A (slot1) with a short lease")
	next := request(a.Job, a.Slot+60_000, now)
	wantWon(t, mustClaim(ctx, t, b, next), 1,
		"run B (slot2) once A's lease expired: only runs with lease_until >= now overlap")
	return a, next
}

func (s *suite) testOverlapGuardsTakeover(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	a, next := s.expiredBesideLive(ctx, t, b)
	wantOutcome(t, mustClaim(ctx, t, b, backup(a)), claim.Done,
		"a backup finding slot1's lease expired while slot2 of the job is live (overlap skip) must not start a second run")
	run, _ := mustRead(ctx, t, b, a)
	if run.Status != claim.StatusInterrupted || run.FinishedAt.IsZero() || run.ExitCode != nil || run.Attempt != 1 {
		t.Fatalf("slot1 must be marked interrupted (finished set, no exit code, attempt 1): got %s finished %v exit %s attempt %d",
			run.Status, run.FinishedAt, fmtExit(run.ExitCode), run.Attempt)
	}
	wantOutcome(t, mustClaim(ctx, t, b, backup(a)), claim.Done, "any later claim of the interrupted slot1")
	live, _ := mustRead(ctx, t, b, next)
	if live.Status != claim.StatusRunning || live.Token != next.Token {
		t.Fatalf("slot2 must still run under its winner: got %s token %s", live.Status, live.Token.Short())
	}
}

func (s *suite) testOverlapAllowTakeover(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	a, _ := s.expiredBesideLive(ctx, t, b)
	bk := backup(a)
	bk.Overlap = claim.OverlapAllow
	wantWon(t, mustClaim(ctx, t, b, bk), 2, "a backup taking over slot1 beside a live slot2 with overlap allow")
}

func (s *suite) testTakeover(t *testing.T) {
	ctx, b, now := s.begin(t)
	l := as[claim.Leaser](t, b)
	a := s.claimExpired(ctx, t, b, request(newJob("takeover"), now.UnixMilli(), now), "the first runner A with a short lease")

	bk := backup(a)
	bk.Lease = time.Minute
	won := mustClaim(ctx, t, b, bk)
	wantWon(t, won, 2, "backup B claiming with a fresh token after A's lease expired")
	s.checkLease(t, won, bk.Lease, "the takeover's lease")

	// A is fenced from every write.
	_, err := l.Renew(ctx, a.Fence(1), time.Minute)
	wantTakenOver(t, err, "A's heartbeat after B took over")
	wantTakenOver(t, b.Finish(ctx, a.Fence(1), succeeded(now)), "A's Finish after B took over")
	wantTakenOver(t, l.Release(ctx, a.Fence(1)), "A's Release after B took over")
	wantOutcome(t, mustClaim(ctx, t, b, a), claim.Running, "A's claim re-sent after B took over")

	renewed, err := l.Renew(ctx, bk.Fence(2), 2*time.Minute)
	if err != nil {
		t.Fatalf("B's heartbeat: %v", err)
	}
	wantWon(t, renewed, 2, "B's renewal")
	if !renewed.LeaseUntil.After(won.LeaseUntil) {
		t.Fatalf("B's renewal with a 2m lease must extend its lease beyond %s, got %s", won.LeaseUntil, renewed.LeaseUntil)
	}
	s.checkLease(t, renewed, 2*time.Minute, "B's renewal")

	run, _ := mustRead(ctx, t, b, a)
	if run.Attempt != 2 || run.Instance != bk.Instance || run.Token != bk.Token || run.Status != claim.StatusRunning ||
		!run.LeaseUntil.Equal(renewed.LeaseUntil) {
		t.Fatalf("after the takeover the run must show attempt 2 held by B (%s/%s) until %s, running; got attempt %d by %s/%s until %s, %s",
			bk.Instance, bk.Token.Short(), renewed.LeaseUntil, run.Attempt, run.Instance, run.Token.Short(), run.LeaseUntil, run.Status)
	}
	fin := finishOf(claim.StatusFailed, 2, "retried\n", now)
	finish(ctx, t, b, bk, 2, fin)
	run, _ = mustRead(ctx, t, b, a)
	checkFinished(t, run, bk, 2, fin)
}

func (s *suite) testResentClaimAfterExpiry(t *testing.T) {
	ctx, b, now := s.begin(t)
	l := as[claim.Leaser](t, b)
	a := s.claimExpired(ctx, t, b, request(newJob("resentexp"), now.UnixMilli(), now), "A with a short lease")
	// docs/spec.md#s3-1, row 4: running under the caller's token -> won(attempt)
	// comes before the lease check: nobody took over, so it is still A's run.
	wantWon(t, mustClaim(ctx, t, b, a), 1, "A's claim re-sent after its lease expired but before anyone took over")
	res, err := l.Renew(ctx, a.Fence(1), time.Minute)
	if err != nil {
		t.Fatalf("A's heartbeat on its expired but untaken lease must succeed: %v", err)
	}
	wantWon(t, res, 1, "A's renewal")
}

func (s *suite) testAttemptsRunOut(t *testing.T) {
	ctx, b, now := s.begin(t)
	l := as[claim.Leaser](t, b)
	a := request(newJob("attempts"), now.UnixMilli(), now)
	a.MaxAttempts = 2
	a = s.claimExpired(ctx, t, b, a, "attempt 1 (maxAttempts 2)")
	b2 := backup(a)
	wantWon(t, mustClaim(ctx, t, b, b2), 2, "the takeover after attempt 1 expired")
	s.awaitExpired(ctx, t, b, a.Job, a.Slot)
	wantOutcome(t, mustClaim(ctx, t, b, backup(a)), claim.Done,
		"a claim after attempt 2 of 2 expired: no attempts left")
	run, _ := mustRead(ctx, t, b, a)
	if run.Status != claim.StatusInterrupted || run.Attempt != 2 || run.FinishedAt.IsZero() || run.ExitCode != nil {
		t.Fatalf("a run out of attempts must show interrupted at attempt 2 (finished set, no exit code): got %s attempt %d finished %v exit %s",
			run.Status, run.Attempt, run.FinishedAt, fmtExit(run.ExitCode))
	}
	_, err := l.Renew(ctx, b2.Fence(2), time.Minute)
	wantFenced(t, err, "the heartbeat of attempt 2 after the run was interrupted")
	res := mustClaim(ctx, t, b, backup(a))
	wantOutcome(t, res, claim.Done, "any later claim of the interrupted run")
	if res.Holder != "" {
		t.Fatalf("an interrupted run's done answer names no holder (its runner died): Holder %q", res.Holder)
	}
}

func (s *suite) testRenewExtends(t *testing.T) {
	ctx, b, now := s.begin(t)
	l := as[claim.Leaser](t, b)
	a := request(newJob("renew"), now.UnixMilli(), now)
	first := mustClaim(ctx, t, b, a)
	wantWon(t, first, 1, "the claim")
	res, err := l.Renew(ctx, a.Fence(1), 2*time.Minute)
	if err != nil {
		t.Fatalf("the owner's heartbeat: %v", err)
	}
	wantWon(t, res, 1, "the owner's renewal")
	s.checkLease(t, res, 2*time.Minute, "renewal with 2m")
	if !res.LeaseUntil.After(first.LeaseUntil) {
		t.Fatalf("renewal must move the lease end beyond %s, got %s", first.LeaseUntil, res.LeaseUntil)
	}
	run, _ := mustRead(ctx, t, b, a)
	if !run.LeaseUntil.Equal(res.LeaseUntil) {
		t.Fatalf("Read must show the renewed lease end %s, got %s", res.LeaseUntil, run.LeaseUntil)
	}
	res, err = l.Renew(ctx, a.Fence(1), 10*time.Second)
	if err != nil {
		t.Fatalf("renewal with a shorter lease: %v", err)
	}
	s.checkLease(t, res, 10*time.Second, "renewal with 10s sets lease_until = now + lease")
	_, err = l.Renew(ctx, backup(a).Fence(1), time.Minute)
	wantFenced(t, err, "a renewal by a token that never owned the run")
}

func (s *suite) testFinishedIsFenced(t *testing.T) {
	ctx, b, now := s.begin(t)
	l := as[claim.Leaser](t, b)
	a := request(newJob("finfence"), now.UnixMilli(), now)
	wantWon(t, mustClaim(ctx, t, b, a), 1, "the claim")
	fin := finishOf(claim.StatusSucceeded, 0, "first\n", now)
	finish(ctx, t, b, a, 1, fin)
	_, err := l.Renew(ctx, a.Fence(1), time.Minute)
	wantFenced(t, err, "a heartbeat after the run finished")
	second := finishOf(claim.StatusFailed, 9, "second\n", now)
	wantFenced(t, b.Finish(ctx, a.Fence(1), second), "a second Finish of a finished run")
	wantFenced(t, l.Release(ctx, a.Fence(1)), "a Release after the run finished")
	run, _ := mustRead(ctx, t, b, a)
	checkFinished(t, run, a, 1, fin) // the fenced Finish changed nothing
}

func (s *suite) testRelease(t *testing.T) {
	ctx, b, now := s.begin(t)
	l := as[claim.Leaser](t, b)
	a := request(newJob("release"), now.UnixMilli(), now)
	wantWon(t, mustClaim(ctx, t, b, a), 1, "the claim (1m lease)")
	if err := l.Release(ctx, a.Fence(1)); err != nil {
		t.Fatalf("the owner's Release: %v", err)
	}
	run, readNow := mustRead(ctx, t, b, a)
	if run.Status != claim.StatusRunning || !run.LeaseUntil.Before(readNow) {
		t.Fatalf("after Release the run stays running with its lease ended (lease_until %s < store now %s)",
			run.LeaseUntil, readNow)
	}
	// No waiting: a backup takes over at once (docs/spec.md#s4-stop).
	bk := backup(a)
	wantWon(t, mustClaim(ctx, t, b, bk), 2, "a backup's claim right after Release")
	wantFenced(t, l.Release(ctx, a.Fence(1)), "A's second Release after the takeover")
	_, err := l.Renew(ctx, a.Fence(1), time.Minute)
	wantFenced(t, err, "A's heartbeat after Release and takeover")
}

func (s *suite) testTakeoverRace(t *testing.T) {
	const slots = 10
	ctx, b, now := s.begin(t)
	conns := s.connections(t, b)
	job := newJob("takerace")
	var owned []claim.Request
	for i := range slots {
		r := request(job, now.UnixMilli()+int64(i)*1000, now)
		r.Lease, r.Overlap = s.h.ShortLease, claim.OverlapAllow
		wantWon(t, mustClaim(ctx, t, b, r), 1, fmt.Sprintf("the first runner of slot %d", i))
		owned = append(owned, r)
	}
	for i, r := range owned {
		s.awaitExpired(ctx, t, b, r.Job, r.Slot)
		owned[i].Lease = time.Minute // the backups' lease
	}
	s.checkOneWinner(ctx, t, b, s.race(ctx, conns, plansOf(racers, "backup", owned)), claim.Running, 2,
		fmt.Sprintf("%d backups racing to take over %d expired leases", racers, slots))
}

func (s *suite) testOverlapRace(t *testing.T) {
	const rounds = 3
	ctx, b, now := s.begin(t)
	conns := s.connections(t, b)
	for round := range rounds {
		job := newJob(fmt.Sprintf("ovrace%d", round))
		plans := make([][]claim.Request, racers)
		for g := range plans {
			// Every claimer wants a different slot of the same job.
			plans[g] = []claim.Request{request(job, now.UnixMilli()-int64(g)*1000, now)}
		}
		results := s.race(ctx, conns, plans)
		var won []string
		var problems []string
		for _, p := range results {
			a := p[0]
			switch {
			case a.err != nil:
				problems = append(problems, fmt.Sprintf("slot %d: error %v", a.req.Slot, a.err))
			case a.res.Outcome == claim.Won:
				won = append(won, fmt.Sprint(a.req.Slot))
			case a.res.Outcome != claim.Overlap:
				problems = append(problems, fmt.Sprintf("slot %d: %s, want won or overlap", a.req.Slot, a.res.Outcome))
			}
		}
		if len(won) != 1 {
			problems = append(problems, fmt.Sprintf("%d slots won (%v), want exactly 1", len(won), won))
		}
		if len(problems) > 0 {
			t.Fatalf("round %d: %d claimers of different slots of one job with overlap skip: the decision must be serial per job, "+
				"so exactly one runs:\n  %s", round+1, racers, strings.Join(problems, "\n  "))
		}
	}
}
