package pgclaim

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anarchon/anarchon/internal/claim"
)

// The claim function locks a run row only where it writes it. A row lock
// gives the transaction an id, and the commit of a transaction with an id
// waits for a WAL flush: the losers of a race, queued on the job's lock,
// would each flush the WAL in turn.

// claimAsync starts b.Claim(req) and returns where its answer arrives.
func claimAsync(ctx context.Context, b *Backend, req claim.Request) <-chan claimAnswer {
	ch := make(chan claimAnswer, 1)
	go func() {
		res, err := b.Claim(ctx, req)
		ch <- claimAnswer{res, err}
	}()
	return ch
}

type claimAnswer struct {
	res claim.Result
	err error
}

// awaitClaimWaiting returns once a session of the test server runs the
// claim function of schema and waits for a lock of the given type
// ("advisory": the job's lock; "transactionid": a row locked by another
// transaction). It polls pg_stat_activity until t's deadline.
func awaitClaimWaiting(t *testing.T, schema, lock string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), testDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for {
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE NOT l.granted AND l.locktype = $1 AND a.query LIKE '%' || $2 || '%'`, lock, schema).Scan(&n); err != nil {
			t.Fatalf("waiting for a claim of %s to wait on a %s lock: %v", schema, lock, err)
		}
		if n > 0 {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("no claim of %s waited on a %s lock", schema, lock)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestRaceLoserLocksNoRow: a claim queued on the job's lock behind the
// winner of the run answers running once the winner commits, and leaves
// no row lock behind (the run's xmax stays 0), so its commit flushes
// nothing.
func TestRaceLoserLocksNoRow(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	b := open(t, schema+".runs")
	winner, err := pgx.Connect(ctx, testDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer winner.Close(context.Background())
	tx, err := winner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	slot := time.Now().UnixMilli()
	winReq := claim.Request{Job: "race", Slot: slot, Token: claim.NewToken(), Instance: "winner",
		MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapSkip}
	var outcome string
	if err := tx.QueryRow(ctx, b.names.expand(`SELECT outcome FROM {{claim}}($1, $2, $3, $4, 3600000, 60000, 3, true)`),
		winReq.Job, slot, string(winReq.Token), winReq.Instance).Scan(&outcome); err != nil || outcome != "won" {
		t.Fatalf("the winner's claim, uncommitted: %q %v", outcome, err)
	}

	loser := winReq
	loser.Token, loser.Instance = claim.NewToken(), "loser"
	ans := claimAsync(ctx, b, loser)
	awaitClaimWaiting(t, schema, "advisory")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-ans
	if a.err != nil || a.res.Outcome != claim.Running || a.res.Attempt != 1 {
		t.Fatalf("the loser: want running(1), got %+v %v", a.res, a.err)
	}
	xmax := query[string](t, `SELECT xmax::text FROM `+pgx.Identifier{schema, "runs"}.Sanitize()+` WHERE job = 'race'`)
	if len(xmax) != 1 || xmax[0] != "0" {
		t.Fatalf("the run's xmax is %v after the loser's claim, want [0]: the loser locked the row", xmax)
	}
}

// TestTakeoverWaitsForARenewal: a backup that finds the lease expired while
// the owner's renewal of it is in flight waits for the renewal, then sees
// the new lease and answers running; it does not take the run over.
func TestTakeoverWaitsForARenewal(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	b := open(t, schema+".runs")
	slot := time.Now().UnixMilli()
	owner := claim.Request{Job: "renewed", Slot: slot, Token: claim.NewToken(), Instance: "owner",
		MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapSkip}
	if res, err := b.Claim(ctx, owner); err != nil || res.Outcome != claim.Won {
		t.Fatalf("owner's claim: %+v %v", res, err)
	}
	runs := pgx.Identifier{schema, "runs"}.Sanitize()
	// The lease ran out...
	exec(t, testDSN(), `UPDATE `+runs+` SET lease_until = 0 WHERE job = 'renewed'`)
	// ...and the owner's renewal is under way, not yet committed.
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
	if _, err := tx.Exec(ctx, `UPDATE `+runs+` SET lease_until = $1 WHERE job = 'renewed' AND token = $2`,
		time.Now().Add(time.Hour).UnixMilli(), string(owner.Token)); err != nil {
		t.Fatal(err)
	}

	backup := owner
	backup.Token, backup.Instance = claim.NewToken(), "backup"
	ans := claimAsync(ctx, b, backup)
	awaitClaimWaiting(t, schema, "transactionid")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-ans
	if a.err != nil || a.res.Outcome != claim.Running || a.res.Attempt != 1 {
		t.Fatalf("the backup: want running(1) after the renewal, got %+v %v", a.res, a.err)
	}
	tok := query[string](t, `SELECT token FROM `+runs+` WHERE job = 'renewed'`)
	if len(tok) != 1 || tok[0] != string(owner.Token) {
		t.Fatalf("the run's token is %v, want the owner's: the backup took it over", tok)
	}
}

// TestUpgradeFromVersion2: a table made by an anarchond of schema version 2
// (a run claimed on it) is migrated to the current version by the next
// start; the run is still answered, now with its holder, and the claim
// statement of version 2 (four named columns) still works on the new
// function, as instances not yet upgraded send it.
func TestUpgradeFromVersion2(t *testing.T) {
	schema := newSchema(t)
	table := schema + ".runs"
	current := migrations
	migrations = current[:2]
	old, err := New(t.Context(), Options{DSN: testDSN(), Table: table})
	migrations = current
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	// The claim statement of version 2: four named columns.
	v2 := `SELECT outcome, attempt, store_now, lease_until FROM ` + pgx.Identifier{schema, "runs_claim"}.Sanitize() + `($1, $2, $3, $4, 3600000, 60000, 3, false)`
	claimV2 := func(r claim.Request) string {
		t.Helper()
		var outcome string
		if err := old.pool.QueryRow(t.Context(), v2, r.Job, r.Slot, string(r.Token), r.Instance).Scan(&outcome, new(int32), new(int64), new(*int64)); err != nil {
			t.Fatalf("version 2's claim statement: %v", err)
		}
		return outcome
	}
	won := claim.Request{Job: "up", Slot: time.Now().UnixMilli(), Token: claim.NewToken(), Instance: "v2"}
	if got := claimV2(won); got != "won" {
		t.Fatalf("the claim of version 2: %s, want won", got)
	}

	b := open(t, table)
	versions := query[int32](t, `SELECT max(version) FROM `+pgx.Identifier{schema, "runs_schema"}.Sanitize())
	if versions[0] != int32(len(migrations)) {
		t.Fatalf("schema version %d after the upgrade, want %d", versions[0], len(migrations))
	}
	other := claim.Request{Job: won.Job, Slot: won.Slot, Token: claim.NewToken(), Instance: "other",
		MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapAllow}
	res, err := b.Claim(t.Context(), other)
	if err != nil || res.Outcome != claim.Running || res.Holder != won.Instance {
		t.Fatalf("after the upgrade: %+v %v, want running held by %s", res, err, won.Instance)
	}
	if got := claimV2(other); got != "running" {
		t.Fatalf("version 2's claim statement on the new function: %s, want running", got)
	}
}
