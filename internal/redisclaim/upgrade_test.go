package redisclaim_test

import (
	_ "embed"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/redisclaim"
)

// The earlier format indexed a run in :slots when it was claimed; this one
// indexes it when it settles (lua/lease_claim.lua). Instances of both run
// side by side during a rolling upgrade: these tests run the earlier claim
// script beside the backend.

//go:embed testdata/lease_claim_v1.lua
var leaseClaimV1Lua string

var leaseClaimV1 = redis.NewScript(leaseClaimV1Lua)

// claimV1 claims r as an instance of the earlier version would, and returns
// the outcome and attempt.
func claimV1(t *testing.T, c redis.UniversalClient, ns string, r claim.Request) (claim.Outcome, int) {
	t.Helper()
	ctx := t.Context()
	if err := c.SAdd(ctx, ns+":jobs", r.Job).Err(); err != nil {
		t.Fatal(err)
	}
	tag := "{" + ns + ":" + r.Job + "}"
	v, err := leaseClaimV1.Run(ctx, c, []string{tag + ":state", tag + ":slots", tag + ":live", tag + ":history"},
		r.Slot, string(r.Token), r.Instance, r.MaxLate.Milliseconds(), r.Lease.Milliseconds(), r.MaxAttempts,
		string(r.Overlap), redisclaim.DefaultHistoryMaxLen, "1").Slice()
	if err != nil || len(v) != 5 {
		t.Fatalf("claim %s@%d with the earlier script: %v %v", r.Job, r.Slot, v, err)
	}
	outcome, _ := v[0].(string)
	attempt, _ := v[1].(int64)
	return claim.Outcome(outcome), int(attempt)
}

// wantRuns checks a job's listing, newest first: slot -> status.
func wantRuns(t *testing.T, b *redisclaim.Backend, job string, want ...any) {
	t.Helper()
	runs, err := b.ListRuns(t.Context(), claim.ListQuery{Job: job})
	if err != nil {
		t.Fatalf("list runs of %s: %v", job, err)
	}
	ok := len(runs)*2 == len(want)
	for i := 0; ok && i < len(runs); i++ {
		ok = runs[i].Slot == want[2*i].(int64) && runs[i].Status == want[2*i+1].(claim.Status)
	}
	if !ok {
		var got []any
		for _, r := range runs {
			got = append(got, r.Slot, r.Status)
		}
		t.Fatalf("runs of %s: want %v, got %v", job, want, got)
	}
}

// TestEarlierVersionBeside: runs claimed by the earlier version are read,
// finished, listed once and pruned by this one, and the overlap rule holds
// across the two in both directions.
func TestEarlierVersionBeside(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	now := time.Now().UnixMilli()
	at := func(job string, slot int64) claim.Request {
		r := request(job, slot)
		r.Overlap = claim.OverlapAllow
		return r
	}

	done, running, fresh := at("up", now-3000), at("up", now-2000), at("up", now-1000)
	if o, a := claimV1(t, c, ns, done); o != claim.Won || a != 1 {
		t.Fatalf("earlier claim: want won(1), got %s(%d)", o, a)
	}
	if err := b.Finish(ctx, done.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
		t.Fatalf("finish a run the earlier version claimed: %v", err)
	}
	if o, _ := claimV1(t, c, ns, running); o != claim.Won {
		t.Fatalf("earlier claim: want won, got %s", o)
	}
	mustWin(t, b, fresh, 1)
	// running is in :slots and :live: listed once.
	wantRuns(t, b, "up", fresh.Slot, claim.StatusRunning, running.Slot, claim.StatusRunning, done.Slot, claim.StatusSucceeded)

	// overlap=skip sees the other version's running run, both ways.
	skip := request("up", now)
	if res, err := b.Claim(ctx, skip); err != nil || res.Outcome != claim.Overlap {
		t.Fatalf("beside the earlier version's running run: want overlap, got %+v %v", res, err)
	}
	mustWin(t, b, request("up2", now-1000), 1)
	if o, _ := claimV1(t, c, ns, request("up2", now)); o != claim.Overlap {
		t.Fatalf("the earlier version beside this one's running run: want overlap, got %s", o)
	}

	// Prune (cutoff now) takes the finished run and keeps both running ones.
	time.Sleep(5 * time.Millisecond)
	if n, err := b.Prune(ctx, 0); err != nil || n != 1 {
		t.Fatalf("prune: want 1 run deleted, got %d %v", n, err)
	}
	wantRuns(t, b, "up", fresh.Slot, claim.StatusRunning, running.Slot, claim.StatusRunning)
	if err := b.Finish(ctx, running.Fence(1), claim.Finish{Status: claim.StatusFailed, ExitCode: 2}); err != nil {
		t.Fatal(err)
	}
	wantRuns(t, b, "up", fresh.Slot, claim.StatusRunning, running.Slot, claim.StatusFailed)
}

