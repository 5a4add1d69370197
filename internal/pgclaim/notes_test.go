package pgclaim

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anarchon/anarchon/internal/claim"
)

// TestUpgradeFromVersion4: a table of schema version 4 (one run claimed and
// finished on it) is migrated to version 5 by the next start: the run is
// listed as before with no reason, notes are recorded beside it and
// answered done to the claim statement of version 4, as instances not yet
// upgraded send it, and the CHECK constraints admit notes, still refusing
// an unknown status and a note with an attempt.
func TestUpgradeFromVersion4(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	table := schema + ".runs"
	current := migrations
	migrations = current[:4]
	old, err := New(ctx, Options{DSN: testDSN(), Table: table})
	migrations = current
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	now := time.Now().UnixMilli()
	ran := claimOnce(t, old, "up", now-3000)
	if err := old.Finish(ctx, ran.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}

	b := open(t, table)
	n := claim.Note{Job: "up", Slot: now - 2000, Status: claim.StatusSkipped, Reason: "overlap",
		HeldBy: ran.Slot, Instance: "v5"}
	if ok, err := b.Record(ctx, n); err != nil || !ok {
		t.Fatalf("record after the upgrade: %v %v", ok, err)
	}
	// Version 4's claim statement is claimSQL, unchanged.
	late := claim.Request{Job: "up", Slot: n.Slot, Token: claim.NewToken(), Instance: "v4",
		MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapSkip}
	if res, err := old.Claim(ctx, late); err != nil || res.Outcome != claim.Done || res.Holder != "" {
		t.Fatalf("version 4's claim of a noted slot: %+v %v, want done with no holder", res, err)
	}
	runs, err := b.ListRuns(ctx, claim.ListQuery{Job: "up"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Status != claim.StatusSkipped || runs[0].HeldBy != ran.Slot ||
		runs[1].Status != claim.StatusSucceeded || runs[1].Reason != "" || runs[1].Attempt != 1 {
		t.Fatalf("after the upgrade: want the note then the run; got %+v", runs)
	}
	insert := b.names.expand(`INSERT INTO {{runs}} (job, slot, status, attempt, instance, token,
		started_at, lease_until) VALUES ('bad', $1, $2, $3, 'x', '', 0, 0)`)
	for _, bad := range []struct {
		status  string
		attempt int
	}{{"bogus", 1}, {"missed", 1}, {"succeeded", 0}} {
		if _, err := b.pool.Exec(ctx, insert, now, bad.status, bad.attempt); err == nil {
			t.Errorf("a row with status %s and attempt %d: the CHECK constraints took it", bad.status, bad.attempt)
		}
	}
}

// TestClaimMeetsANoteInFlight: a note inserted, not yet committed, before
// the claim of its slot reads under the job's lock makes the claim's
// INSERT wait; once the note commits, the claim answers done (with no
// holder) instead of failing on the primary key, and writes nothing.
func TestClaimMeetsANoteInFlight(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	b := open(t, schema+".runs")
	conn, err := pgx.Connect(ctx, testDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	slot := time.Now().UnixMilli()
	tag, err := tx.Exec(ctx, b.sql.record, "inflight", slot, "missed", "noter", "late", int64(0))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("the note, uncommitted: %v %v", tag, err)
	}
	req := claim.Request{Job: "inflight", Slot: slot, Token: claim.NewToken(), Instance: "claimer",
		MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapSkip}
	ans := claimAsync(ctx, b, req)
	awaitClaimWaiting(t, schema, "transactionid")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-ans
	if a.err != nil || a.res.Outcome != claim.Done || a.res.Holder != "" || a.res.Attempt != 0 {
		t.Fatalf("the claim that met the note: want done with no holder, got %+v %v", a.res, a.err)
	}
	r, _, err := b.Read(ctx, req.Job, slot)
	if err != nil || r.Status != claim.StatusMissed || r.Instance != "noter" || r.Attempt != 0 ||
		!r.StartedAt.IsZero() || !r.LeaseUntil.IsZero() || r.FinishedAt.IsZero() {
		t.Fatalf("the slot after the claim: want the note alone, got %+v %v", r, err)
	}
	hist := query[int64](t, b.names.expand(`SELECT count(*) FROM {{history}} WHERE job = 'inflight'`))
	if hist[0] != 0 {
		t.Fatalf("the claim that met the note wrote %d history rows", hist[0])
	}
}
