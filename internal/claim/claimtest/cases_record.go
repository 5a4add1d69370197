package claimtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The cases of backends that are claim.Recorder: the outcome of a slot no
// attempt ran is recorded once, is final, and is listed like a run.

// note is a note of (job, slot) by a fresh instance.
func note(job string, slot int64, st claim.Status, reason string) claim.Note {
	return claim.Note{
		Job: job, Slot: slot, Status: st, Reason: reason,
		Instance: "instance-" + claim.NewToken().Short(), At: time.Now(),
	}
}

func mustRecord(ctx context.Context, t *testing.T, b claim.Backend, n claim.Note, want bool, what string) {
	t.Helper()
	got, err := as[claim.Recorder](t, b).Record(ctx, n)
	if err != nil {
		t.Fatalf("%s: Record: %v", what, err)
	}
	if got != want {
		t.Fatalf("%s: Record wrote = %v, want %v", what, got, want)
	}
}

func (s *suite) testRecordThenListed(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("noted")
	n := note(job, now.Add(-time.Second).UnixMilli(), claim.StatusSkipped, "overlap")
	n.HeldBy = now.Add(-2 * time.Second).UnixMilli()
	mustRecord(ctx, t, b, n, true, "the first note of a slot nobody claimed")
	runs := listOf(ctx, t, b, job, 0)
	if len(runs) != 1 {
		t.Fatalf("ListRuns after one note: want 1 run, got %d: %+v", len(runs), runs)
	}
	got := runs[0]
	if got.Slot != n.Slot || got.Status != n.Status || got.Reason != n.Reason || got.HeldBy != n.HeldBy || got.Instance != n.Instance {
		t.Fatalf("the listed note: want slot %d %s reason %q held by %d instance %s, got %+v",
			n.Slot, n.Status, n.Reason, n.HeldBy, n.Instance, got)
	}
	if got.Attempt != 0 || got.ExitCode != nil || !got.StartedAt.IsZero() || got.FinishedAt.IsZero() {
		t.Fatalf("a note has no attempt, no exit code and no start, and is finished: got %+v", got)
	}
	if !got.Status.Final() {
		t.Fatalf("a note is final: got %s", got.Status)
	}
	bad := note(job, n.Slot+1000, claim.StatusRunning, "overlap")
	if _, err := as[claim.Recorder](t, b).Record(ctx, bad); err == nil {
		t.Fatalf("Record of a note with status running: want an error, got none")
	}
}

func (s *suite) testRecordedSlotIsFinal(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("final")
	slot := now.Add(-time.Second).UnixMilli()
	mustRecord(ctx, t, b, note(job, slot, claim.StatusMissed, "late"), true, "a note of a slot nobody claimed")
	want := claim.Done
	if !s.leaser {
		want = claim.Lost
	}
	wantOutcome(t, mustClaim(ctx, t, b, request(job, slot, now)), want, "a claim of a noted slot")
	if runs := listOf(ctx, t, b, job, 0); len(runs) != 1 || runs[0].Status != claim.StatusMissed {
		t.Fatalf("after the claim of a noted slot, the note alone is listed: got %+v", runs)
	}
}

func (s *suite) testRecordKeepsTheRun(t *testing.T) {
	ctx, b, now := s.begin(t)
	r := request(newJob("kept"), now.UnixMilli(), now)
	wantWon(t, mustClaim(ctx, t, b, r), 1, "the claim before the note")
	mustRecord(ctx, t, b, note(r.Job, r.Slot, claim.StatusSkipped, "overlap"), false, "a note of a claimed slot")
	finish(ctx, t, b, r, 1, succeeded(now))
	mustRecord(ctx, t, b, note(r.Job, r.Slot, claim.StatusMissed, "late"), false, "a note of a finished slot")
	runs := listOf(ctx, t, b, r.Job, 0)
	if len(runs) != 1 || runs[0].Status != claim.StatusSucceeded || runs[0].Token != r.Token {
		t.Fatalf("a slot claimed before its note keeps its run: got %+v", runs)
	}
}

