// Package claimtest is the conformance suite of anarchon's claim backends
// (docs/spec.md#s7): a backend is correct when it passes Exercise against a real
// store. It is modelled on River's riverdrivertest.Exercise and go-cloud's
// drivertest: a backend's test supplies a Harness that makes fresh,
// isolated stores, and Exercise runs every case that applies to it.
//
//	func TestConformance(t *testing.T) {
//		claimtest.Exercise(t, claimtest.Harness{
//			New: func(t *testing.T) claim.Backend {
//				b, err := mybackend.New(t.Context(), mybackend.Options{ /* own namespace */ })
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() { b.Close() })
//				return b
//			},
//		})
//	}
//
// Lease backends (claim.Leaser) run the cases of docs/spec.md#s3-1 and
// docs/spec.md#s4: store time, overlap, takeover with attempt+1, fencing,
// attempts running out, release. Claim-only backends run the cases of
// docs/spec.md#s3-2: exactly one won, "that was me" by token, lost for
// everyone else, late by the instance clock. Both run the concurrent races. A
// backend that is also a claim.Pruner runs the retention cases.
//
// A claim.Recorder runs the cases of docs/spec.md#s6-outcomes: a note of a
// slot no attempt ran is written once, loses to a claim, is final, and is
// listed and selected by status like a run.
//
// A claim.Controller runs the cases of docs/spec.md#s6-control: a job's
// control record is read back as written, compared and set on its version
// (a stale version is refused with claim.ErrConflict, and of writers racing
// from one version exactly one wins), paused until a time, and resumed. A
// harness that sets Controller fails when its backend is not one.
//
// A claim.Registry runs the cases of docs/spec.md#s6-cluster: an
// instance's heartbeat record is read back as written, stamped with the
// store's time and the instance's skew, renewed in place, listed not alive
// once expired, and pruned after its retention.
//
// A claim.Batcher also runs the batch cases: a batch decided as its claims
// one by one, in order, and batches racing on the same runs. A
// claim.Preparer runs the races and the re-sent claim on prepared runs.
//
// With Harness.Permanent, a store's refusal that no re-send changes must
// be a claim.PermanentError, from the open or from the first claim.
//
// ProcessRace and HelperProcess race claimers in separate OS processes on
// one store, for stores that several processes share (SQLite's file).
package claimtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// Harness is how Exercise gets stores of the backend under test.
type Harness struct {
	// New returns a fresh backend on an isolated store (its own file,
	// schema, key prefix or namespace), closed by t.Cleanup. Every case
	// calls it once, so cases never see each other's runs.
	New func(t *testing.T) claim.Backend

	// Open, if set, returns another backend on the same store as b: a
	// second instance on its own connection(s), closed by t.Cleanup. The
	// races then spread their claimers over Connections backends, so that
	// the store (not one client's mutex) has to pick the winner.
	Open func(t *testing.T, b claim.Backend) claim.Backend
	// Connections is how many backends the races use when Open is set
	// (default 4).
	Connections int

	// Transient, if set, reports the errors the backend documents as
	// transient: "no answer arrived, re-send the claim". The races re-send
	// such a claim with the same token (docs/spec.md#s3-3) and count the retry;
	// every other error fails the case. Nil: every error fails.
	Transient func(err error) bool

	// Advance, if set, moves the store clock of b forward by d. A backend
	// on a fake clock (the in-memory one) sets it; the cases that wait for
	// a lease to expire then advance instead of polling, and the check that
	// store time is close to the local clock is skipped.
	Advance func(b claim.Backend, d time.Duration)

	// ShortLease is the lease of the cases that wait for an expiry
	// (default 300ms). Raise it for a store whose round trips are slow.
	ShortLease time.Duration
	// LeaseTolerance is how far Result.LeaseUntil may be from
	// Result.StoreNow + lease (default 10ms); both should come from one
	// reading of the store's clock.
	LeaseTolerance time.Duration
	// ClockSkew is how far store time may be from the local clock (default
	// 5s). It catches unit and time-zone mistakes, not real skew.
	ClockSkew time.Duration
	// ExpiryWait bounds the wait for a lease to expire (default 30s).
	ExpiryWait time.Duration

	// Permanent, if set, provokes one refusal of the store that no
	// re-send changes (a role without privileges, an ACL user without
	// access to the keys, a stream or queue that exists with other
	// settings) on a store of its own, closed by t.Cleanup. It returns
	// the error of opening the backend, or the opened backend, whose
	// first claim the store then refuses. The case checks that the error
	// is a claim.PermanentError (docs/write-a-backend.md#classify).
	Permanent func(t *testing.T) (claim.Backend, error)

	// Controller says that the backend documents itself as a
	// claim.Controller: Exercise then fails when it is not one, rather
	// than skip the Control cases.
	Controller bool
	// Registry says that the backend documents itself as a
	// claim.Registry: Exercise then fails when it is not one.
	Registry bool

	// Skip names cases (as in "Lease/Takeover") to skip, each with the
	// reason the backend documents.
	Skip map[string]string
}

