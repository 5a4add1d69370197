package pgclaim

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
)

// sessionSettings holds n connections of b's pool at once (so that they
// are n distinct sessions, new ones among them) and returns what SHOW
// synchronous_commit answers on each.
func sessionSettings(t *testing.T, b *Backend, n int) []string {
	t.Helper()
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		c, err := b.pool.Acquire(t.Context())
		if err != nil {
			t.Fatalf("acquire a connection: %v", err)
		}
		conns = append(conns, c)
		var v string
		if err := c.QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatalf("SHOW synchronous_commit: %v", err)
		}
		out = append(out, v)
	}
	return out
}

// serverSetting is synchronous_commit on a plain connection to the test
// server: the server's (and the test role's) own setting.
func serverSetting(t *testing.T) string {
	t.Helper()
	return query[string](t, "SHOW synchronous_commit")[0]
}

// recordCommitSetting adds a trigger to table (schema.runs) that records,
// for every row written, the synchronous_commit of the transaction that
// wrote it, and returns the query that reads the records (operation,
// setting).
func recordCommitSetting(t *testing.T, schema string) string {
	t.Helper()
	dsn := testDSN()
	seen := pgx.Identifier{schema, "commit_settings"}.Sanitize()
	fn := pgx.Identifier{schema, "record_commit_setting"}.Sanitize()
	exec(t, dsn, "CREATE TABLE "+seen+" (op text NOT NULL, setting text NOT NULL)")
	exec(t, dsn, "CREATE FUNCTION "+fn+"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "+
		"INSERT INTO "+seen+" VALUES (TG_OP, current_setting('synchronous_commit')); RETURN NULL; END $$")
	exec(t, dsn, "CREATE TRIGGER record_commit_setting AFTER INSERT OR UPDATE ON "+
		pgx.Identifier{schema, "runs"}.Sanitize()+" FOR EACH ROW EXECUTE FUNCTION "+fn+"()")
	return "SELECT op, setting FROM " + seen
}

