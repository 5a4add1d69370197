package claimtest

import (
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The keepRuns cases of backends that are claim.CountPruner
// (docs/spec.md#s6-keep-runs).

// keepState builds a job's slots: finished runs 5h, 4h, 2h, 1h and 1m old,
// a running run 3h old (live lease), and where the store records notes, a
// note 90m old. It returns the job and the slot of each age.
func (s *suite) keepState(t *testing.T, b claim.Backend, now time.Time) (string, map[time.Duration]int64) {
	t.Helper()
	ctx := s.ctx(t)
	job := newJob("keep")
	slots := map[time.Duration]int64{}
	for _, age := range []time.Duration{5 * time.Hour, 4 * time.Hour, 3 * time.Hour, 2 * time.Hour, time.Hour, time.Minute} {
		r := request(job, now.Add(-age).UnixMilli(), now)
		r.MaxLate, r.Overlap, r.Lease = 6*time.Hour, claim.OverlapAllow, time.Hour
		claimRun(ctx, t, b, r, age != 3*time.Hour, "claim of a run "+age.String()+" old")
		slots[age] = r.Slot
	}
	if _, ok := b.(claim.Recorder); ok {
		n := note(job, now.Add(-90*time.Minute).UnixMilli(), claim.StatusSkipped, "overlap")
		mustRecord(ctx, t, b, n, true, "a note 90m old")
		slots[90*time.Minute] = n.Slot
	}
	return job, slots
}

// testKeep: the keep newest slots stay, a running run stays however old,
// a slot younger than olderThan stays; the rest goes, and another job is
// untouched. A second prune finds nothing.
func (s *suite) testKeep(t *testing.T) {
	ctx, b, now := s.begin(t)
	p := as[claim.CountPruner](t, b)
	other := request(newJob("keepother"), now.Add(-5*time.Hour).UnixMilli(), now)
	other.MaxLate = 6 * time.Hour
	claimRun(ctx, t, b, other, true, "another job's old run")
	job, slots := s.keepState(t, b, now)
	_, noted := slots[90*time.Minute]

	// Keep 3 older than 30m: the newest three are 1m, 1h and the note
	// (90m) where there is one, else 2h.
	want := int64(3) // 2h, 4h, 5h
	gone := []time.Duration{2 * time.Hour, 4 * time.Hour, 5 * time.Hour}
	if !noted {
		want, gone = 2, gone[1:]
	}
	if n, err := p.PruneKeep(ctx, job, 3, 30*time.Minute); err != nil || n != want {
		t.Fatalf("keep 3: want %d deleted, got %d, %v", want, n, err)
	}
	for _, age := range gone {
		if _, _, err := as[claim.Leaser](t, b).Read(ctx, job, slots[age]); !isNotFound(err) {
			t.Fatalf("the run %v old is beyond the 3 newest: want claim.ErrNotFound, got %v", age, err)
		}
	}
	if run, _, err := as[claim.Leaser](t, b).Read(ctx, job, slots[3*time.Hour]); err != nil || run.Status != claim.StatusRunning {
		t.Fatalf("a running run is never pruned: got %+v, %v", run, err)
	}
	if n, err := p.PruneKeep(ctx, job, 3, 30*time.Minute); err != nil || n != 0 {
		t.Fatalf("a second prune must find nothing: got %d, %v", n, err)
	}
	// Keep 1 older than 75m: the 1h run is younger than that and stays.
	if n, err := p.PruneKeep(ctx, job, 1, 75*time.Minute); err != nil || (noted && n != 1) || (!noted && n != 0) {
		t.Fatalf("keep 1 older than 75m: want only the 90m note deleted, got %d, %v", n, err)
	}
	runs := listOf(ctx, t, b, job, 50)
	if len(runs) != 3 || runs[0].Slot != slots[time.Minute] || runs[1].Slot != slots[time.Hour] || runs[2].Slot != slots[3*time.Hour] {
		t.Fatalf("after keep 1 older than 75m: want the 1m, 1h and the running 3h run, got %+v", runs)
	}
	if got := listOf(ctx, t, b, other.Job, 50); len(got) != 1 {
		t.Fatalf("another job's run must stay: got %+v", got)
	}
	// The pruned slot is older than maxLate: a claim of it is late, never
	// won a second time.
	late := request(job, slots[2*time.Hour], now)
	late.MaxLate = 30 * time.Minute
	wantOutcome(t, mustClaim(ctx, t, b, late), claim.Late, "a claim of a slot keepRuns pruned")
}

// testKeepRefusesBadArgs: keep below 1, a negative age and an empty job
// are refused, and nothing is deleted.
func (s *suite) testKeepRefusesBadArgs(t *testing.T) {
	ctx, b, now := s.begin(t)
	p := as[claim.CountPruner](t, b)
	job, _ := s.keepState(t, b, now)
	for _, c := range []struct {
		job  string
		keep int
		age  time.Duration
	}{{job, 0, time.Minute}, {job, -1, time.Minute}, {job, 1, -time.Minute}, {"", 1, time.Minute}} {
		if n, err := p.PruneKeep(ctx, c.job, c.keep, c.age); err == nil || n != 0 {
			t.Fatalf("PruneKeep(%q, %d, %v): want an error and nothing deleted, got %d, %v", c.job, c.keep, c.age, n, err)
		}
	}
	if n := len(listOf(ctx, t, b, job, 50)); n < 6 {
		t.Fatalf("a refused prune deleted runs: %d left", n)
	}
}