func (h Harness) withDefaults() Harness {
	orDefault(&h.Connections, 4)
	orDefault(&h.ShortLease, 300*time.Millisecond)
	orDefault(&h.LeaseTolerance, 10*time.Millisecond)
	orDefault(&h.ClockSkew, 5*time.Second)
	orDefault(&h.ExpiryWait, 30*time.Second)
	return h
}

// orDefault sets *p to d when *p is zero or less (an option left unset).
func orDefault[T int | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
	}
}

// Exercise runs the conformance suite against h's backend.
func Exercise(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("claimtest: Harness.New is required")
	}
	h = h.withDefaults()
	probe := h.New(t)
	_, leaser := probe.(claim.Leaser)
	s := &suite{h: h, leaser: leaser}
	for _, g := range s.groups(t, probe) {
		if !g.on {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				if c.f != nil {
					s.run(t, c.name, c.f)
				}
			}
		})
	}
}

// group is the cases of one capability, run as subtests of name when on.
type group struct {
	name  string
	on    bool
	cases []testCase
}

// testCase is one case of a group; a nil f leaves it out.
type testCase struct {
	name string
	f    func(t *testing.T)
}

// only returns f when on, else nil: a case of a group that needs more than
// the group's capability.
func only(on bool, f func(t *testing.T)) func(t *testing.T) {
	if on {
		return f
	}
	return nil
}

// groups lists the cases of every capability, each group on when probe's
// backend has the capability. It fails t when the harness documents a
// capability that probe lacks.
func (s *suite) groups(t *testing.T, probe claim.Backend) []group {
	t.Helper()
	leaser := s.leaser
	_, pruner := probe.(claim.Pruner)
	_, batcher := probe.(claim.Batcher)
	_, preparer := probe.(claim.Preparer)
	_, recorder := probe.(claim.Recorder)
	_, countPruner := probe.(claim.CountPruner)
	return []group{
		{"Claim", true, s.claimCases()},
		{"ClaimOnly", !leaser, []testCase{{"LateUsesInstanceClock", s.testLateUsesInstanceClock}}},
		{"Lease", leaser, s.leaseCases()},
		{"Batch", batcher, []testCase{
			{"DecidesEachInOrder", s.testBatchDecidesEachInOrder},
			{"Overlap", only(leaser, s.testBatchOverlap)},
			{"Race", s.testBatchRace},
		}},
		{"Prepared", preparer, []testCase{
			{"Race", s.testPreparedRace},
			{"DuringRace", s.testPreparedDuringRace},
			{"Resent", s.testPreparedResent},
		}},
		{"Record", recorder, s.recordCases(pruner)},
		{"Control", has[claim.Controller](t, probe, s.h.Controller), s.controlCases()},
		{"Registry", has[claim.Registry](t, probe, s.h.Registry), s.registryCases()},
		{"Refused", s.h.Permanent != nil, []testCase{{"IsPermanent", s.testRefusedIsPermanent}}},
		{"Keep", countPruner && leaser, []testCase{
			{"KeepsTheNewest", s.testKeep},
			{"RefusesBadArgs", s.testKeepRefusesBadArgs},
		}},
		{"Prune", pruner, []testCase{
			{"DeletesOldFinished", s.testPrune},
			{"PrunedSlotIsLate", s.testPrunedSlotIsLate},
			{"LostClaimIsNotTakenOver", only(leaser, s.testLostClaim)},
		}},
	}
}

// claimCases are the cases every backend runs.
func (s *suite) claimCases() []testCase {
	return []testCase{
		{"FirstClaimWins", s.testFirstClaimWins},
		{"ResentTokenWins", s.testResentTokenWins},
		{"OtherTokenLoses", s.testOtherTokenLoses},
		{"Late", s.testLate},
		{"WithinMaxLate", s.testWithinMaxLate},
		{"FinishThenListed", s.testFinishThenListed},
		{"ClaimedAhead", s.testClaimedAhead},
		{"Race", s.testRace},
	}
}

