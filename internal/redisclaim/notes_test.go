package redisclaim_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/redisclaim"
)

// mkNote is a note of (job, slot) by a fresh instance.
func mkNote(job string, slot int64, st claim.Status, reason string) claim.Note {
	return claim.Note{Job: job, Slot: slot, Status: st, Reason: reason,
		Instance: "i-" + claim.NewToken().Short(), At: time.Now()}
}

func mustRecord(t *testing.T, b claim.Recorder, n claim.Note, want bool, what string) {
	t.Helper()
	got, err := b.Record(t.Context(), n)
	if err != nil || got != want {
		t.Fatalf("%s: Record %s@%d: want %v, got %v %v", what, n.Job, n.Slot, want, got, err)
	}
}

// TestLeaseNoteIsFinal: a noted slot's claims (alone or in a batch) are
// done with no holder, every fenced write of it is fenced, the cheap read
// shows the note (no start, no lease), and the history tells it.
func TestLeaseNoteIsFinal(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	slot := time.Now().Add(-time.Second).UnixMilli()
	n := mkNote("final", slot, claim.StatusSkipped, "overlap")
	n.HeldBy = slot - 60_000
	mustRecord(t, b, n, true, "the note")
	r := request("final", slot)
	if res, err := b.Claim(ctx, r); err != nil || res.Outcome != claim.Done || res.Holder != "" || res.Attempt != 0 {
		t.Fatalf("a claim of a noted slot: want done with no holder, got %+v %v", res, err)
	}
	if res, err := b.ClaimBatch(ctx, []claim.Request{request("final", slot)}); err != nil || res[0].Outcome != claim.Done {
		t.Fatalf("a batch claim of a noted slot: want done, got %+v %v", res, err)
	}
	for what, err := range map[string]error{
		"finish":  b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded}),
		"release": b.Release(ctx, r.Fence(1)),
	} {
		if !errors.Is(err, claim.ErrFenced) {
			t.Errorf("%s of a noted slot: want claim.ErrFenced, got %v", what, err)
		}
	}
	if _, err := b.Renew(ctx, r.Fence(1), time.Minute); !errors.Is(err, claim.ErrFenced) {
		t.Errorf("renew of a noted slot: want claim.ErrFenced, got %v", err)
	}
	run, now, err := b.Read(ctx, "final", slot)
	if err != nil || run.Status != claim.StatusSkipped || run.Reason != "overlap" || run.HeldBy != n.HeldBy ||
		run.Instance != n.Instance || run.Attempt != 0 || !run.StartedAt.IsZero() || !run.LeaseUntil.IsZero() ||
		run.FinishedAt.IsZero() || run.FinishedAt.After(now) {
		t.Fatalf("the cheap read of a note: got %+v (store now %v) %v", run, now, err)
	}
	msgs, err := c.XRange(ctx, "{"+ns+":final}:history", "-", "+").Result()
	if err != nil || len(msgs) != 1 || msgs[0].Values["event"] != "noted" || msgs[0].Values["status"] != "skipped" ||
		msgs[0].Values["reason"] != "overlap" {
		t.Fatalf("history: want one noted event, got %+v %v", msgs, err)
	}
	bad := mkNote("final", -1, claim.StatusMissed, "late")
	if _, err := b.Record(ctx, bad); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("a note of slot -1: want an error, got %v", err)
	}
}

