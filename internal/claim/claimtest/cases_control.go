package claimtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The cases of backends that are claim.Controller (docs/spec.md#s6-control):
// a job's control record is written whole, read back as written, and
// compared and set on its version, so that of writers that read the same
// version exactly one wins.

// pauseOf is a pause of job by a fresh operator, stamped now.
func pauseOf(job, reason string) claim.Control {
	return claim.Control{
		Job: job, Paused: true, Reason: reason,
		By: "op-" + claim.NewToken().Short() + "@host", At: time.Now().UnixMilli(),
	}
}

func mustSet(ctx context.Context, t *testing.T, b claim.Backend, c claim.Control, prev int64, what string) claim.Control {
	t.Helper()
	got, err := as[claim.Controller](t, b).SetControl(ctx, c, prev)
	if err != nil {
		t.Fatalf("%s: SetControl(%s, prev %d): %v", what, c.Job, prev, err)
	}
	if got.Version <= prev {
		t.Fatalf("%s: SetControl returned version %d, want more than the previous %d", what, got.Version, prev)
	}
	wantSame(t, got, c, what+": the record SetControl returned")
	return got
}

// wantConflict fails unless err wraps claim.ErrConflict.
func wantConflict(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, claim.ErrConflict) {
		t.Fatalf("%s: want an error wrapping claim.ErrConflict, got %v", what, err)
	}
}

// wantSame fails unless got holds want's fields (the version aside).
func wantSame(t *testing.T, got, want claim.Control, what string) {
	t.Helper()
	want.Version = got.Version
	if !got.Same(want) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// controlOf reads every record and returns job's (Version 0: none), and
// fails when the job has several.
func controlOf(ctx context.Context, t *testing.T, b claim.Backend, job string) claim.Control {
	t.Helper()
	all, err := as[claim.Controller](t, b).Controls(ctx)
	if err != nil {
		t.Fatalf("Controls: %v", err)
	}
	out, n := findAll(all, func(c claim.Control) bool { return c.Job == job })
	if n > 1 {
		t.Fatalf("Controls lists %d records of %s, want one: %+v", n, job, all)
	}
	return out
}

func (s *suite) testControlSetThenRead(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	job := newJob("paused")
	if got := controlOf(ctx, t, b, job); got.Version != 0 {
		t.Fatalf("a job never paused has no record: got %+v", got)
	}
	// Quotes, a line feed, a tab and non-ASCII text come back as written.
	c := pauseOf(job, "maintenance: \"db\" 'move'\nticket\t#42, été ✓")
	set := mustSet(ctx, t, b, c, 0, "the first record of a job")
	got := controlOf(ctx, t, b, job)
	if got.Version != set.Version {
		t.Fatalf("read back version %d, SetControl returned %d", got.Version, set.Version)
	}
	wantSame(t, got, c, "the record read back")
	if !got.PausedAt(time.Now()) {
		t.Fatalf("a pause with no until holds every slot: %+v", got)
	}
}

func (s *suite) testControlStaleVersion(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	job := newJob("stale")
	v1 := mustSet(ctx, t, b, pauseOf(job, "first"), 0, "the first record")
	_, err := as[claim.Controller](t, b).SetControl(ctx, pauseOf(job, "also first"), 0)
	wantConflict(t, err, "a second first record (prev 0) of a job that has one")
	second := pauseOf(job, "second")
	v2 := mustSet(ctx, t, b, second, v1.Version, "a write at the current version")
	_, err = as[claim.Controller](t, b).SetControl(ctx, pauseOf(job, "stale"), v1.Version)
	wantConflict(t, err, "a write at a stale version")
	_, err = as[claim.Controller](t, b).SetControl(ctx, pauseOf(job, "ahead"), v2.Version+1000)
	wantConflict(t, err, "a write at a version the record never had")
	got := controlOf(ctx, t, b, job)
	if got.Version != v2.Version {
		t.Fatalf("after refused writes: version %d, want %d", got.Version, v2.Version)
	}
	wantSame(t, got, second, "after refused writes, the last write that won")
}

func (s *suite) testControlUntil(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	job := newJob("until")
	c := pauseOf(job, "until the window ends")
	c.Until = time.Now().Add(time.Hour).Truncate(time.Millisecond).UnixMilli()
	mustSet(ctx, t, b, c, 0, "a pause with until")
	got := controlOf(ctx, t, b, job)
	wantSame(t, got, c, "a pause with until, read back")
	until := got.UntilTime()
	if !got.PausedAt(until.Add(-time.Millisecond)) || got.PausedAt(until) || got.PausedAt(until.Add(time.Second)) {
		t.Fatalf("a pause until %v holds the slots before it only: %+v", until, got)
	}
}

func (s *suite) testControlResume(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	job := newJob("resumed")
	p := pauseOf(job, "to be resumed")
	p.Until = time.Now().Add(time.Hour).UnixMilli()
	v1 := mustSet(ctx, t, b, p, 0, "the pause")
	r := claim.Control{Job: job, By: "other@host", At: time.Now().UnixMilli()}
	v2 := mustSet(ctx, t, b, r, v1.Version, "the resume")
	got := controlOf(ctx, t, b, job)
	if got.Version != v2.Version || got.Paused || got.Until != 0 || got.PausedAt(time.Now()) {
		t.Fatalf("a resumed job is not paused: %+v", got)
	}
	wantSame(t, got, r, "the resume read back")
	mustSet(ctx, t, b, pauseOf(job, "again"), v2.Version, "a pause after the resume")
	_, err := as[claim.Controller](t, b).SetControl(ctx, claim.Control{Job: job, Until: 5}, v2.Version)
	if err == nil || errors.Is(err, claim.ErrConflict) {
		t.Fatalf("a record with until and not paused: want a refusal, got %v", err)
	}
	if _, err := as[claim.Controller](t, b).SetControl(ctx, claim.Control{}, 0); err == nil || errors.Is(err, claim.ErrConflict) {
		t.Fatalf("a record with no job: want a refusal, got %v", err)
	}
}

// testControlJobsApart: the records of two jobs are apart, and Controls
// lists both.
func (s *suite) testControlJobsApart(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	a, z := newJob("a"), newJob("z")
	va := mustSet(ctx, t, b, pauseOf(a, "a"), 0, "the record of a")
	mustSet(ctx, t, b, pauseOf(z, "z"), 0, "the record of z (its own first)")
	zc := pauseOf(z, "z again")
	mustSet(ctx, t, b, zc, controlOf(ctx, t, b, z).Version, "z's second")
	if got := controlOf(ctx, t, b, a); got.Version != va.Version || got.Reason != "a" {
		t.Fatalf("a write of z changed a's record: %+v, want version %d", got, va.Version)
	}
	wantSame(t, controlOf(ctx, t, b, z), zc, "z read back")
}

// controlRaceWriters is how many writers race for each version.
const controlRaceWriters = 8

// testControlRace: writers that read the same version race to write; at
// each version exactly one wins, the others get ErrConflict, and the
// record read back is the winner's.
func (s *suite) testControlRace(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	conns := s.connections(t, b)
	job := newJob("race")
	prev := int64(0)
	for round := range 3 {
		recs := make([]claim.Control, controlRaceWriters)
		errs := make([]error, controlRaceWriters)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range recs {
			c := pauseOf(job, fmt.Sprintf("round %d writer %d", round, i))
			wg.Go(func() {
				<-start
				recs[i], errs[i] = as[claim.Controller](t, conns[i%len(conns)]).SetControl(ctx, c, prev)
			})
		}
		close(start)
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("round %d: writers %d and %d both won version %d", round, won, i, prev)
			case err == nil:
				won = i
			default:
				wantConflict(t, err, fmt.Sprintf("round %d: a writer that lost the race", round))
			}
		}
		if won < 0 {
			t.Fatalf("round %d: no writer won version %d: %v", round, prev, errs)
		}
		got := controlOf(ctx, t, b, job)
		if !got.Same(recs[won]) {
			t.Fatalf("round %d: read back %+v, the winner wrote %+v", round, got, recs[won])
		}
		prev = got.Version
	}
}