// leaseCases are the cases of a claim.Leaser.
func (s *suite) leaseCases() []testCase {
	return []testCase{
		{"StoreTime", s.testStoreTime},
		{"IgnoresInstanceClock", s.testIgnoresInstanceClock},
		{"ReadShowsClaim", s.testReadShowsClaim},
		{"ReadNotFound", s.testReadNotFound},
		{"DoneAfterFinish", s.testDoneAfterFinish},
		{"FinishRecords", s.testFinishRecords},
		{"ListRuns", s.testListRuns},
		{"OverlapSkip", s.testOverlapSkip},
		{"OverlapAllow", s.testOverlapAllow},
		{"OverlapAfterFinish", s.testOverlapAfterFinish},
		{"OverlapOtherJob", s.testOverlapOtherJob},
		{"OverlapIgnoresExpiredLease", s.testOverlapIgnoresExpiredLease},
		{"OverlapGuardsTakeover", s.testOverlapGuardsTakeover},
		{"OverlapAllowTakeover", s.testOverlapAllowTakeover},
		{"OverlapReplace", s.testOverlapReplace},
		{"OverlapReplaceGuardsTakeover", s.testOverlapReplaceGuardsTakeover},
		{"OverlapQueue", s.testOverlapQueue},
		{"Takeover", s.testTakeover},
		{"ResentClaimAfterExpiry", s.testResentClaimAfterExpiry},
		{"AttemptsRunOut", s.testAttemptsRunOut},
		{"RenewExtends", s.testRenewExtends},
		{"FinishedIsFenced", s.testFinishedIsFenced},
		{"FinishResent", s.testFinishResent},
		{"Release", s.testRelease},
		{"TakeoverRace", s.testTakeoverRace},
		{"OverlapRace", s.testOverlapRace},
	}
}

// recordCases are the cases of a claim.Recorder; pruner adds the case of
// a claim.Pruner's notes.
func (s *suite) recordCases(pruner bool) []testCase {
	return []testCase{
		{"ThenListed", s.testRecordThenListed},
		{"SlotIsFinal", s.testRecordedSlotIsFinal},
		{"KeepsTheRun", s.testRecordKeepsTheRun},
		{"Twice", s.testRecordTwice},
		{"ListSelectsStatuses", s.testListSelectsStatuses},
		{"Race", s.testRecordRace},
		{"Prune", only(pruner, s.testPruneNotes)},
	}
}

// controlCases are the cases of a claim.Controller.
func (s *suite) controlCases() []testCase {
	return []testCase{
		{"SetThenRead", s.testControlSetThenRead},
		{"StaleVersion", s.testControlStaleVersion},
		{"Until", s.testControlUntil},
		{"Resume", s.testControlResume},
		{"JobsApart", s.testControlJobsApart},
		{"Race", s.testControlRace},
		{"Triggers", s.testControlTriggers},
	}
}

// registryCases are the cases of a claim.Registry.
func (s *suite) registryCases() []testCase {
	return []testCase{
		{"BeatThenListed", s.testBeatThenListed},
		{"Renew", s.testBeatRenew},
		{"Skew", s.testBeatSkew},
		{"Expires", s.testBeatExpires},
		{"Pruned", s.testBeatPruned},
		{"Apart", s.testBeatApart},
	}
}

// suite carries the harness through the cases.
type suite struct {
	h      Harness
	leaser bool
}

// run runs one case as a parallel subtest, unless the harness skips it.
func (s *suite) run(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		for k, why := range s.h.Skip {
			if matchesCase(t.Name(), k) {
				t.Skipf("skipped by the harness: %s", why)
			}
		}
		t.Parallel()
		f(t)
	})
}

// matchesCase reports whether the test name ends with the case path k.
func matchesCase(testName, k string) bool {
	n, m := len(testName), len(k)
	return n >= m && testName[n-m:] == k && (n == m || testName[n-m-1] == '/')
}

// ctx returns a context for one case, ended at the case's end.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// begin starts a case: its context, a fresh backend, and the store's time.
func (s *suite) begin(t *testing.T) (context.Context, claim.Backend, time.Time) {
	t.Helper()
	ctx, b := s.ctx(t), s.h.New(t)
	return ctx, b, s.storeNow(ctx, t, b)
}