// TestLeaseNoteKeys: the first note of a job indexes the job (as its first
// claim would) and writes only keys of the job's hash tag.
func TestLeaseNoteKeys(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	slot := time.Now().UnixMilli()
	for _, job := range []string{"alpha", "beta-2"} {
		mustRecord(t, b, mkNote(job, slot, claim.StatusMissed, "all_down"), true, "the first note of "+job)
	}
	jobs, err := c.SMembers(ctx, ns+":jobs").Result()
	slices.Sort(jobs)
	if err != nil || !slices.Equal(jobs, []string{"alpha", "beta-2"}) {
		t.Fatalf("the index of jobs: want alpha, beta-2, got %v %v", jobs, err)
	}
	keys, err := namespaceKeys(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	tag := regexp.MustCompile(`^\{` + regexp.QuoteMeta(ns) + `:([^}]+)\}:(history|notes|state)$`)
	kinds := map[string][]string{}
	for _, k := range keys {
		if k == ns+":jobs" {
			continue
		}
		m := tag.FindStringSubmatch(k)
		if m == nil || keySlot(k) != keySlot("{"+ns+":"+m[1]+"}:state") {
			t.Fatalf("key %q is not a key of a job's hash tag", k)
		}
		kinds[m[1]] = append(kinds[m[1]], m[2])
	}
	for _, job := range []string{"alpha", "beta-2"} {
		if got := strings.Join(kinds[job], " "); got != "history notes state" {
			t.Errorf("job %s has keys %s, want history notes state", job, got)
		}
	}
}

// fillJobs writes, for two jobs, a history where the states are unevenly
// spread: a few old runs, a long stretch of skipped notes, missed notes
// among them, then newer runs (some finished, some running).
func fillJobs(t *testing.T, b claim.Backend, base int64) {
	t.Helper()
	ctx := t.Context()
	now := time.Now()
	rec := b.(claim.Recorder)
	for _, job := range []string{"a", "b"} {
		off := int64(0)
		if job == "b" {
			off = 500 // interleaved with a
		}
		for i := range int64(60) {
			slot := base + i*1000 + off
			switch {
			case i < 3 || i >= 55 || i == 30:
				r := request(job, slot)
				r.MaxLate, r.Overlap, r.Now = 2*time.Hour, claim.OverlapAllow, now
				res, err := b.Claim(ctx, r)
				if err != nil || res.Outcome != claim.Won {
					t.Fatalf("claim %s@%d: %+v %v", job, slot, res, err)
				}
				if i%2 == 0 {
					if err := b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusFailed, ExitCode: 3, StartedAt: now, FinishedAt: now}); err != nil {
						t.Fatal(err)
					}
				}
			case i%7 == 0:
				mustRecord(t, rec, mkNote(job, slot, claim.StatusMissed, "late"), true, "missed")
			default:
				mustRecord(t, rec, mkNote(job, slot, claim.StatusSkipped, "overlap"), true, "skipped")
			}
		}
	}
}

// checkSelections compares filtered, limited listings with the full
// listing filtered by hand.
func checkSelections(t *testing.T, b claim.Backend) {
	t.Helper()
	ctx := t.Context()
	all, err := b.ListRuns(ctx, claim.ListQuery{Limit: 1000})
	if err != nil || len(all) != 120 {
		t.Fatalf("the full listing: want 120, got %d %v", len(all), err)
	}
	for _, sel := range [][]claim.Status{
		claim.RunStatuses, claim.NoteStatuses, {claim.StatusMissed}, {claim.StatusRunning},
		{claim.StatusFailed}, {claim.StatusSkipped, claim.StatusRunning}, {claim.StatusTimeout},
		{claim.StatusFailed, claim.StatusMissed},
	} {
		for _, job := range []string{"", "a"} {
			for _, limit := range []int{1, 2, 5, 50} {
				q := claim.ListQuery{Job: job, Limit: limit, Statuses: sel}
				var want []string
				for _, r := range all {
					if (job == "" || r.Job == job) && q.Wants(r.Status) && len(want) < limit {
						want = append(want, fmt.Sprintf("%s@%d:%s", r.Job, r.Slot, r.Status))
					}
				}
				runs, err := b.ListRuns(ctx, q)
				if err != nil {
					t.Fatalf("%+v: %v", q, err)
				}
				var got []string
				for _, r := range runs {
					got = append(got, fmt.Sprintf("%s@%d:%s", r.Job, r.Slot, r.Status))
				}
				if !slices.Equal(got, want) {
					t.Errorf("ListRuns(%+v):\n want %v\n got  %v", q, want, got)
				}
			}
		}
	}
}