// TestSynchronousCommit: with SynchronousCommit set, every session of the
// backend's pool runs with it (SHOW on each of several connections held at
// once), and so do the transactions of claims, renewals and finishes sent
// concurrently over the pool (a trigger records current_setting inside
// each of them); the claims still decide as they should.
func TestSynchronousCommit(t *testing.T) {
	schema := newSchema(t)
	b := openWith(t, Options{DSN: testDSN(), Table: schema + ".runs", SynchronousCommit: "off"})
	if server := serverSetting(t); server == "off" {
		t.Logf("the server's own synchronous_commit is off: this test cannot tell the backend's from it")
	}
	for i, v := range sessionSettings(t, b, 4) {
		if v != "off" {
			t.Errorf("session %d of the pool: synchronous_commit %q, want off", i, v)
		}
	}

	records := recordCommitSetting(t, schema)
	const claimers, slots = 8, 5
	base := time.Now().UnixMilli()
	var wg sync.WaitGroup
	errs := make([]error, claimers)
	for g := range claimers {
		wg.Go(func() {
			for i := range slots {
				// Every claimer races every other on each slot: one won.
				req := claim.Request{Job: "async", Slot: base + int64(i), Token: claim.NewToken(),
					Instance: fmt.Sprint("i", g), MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3,
					Overlap: claim.OverlapAllow}
				res, err := b.Claim(t.Context(), req)
				if err != nil {
					errs[g] = err
					return
				}
				if res.Outcome != claim.Won {
					continue
				}
				if _, err := b.Renew(t.Context(), req.Fence(res.Attempt), time.Minute); err != nil {
					errs[g] = err
					return
				}
				if err := b.Finish(t.Context(), req.Fence(res.Attempt), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("claim, renew or finish with synchronous_commit off: %v", err)
		}
	}
	runs, err := b.ListRuns(t.Context(), claim.ListQuery{Job: "async"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != slots {
		t.Fatalf("%d runs, want %d (one won per slot)", len(runs), slots)
	}
	for _, r := range runs {
		if r.Status != claim.StatusSucceeded || r.Attempt != 1 {
			t.Errorf("run %s@%d: %s attempt %d, want succeeded attempt 1", r.Job, r.Slot, r.Status, r.Attempt)
		}
	}
	type rec struct{ op, setting string }
	got := queryRows(t, func(row pgx.CollectableRow) (rec, error) {
		var r rec
		return r, row.Scan(&r.op, &r.setting)
	}, records)
	ops := map[string]int{}
	for _, r := range got {
		ops[r.op]++
		if r.setting != "off" {
			t.Errorf("a %s of the runs table committed with synchronous_commit %q, want off", r.op, r.setting)
		}
	}
	// Each slot: the claim's INSERT, the renewal's and the finish's UPDATE.
	if ops["INSERT"] != slots || ops["UPDATE"] != 2*slots {
		t.Errorf("writes recorded %v, want %d INSERT and %d UPDATE", ops, slots, 2*slots)
	}
}

// TestSynchronousCommitUnset: without SynchronousCommit the backend does
// not touch the setting: its sessions have the server's, the role's or the
// DSN's. Set, the option wins over the role's and the DSN's.
func TestSynchronousCommitUnset(t *testing.T) {
	schema := newSchema(t)
	server := serverSetting(t)
	b := openWith(t, Options{DSN: testDSN(), Table: schema + ".runs"})
	for i, v := range sessionSettings(t, b, 2) {
		if v != server {
			t.Errorf("session %d: synchronous_commit %q, want the server's %q", i, v, server)
		}
	}

	// A role whose own setting is local (ALTER ROLE ... SET).
	role, roleDSN := newRole(t)
	ident := pgx.Identifier{role}.Sanitize()
	exec(t, testDSN(), "ALTER ROLE "+ident+" SET synchronous_commit = local")
	exec(t, testDSN(), "GRANT USAGE, CREATE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO "+ident)
	asRole := openWith(t, Options{DSN: roleDSN, Table: schema + ".role_runs"})
	if v := sessionSettings(t, asRole, 1)[0]; v != "local" {
		t.Errorf("role with synchronous_commit local, option unset: session has %q, want the role's", v)
	}
	asRoleOff := openWith(t, Options{DSN: roleDSN, Table: schema + ".role_runs", SynchronousCommit: "off"})
	if v := sessionSettings(t, asRoleOff, 1)[0]; v != "off" {
		t.Errorf("role with synchronous_commit local, option off: session has %q, want the option's", v)
	}
	claimOnce(t, asRoleOff, "role", time.Now().UnixMilli())

	dsn, err := url.Parse(testDSN())
	if err != nil {
		t.Skipf("%s is not a URL: %v", dsnEnv, err)
	}
	q := dsn.Query()
	q.Set("synchronous_commit", "local")
	dsn.RawQuery = q.Encode()
	fromDSN := openWith(t, Options{DSN: dsn.String(), Table: schema + ".runs"})
	if v := sessionSettings(t, fromDSN, 1)[0]; v != "local" {
		t.Errorf("DSN with synchronous_commit=local: session has %q", v)
	}
	both := openWith(t, Options{DSN: dsn.String(), Table: schema + ".runs", SynchronousCommit: "remote_write"})
	if v := sessionSettings(t, both, 1)[0]; v != "remote_write" {
		t.Errorf("DSN local, option remote_write: session has %q, want the option's", v)
	}
}

// TestSynchronousCommitMismatchWarns: a session that does not report the
// configured level (a pooler that dropped the startup parameter) is a
// warning at start naming both values; a match is logged at info.
func TestSynchronousCommitMismatchWarns(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	b := openWith(t, Options{DSN: testDSN(), Table: newSchema(t) + ".runs", SynchronousCommit: "off", Log: zap.New(core)})
	if n := logs.FilterMessageSnippet("run with synchronous_commit").Len(); n != 1 {
		t.Errorf("%d info lines about synchronous_commit at start, want 1: %v", n, logs.All())
	}
	if err := checkSynchronousCommit(context.Background(), b.pool, "remote_apply", zap.New(core)); err != nil {
		t.Fatal(err)
	}
	warns := logs.FilterLevelExact(zap.WarnLevel).All()
	if len(warns) != 1 || !strings.Contains(warns[0].Message, "do not run with the configured synchronous_commit") {
		t.Fatalf("warnings %v, want one about the mismatch", warns)
	}
	if f := warns[0].ContextMap(); f["configured"] != "remote_apply" || f["session"] != "off" {
		t.Errorf("warning fields %v", f)
	}
}

// TestConformanceSynchronousCommitOff: the conformance suite passes with
// synchronous_commit off (it changes when a commit is acknowledged, never
// what the claim decides).
func TestConformanceSynchronousCommitOff(t *testing.T) {
	if testing.Short() {
		t.Skip("the full suite again: not in -short")
	}
	openOff := func(t *testing.T, table string) *Backend {
		return openWith(t, Options{DSN: testDSN(), Table: table, SynchronousCommit: "off"})
	}
	claimtest.Exercise(t, claimtest.Harness{
		New:  func(t *testing.T) claim.Backend { return openOff(t, newSchema(t)+".runs") },
		Open: func(t *testing.T, b claim.Backend) claim.Backend { return openOff(t, b.(*Backend).Table()) },
	})
}