// TestPruneIndexesRunsTheEarlierVersionInterrupted: the earlier version
// interrupts a run without indexing it (it indexed runs when it claimed
// them), so a run this version claimed is then in no index; Prune finds it
// and indexes it, and prunes it once it is old enough.
func TestPruneIndexesRunsTheEarlierVersionInterrupted(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	req := func() claim.Request {
		r := request("orphan", old)
		r.MaxLate, r.Lease, r.MaxAttempts = 3*time.Hour, time.Millisecond, 1
		return r
	}
	mustWin(t, b, req(), 1)
	time.Sleep(5 * time.Millisecond) // the lease ends; no attempt is left
	if o, _ := claimV1(t, c, ns, req()); o != claim.Done {
		t.Fatalf("the earlier version's claim after the last attempt: want done (interrupted), got %s", o)
	}
	if n, err := c.ZCard(ctx, "{"+ns+":orphan}:slots").Result(); err != nil || n != 0 {
		t.Fatalf("the earlier version must have left the run out of :slots: %d %v", n, err)
	}
	wantRuns(t, b, "orphan") // in no index yet

	// Older than 3h: nothing goes, but the run is indexed.
	if n, err := b.Prune(ctx, 3*time.Hour); err != nil || n != 0 {
		t.Fatalf("prune older than 3h: want 0, got %d %v", n, err)
	}
	wantRuns(t, b, "orphan", old, claim.StatusInterrupted)
	if n, err := b.Prune(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("prune older than 1h: want 1, got %d %v", n, err)
	}
	if _, _, err := b.Read(ctx, "orphan", old); !errors.Is(err, claim.ErrNotFound) {
		t.Fatalf("the pruned run: want claim.ErrNotFound, got %v", err)
	}
}

// TestPruneDeadRunningRun: a running run whose lease ended before the
// cutoff (its runner died, nobody took over) is found in :live and pruned.
func TestPruneDeadRunningRun(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	dead := request("dead", time.Now().Add(-2*time.Hour).UnixMilli())
	dead.MaxLate, dead.Lease = 3*time.Hour, time.Millisecond
	mustWin(t, b, dead, 1)
	alive := request("dead", time.Now().Add(-time.Hour).UnixMilli())
	alive.MaxLate, alive.Overlap = 3*time.Hour, claim.OverlapAllow
	mustWin(t, b, alive, 1)
	time.Sleep(20 * time.Millisecond)
	if n, err := b.Prune(ctx, 10*time.Millisecond); err != nil || n != 1 {
		t.Fatalf("prune: want the dead run deleted, got %d %v", n, err)
	}
	if _, _, err := b.Read(ctx, dead.Job, dead.Slot); !errors.Is(err, claim.ErrNotFound) {
		t.Fatalf("the dead run: want claim.ErrNotFound, got %v", err)
	}
	if live, err := c.HKeys(ctx, "{"+ns+":dead}:live").Result(); err != nil || len(live) != 1 {
		t.Fatalf(":live must hold only the live run: %v %v", live, err)
	}
	wantRuns(t, b, "dead", alive.Slot, claim.StatusRunning)
}