// TestListRunsSelectsAcrossReads: a selection whose runs lie beyond the
// newest limit slots of every index is found by reading again, on every
// strategy, and the limit counts the selected runs only.
func TestListRunsSelectsAcrossReads(t *testing.T) {
	base := time.Now().Add(-time.Hour).UnixMilli()
	t.Run("lease", func(t *testing.T) {
		b := open(t, newNamespace(t))
		fillJobs(t, b, base)
		checkSelections(t, b)
	})
	for _, s := range claimOnlyStrategies {
		t.Run(s, func(t *testing.T) {
			b := openClaimOnly(t, newNamespace(t), s)
			fillJobs(t, b, base)
			checkSelections(t, b)
		})
	}
}

// TestLeaseNotesBesideEarlierVersion: the earlier version's claim of a
// noted slot is done; a note that its Prune repair indexed in :slots too
// is listed and pruned once; a note in no index is indexed in :notes by
// Prune.
func TestLeaseNotesBesideEarlierVersion(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	tag := "{" + ns + ":up}"
	mustRecord(t, b, mkNote("up", old, claim.StatusMissed, "late"), true, "the old note")
	r := request("up", old)
	r.MaxLate = 3 * time.Hour
	if o, _ := claimV1(t, c, ns, r); o != claim.Done {
		t.Fatalf("the earlier version's claim of a noted slot: want done, got %s", o)
	}
	if err := c.ZAdd(ctx, tag+":slots", redis.Z{Score: float64(old), Member: old}).Err(); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, b, "up", old, claim.StatusMissed)
	young := time.Now().Add(-time.Minute).UnixMilli()
	mustRecord(t, b, mkNote("up", young, claim.StatusUnknown, "no_decision"), true, "the young note")
	if err := c.ZRem(ctx, tag+":notes", young).Err(); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, b, "up", old, claim.StatusMissed) // the young note is in no index
	if n, err := b.Prune(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("prune older than 1h: want the old note deleted, got %d %v", n, err)
	}
	wantRuns(t, b, "up", young, claim.StatusUnknown)
	if _, err := c.ZScore(ctx, tag+":notes", fmt.Sprint(young)).Result(); err != nil {
		t.Fatalf("Prune must index the young note in :notes: %v", err)
	}
	if n, err := c.Exists(ctx, tag+":slots").Result(); err != nil || n != 0 {
		t.Fatalf(":slots must be empty: %d %v", n, err)
	}
}

// TestLeasePruneNotesInBatches: a backlog of notes larger than a prune
// batch goes in several, and a job left with nothing is forgotten.
func TestLeasePruneNotesInBatches(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	base := time.Now().Add(-3 * time.Hour).UnixMilli()
	const notes = 1203
	for i := range notes {
		mustRecord(t, b, mkNote("many", base+int64(i), claim.StatusSkipped, "overlap"), true, "a note")
	}
	time.Sleep(5 * time.Millisecond) // the history's noted events: older than the cutoff
	if n, err := b.Prune(ctx, 0); err != nil || n != notes {
		t.Fatalf("prune: want %d, got %d %v", notes, n, err)
	}
	if keys, err := namespaceKeys(ctx, c, ns); err != nil || len(keys) != 0 {
		t.Fatalf("a job left with nothing must be forgotten: %v %v", keys, err)
	}
}