func (s *suite) testRecordTwice(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("twice")
	slot := now.Add(-time.Second).UnixMilli()
	first := note(job, slot, claim.StatusMissed, "catch_up")
	mustRecord(ctx, t, b, first, true, "the first note")
	mustRecord(ctx, t, b, note(job, slot, claim.StatusMissed, "late"), false, "a second note of the slot")
	runs := listOf(ctx, t, b, job, 0)
	if len(runs) != 1 || runs[0].Reason != "catch_up" || runs[0].Instance != first.Instance {
		t.Fatalf("the first note stands: got %+v", runs)
	}
}

func (s *suite) testListSelectsStatuses(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("select")
	base := now.Add(-time.Minute).UnixMilli()
	// Slots 0, 2, 4 are runs; 1, 3, 5 are notes: the newest is a note.
	for i := range int64(6) {
		slot := base + i*1000
		if i%2 == 1 {
			mustRecord(ctx, t, b, note(job, slot, claim.StatusMissed, "late"), true, fmt.Sprintf("note %d", i))
			continue
		}
		r := request(job, slot, now)
		r.Overlap = claim.OverlapAllow
		claimRun(ctx, t, b, r, true, fmt.Sprintf("claim %d", i))
	}
	slots := func(runs []claim.Run) []int64 {
		out := make([]int64, len(runs))
		for i, r := range runs {
			out[i] = (r.Slot - base) / 1000
		}
		return out
	}
	check := func(got []claim.Run, what string, want ...int64) {
		t.Helper()
		if g := slots(got); fmt.Sprint(g) != fmt.Sprint(want) {
			t.Fatalf("%s: want slots %v (newest first), got %v", what, want, g)
		}
	}
	check(listOf(ctx, t, b, job, 0), "every status", 5, 4, 3, 2, 1, 0)
	check(listOf(ctx, t, b, job, 2, claim.RunStatuses...), "runs only, limit 2", 4, 2)
	check(listOf(ctx, t, b, job, 0, claim.StatusMissed), "missed only", 5, 3, 1)
	check(listOf(ctx, t, b, job, 0, claim.StatusSkipped), "skipped only")
}

// testRecordRace races claimers and recorders on the same slots: each slot
// ends with one outcome, a won claim or one note.
func (s *suite) testRecordRace(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("notrace")
	const slots, racers = 20, 4
	var won, wrote [slots]int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range racers {
		conn := b
		if s.h.Open != nil {
			conn = s.h.Open(t, b)
		}
		wg.Go(func() {
			for k := range slots {
				slot := now.Add(-time.Duration(k+1) * time.Second).UnixMilli()
				if (i+k)%2 == 0 {
					res, err := conn.Claim(ctx, request(job, slot, now))
					if err != nil {
						t.Errorf("claim of slot %d: %v", k, err)
						return
					}
					mu.Lock()
					won[k] += map[bool]int{true: 1}[res.Outcome == claim.Won]
					mu.Unlock()
					continue
				}
				ok, err := as[claim.Recorder](t, conn).Record(ctx, note(job, slot, claim.StatusMissed, "late"))
				if err != nil {
					t.Errorf("note of slot %d: %v", k, err)
					return
				}
				mu.Lock()
				wrote[k] += map[bool]int{true: 1}[ok]
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for k := range slots {
		if won[k]+wrote[k] != 1 {
			t.Errorf("slot %d: %d claims won and %d notes written; want one outcome", k, won[k], wrote[k])
		}
	}
	if n := len(listOf(ctx, t, b, job, 100)); n != slots {
		t.Errorf("ListRuns: want one run or note per slot (%d), got %d", slots, n)
	}
}

func (s *suite) testPruneNotes(t *testing.T) {
	ctx, b, now := s.begin(t)
	job := newJob("prunenote")
	old := note(job, now.Add(-2*time.Hour).UnixMilli(), claim.StatusMissed, "late")
	young := note(job, now.Add(-10*time.Minute).UnixMilli(), claim.StatusSkipped, "overlap")
	mustRecord(ctx, t, b, old, true, "a 2h-old note")
	mustRecord(ctx, t, b, young, true, "a 10m-old note")
	if _, err := as[claim.Pruner](t, b).Prune(ctx, time.Hour); err != nil {
		t.Fatalf("prune older than 1h: %v", err)
	}
	runs := listOf(ctx, t, b, job, 0)
	if len(runs) != 1 || runs[0].Slot != young.Slot {
		t.Fatalf("prune older than 1h keeps the 10m-old note only: got %+v", runs)
	}
}