// newJob returns a job name unique to the case, valid per
// docs/spec.md#s6-config.
func newJob(prefix string) string {
	return fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
}

// storeNow reads the store's clock with a claim of a job of its own: a lease
// backend's Result.StoreNow; the local clock for a claim-only backend.
func (s *suite) storeNow(ctx context.Context, t *testing.T, b claim.Backend) time.Time {
	t.Helper()
	now := time.Now()
	r := request(newJob("clock"), now.UnixMilli(), now)
	r.MaxLate = 1000 * time.Hour // whatever the skew, the probe is not late
	res, err := b.Claim(ctx, r)
	if err != nil {
		t.Fatalf("probe claim to read store time: %v", err)
	}
	if res.StoreNow.IsZero() {
		if s.leaser {
			t.Fatalf("a lease backend must return its store time in Result.StoreNow, got zero")
		}
		return now
	}
	return res.StoreNow
}

// request is a claim of (job, slot) by a fresh token with the defaults of
// docs/spec.md#s6-config (maxLate 1h to keep the cases away from the late
// boundary, lease 1m, 3 attempts, overlap skip).
func request(job string, slot int64, now time.Time) claim.Request {
	return claim.Request{
		Job:         job,
		Slot:        slot,
		Token:       claim.NewToken(),
		Instance:    "instance-" + claim.NewToken().Short(),
		MaxLate:     time.Hour,
		Lease:       time.Minute,
		MaxAttempts: 3,
		Overlap:     claim.OverlapSkip,
		Now:         now,
	}
}

// backup returns r re-sent by another instance with a fresh token.
func backup(r claim.Request) claim.Request {
	r.Token = claim.NewToken()
	r.Instance = "instance-" + claim.NewToken().Short()
	return r
}

func mustClaim(ctx context.Context, t *testing.T, b claim.Backend, r claim.Request) claim.Result {
	t.Helper()
	res, err := b.Claim(ctx, r)
	if err != nil {
		t.Fatalf("claim %s@%d (token %s): unexpected error: %v", r.Job, r.Slot, r.Token.Short(), err)
	}
	return res
}

// mustRead reads r's run and the store's time from a lease backend,
// failing the case on error.
func mustRead(ctx context.Context, t *testing.T, b claim.Backend, r claim.Request) (claim.Run, time.Time) {
	t.Helper()
	run, now, err := as[claim.Leaser](t, b).Read(ctx, r.Job, r.Slot)
	if err != nil {
		t.Fatalf("read %s@%d: %v", r.Job, r.Slot, err)
	}
	return run, now
}

// listOf lists job's runs in the given states (none: all).
func listOf(ctx context.Context, t *testing.T, b claim.Backend, job string, limit int, st ...claim.Status) []claim.Run {
	t.Helper()
	runs, err := b.ListRuns(ctx, claim.ListQuery{Job: job, Limit: limit, Statuses: st})
	if err != nil {
		t.Fatalf("ListRuns(%s, %v): %v", job, st, err)
	}
	return runs
}

// wantWon fails unless res is won(attempt).
func wantWon(t *testing.T, res claim.Result, attempt int, what string) {
	t.Helper()
	if res.Outcome != claim.Won || res.Attempt != attempt {
		t.Fatalf("%s: want won(%d), got %s(%d)", what, attempt, res.Outcome, res.Attempt)
	}
}

// wantOutcome fails unless res has the outcome want.
func wantOutcome(t *testing.T, res claim.Result, want claim.Outcome, what string) {
	t.Helper()
	if res.Outcome != want {
		t.Fatalf("%s: want %s, got %s(%d)", what, want, res.Outcome, res.Attempt)
	}
}

// wantFenced fails unless err is claim.ErrFenced.
func wantFenced(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, claim.ErrFenced) {
		t.Fatalf("%s: want an error wrapping claim.ErrFenced, got %v", what, err)
	}
}

// wantNear fails unless got is within tol of want.
func wantNear(t *testing.T, got, want time.Time, tol time.Duration, what string) {
	t.Helper()
	if d := got.Sub(want); d < -tol || d > tol {
		t.Fatalf("%s: want %s (±%v), got %s (off by %v)", what, want.UTC().Format(time.RFC3339Nano),
			tol, got.UTC().Format(time.RFC3339Nano), d)
	}
}