// TestStreamIDNoteOfOvertakenSlot: a slot that a later slot overtook can
// never be claimed; its note goes to :notes, once, and is listed; a slot
// whose entry was trimmed or deleted may have been claimed: its note is
// not recorded.
func TestStreamIDNoteOfOvertakenSlot(t *testing.T) {
	ns := newNamespace(t)
	b := openClaimOnly(t, ns, redisclaim.StrategyStreamID, func(o *redisclaim.Options) { o.HistoryMaxLen = 10 })
	c := rawClient(t)
	ctx := t.Context()
	now := time.Now()
	base := now.Add(-30 * time.Minute).UnixMilli()
	wantOutcome(t, b, coRequest("over", base+2000, now), claim.Won, "slot 2")
	n := mkNote("over", base+1000, claim.StatusMissed, "store_unreachable")
	mustRecord(t, b, n, true, "a note of slot 1, overtaken")
	mustRecord(t, b, mkNote("over", base+1000, claim.StatusMissed, "late"), false, "a second note of slot 1")
	wantOutcome(t, b, coRequest("over", base+1000, now), claim.Lost, "a claim of slot 1")
	if m, err := c.ZCard(ctx, "{"+ns+":over}:notes").Result(); err != nil || m != 1 {
		t.Fatalf(":notes must hold the note of slot 1: %d %v", m, err)
	}
	runs, err := b.ListRuns(ctx, claim.ListQuery{Job: "over"})
	if err != nil || len(runs) != 2 || runs[1].Slot != n.Slot || runs[1].Status != claim.StatusMissed ||
		runs[1].Reason != n.Reason || runs[1].Instance != n.Instance || runs[1].FinishedAt.IsZero() {
		t.Fatalf("ListRuns: want slot 2 running and the note of slot 1, got %+v %v", runs, err)
	}
	// Trimmed: slot 2's entry and many after it.
	for i := range 300 {
		wantOutcome(t, b, coRequest("over", base+3000+int64(i), now), claim.Won, "a later slot")
	}
	mustRecord(t, b, mkNote("over", base+2000, claim.StatusMissed, "late"), false, "a note of a trimmed claimed slot")
	mustRecord(t, b, mkNote("over", base+2500, claim.StatusMissed, "late"), false, "a note of a slot older than every entry")
	// Deleted: XDEL of the newest entry.
	last := base + 3000 + 299
	if err := c.XDel(ctx, "{"+ns+":over}:runs", fmt.Sprintf("%d-0", last)).Err(); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, b, mkNote("over", last, claim.StatusMissed, "late"), false, "a note of a deleted claim's slot")
	mustRecord(t, b, mkNote("over", last+1000, claim.StatusMissed, "late"), true, "a note of the next slot")
}

// TestClaimOnlyNoteKeys: notes write only keys of the job's hash tag.
func TestClaimOnlyNoteKeys(t *testing.T) {
	for _, s := range claimOnlyStrategies {
		t.Run(s, func(t *testing.T) {
			ns := newNamespace(t)
			b := openClaimOnly(t, ns, s)
			c := rawClient(t)
			ctx := t.Context()
			now := time.Now()
			wantOutcome(t, b, coRequest("k", now.UnixMilli(), now), claim.Won, "a claim")
			mustRecord(t, b, mkNote("k", now.UnixMilli()-1000, claim.StatusMissed, "late"), true, "an older slot's note")
			mustRecord(t, b, mkNote("k", now.UnixMilli()+1000, claim.StatusSkipped, "overlap"), true, "a newer slot's note")
			keys, err := namespaceKeys(ctx, c, ns)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(keys)
			want := []string{"{" + ns + ":k}:runs", ns + ":jobs"}
			if s == redisclaim.StrategyStreamID {
				want = []string{"{" + ns + ":k}:notes", "{" + ns + ":k}:runs", ns + ":jobs"}
			}
			slices.Sort(want)
			if !slices.Equal(keys, want) {
				t.Fatalf("keys: want %v, got %v", want, keys)
			}
			if keySlot("{"+ns+":k}:notes") != keySlot("{"+ns+":k}:runs") {
				t.Fatalf("the keys of the job hash to two slots")
			}
		})
	}
}