// triggerOf is a trigger of the run at slot.
func triggerOf(kind string, slot int64, attempt int) claim.Trigger {
	t := claim.Trigger{
		ID: string(claim.NewToken()), Kind: kind, Slot: slot, Attempt: attempt, Due: slot,
		By: "op \"quoted\" été@host", At: time.Now().UnixMilli(),
	}
	if kind == claim.TriggerRetry {
		t.Of = slot - 1500
	}
	return t
}

// testControlTriggers: a record's triggers (docs/spec.md#s6-trigger) are
// written and read back with the rest of it, a trigger added at a stale
// version is refused like any write, and a pause written over the record
// with its triggers keeps them.
func (s *suite) testControlTriggers(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	job := newJob("triggered")
	now := time.Now().UnixMilli()
	first := claim.Control{Job: job}.WithTrigger(triggerOf(claim.TriggerManual, now, 1), 0)
	v1 := mustSet(ctx, t, b, first, 0, "a record holding a trigger only")
	got := controlOf(ctx, t, b, job)
	wantSame(t, got, first, "the trigger read back")
	if tr, ok := got.TriggerOf(now); !ok || tr != first.Triggers[0] {
		t.Fatalf("TriggerOf(%d) = %+v, %v; want %+v", now, tr, ok, first.Triggers[0])
	}
	// Two writers add a trigger each at the version both read: one wins.
	a := got.WithTrigger(triggerOf(claim.TriggerRetry, now+2000, 2), 0)
	z := got.WithTrigger(triggerOf(claim.TriggerManual, now+3000, 1), 0)
	v2 := mustSet(ctx, t, b, a, v1.Version, "the retry added at the current version")
	_, err := as[claim.Controller](t, b).SetControl(ctx, z, v1.Version)
	wantConflict(t, err, "a trigger added at a stale version")
	got = controlOf(ctx, t, b, job)
	wantSame(t, got, a, "after the refused write, the winner's triggers")
	if len(got.Triggers) != 2 || got.Triggers[1].Of != now+500 || got.Triggers[1].Attempt != 2 {
		t.Fatalf("want the manual run and its retry (of %d, attempt 2), got %+v", now+500, got.Triggers)
	}
	// The loser reads again and adds its trigger over the winner's.
	z = got.WithTrigger(z.Triggers[len(z.Triggers)-1], 0)
	v3 := mustSet(ctx, t, b, z, v2.Version, "the loser's trigger, read again")
	p := pauseOf(job, "paused with triggers pending")
	p.Triggers = v3.Triggers
	mustSet(ctx, t, b, p, v3.Version, "a pause that carries the triggers over")
	got = controlOf(ctx, t, b, job)
	wantSame(t, got, p, "the pause read back")
	if len(got.Triggers) != 3 {
		t.Fatalf("the pause kept %d triggers, want 3: %+v", len(got.Triggers), got.Triggers)
	}
	bad := got.WithTrigger(claim.Trigger{ID: "x", Kind: "cron", Slot: now, Attempt: 1, Due: now}, 0)
	if _, err := as[claim.Controller](t, b).SetControl(ctx, bad, got.Version); err == nil || errors.Is(err, claim.ErrConflict) {
		t.Fatalf("a trigger of an unknown kind: want a refusal, got %v", err)
	}
}