// as returns b as the capability T (claim.Leaser, claim.Recorder, ...),
// or fails the case: the cases of a capability run only on its backends.
func as[T any](t *testing.T, b claim.Backend) T {
	t.Helper()
	x, ok := b.(T)
	if !ok {
		t.Fatalf("%T is not a %v", b, reflect.TypeFor[T]())
	}
	return x
}

// has reports whether probe is a T; when the harness documents its backend
// as one (Harness.Controller, Harness.Registry) and it is not, it fails t.
func has[T any](t *testing.T, probe claim.Backend, documented bool) bool {
	t.Helper()
	_, ok := probe.(T)
	if !ok && documented {
		typ := reflect.TypeFor[T]()
		t.Errorf("Harness.%s is set, but %T is not a %v", typ.Name(), probe, typ)
	}
	return ok
}

// findAll returns the last element of all that match picks, and how many
// it picks.
func findAll[T any](all []T, match func(T) bool) (last T, n int) {
	for _, x := range all {
		if match(x) {
			last, n = x, n+1
		}
	}
	return last, n
}

// awaitExpired waits until the store says the lease of (job, slot) has
// ended (lease_until < store now) and returns that store time. With
// Harness.Advance it moves the store clock instead of waiting.
func (s *suite) awaitExpired(ctx context.Context, t *testing.T, b claim.Backend, job string, slot int64) time.Time {
	t.Helper()
	l := as[claim.Leaser](t, b)
	run, now, err := l.Read(ctx, job, slot)
	if err != nil {
		t.Fatalf("read %s@%d while waiting for its lease to expire: %v", job, slot, err)
	}
	if s.h.Advance != nil && !now.After(run.LeaseUntil) {
		s.h.Advance(b, run.LeaseUntil.Sub(now)+time.Millisecond)
	}
	deadline := time.Now().Add(s.h.ExpiryWait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		run, now, err = l.Read(ctx, job, slot)
		if err != nil {
			t.Fatalf("read %s@%d while waiting for its lease to expire: %v", job, slot, err)
		}
		if now.After(run.LeaseUntil) {
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease of %s@%d (until %s) has not expired by store time %s after %v: is Read's store time moving?",
				job, slot, run.LeaseUntil.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano), s.h.ExpiryWait)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for the lease of %s@%d to expire: %v", job, slot, ctx.Err())
		case <-tick.C:
		}
	}
}

// connections returns the backends a race spreads its claimers over: b, and
// with Harness.Open more instances on the same store.
func (s *suite) connections(t *testing.T, b claim.Backend) []claim.Backend {
	conns := []claim.Backend{b}
	if s.h.Open != nil {
		for len(conns) < s.h.Connections {
			conns = append(conns, s.h.Open(t, b))
		}
	}
	return conns
}

// racers is how many claimers race for the same runs.
const racers = 16

// plansOf gives each of n claimers, with a token of its own and the
// instance name prefix-i, the claims reqs in order.
func plansOf(n int, prefix string, reqs []claim.Request) [][]claim.Request {
	plans := make([][]claim.Request, n)
	for g := range plans {
		tok, inst := claim.NewToken(), fmt.Sprintf("%s-%d", prefix, g)
		for _, r := range reqs {
			r.Token, r.Instance = tok, inst
			plans[g] = append(plans[g], r)
		}
	}
	return plans
}

// attempt is one claim made in a race and its answer.
type attempt struct {
	req     claim.Request
	res     claim.Result
	err     error
	retries int // transient errors re-sent with the same token
}

// race runs plans[i] (claims in order) on goroutine i, goroutine i using
// conns[i%len(conns)]; all goroutines start together. Transient errors are
// re-sent with the same token, as the daemon does.
func (s *suite) race(ctx context.Context, conns []claim.Backend, plans [][]claim.Request) [][]attempt {
	out := make([][]attempt, len(plans))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, plan := range plans {
		b := conns[i%len(conns)]
		out[i] = make([]attempt, len(plan))
		wg.Go(func() {
			<-start
			for j, r := range plan {
				a := &out[i][j]
				a.req = r
				for {
					a.res, a.err = b.Claim(ctx, r)
					if a.err == nil || s.h.Transient == nil || !s.h.Transient(a.err) || ctx.Err() != nil {
						break
					}
					a.retries++
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return out
}
