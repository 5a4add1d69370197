package pgclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/pgclaim/pgtest"
)

// A private primary and its streaming standby: what validate reports of
// them, a multi-host DSN that finds the primary wherever it is listed, a
// DSN whose every host is read-only refused with each host's answer, and
// a pool whose server turns read-only dropping its connections and
// reaching the promoted standby. The subtests run in order on one pair.
func TestPrimaryAndStandby(t *testing.T) {
	c := pgtest.NewCluster(t)
	p := c.Primary("primary")
	s := c.Standby(p, "standby1")
	ctx := t.Context()

	t.Run("InspectAsync", func(t *testing.T) {
		note := inspect(t, pgtest.MultiDSN(p, s))
		wantLines(t, note,
			"postgres host "+p.Addr()+": primary, PostgreSQL ",
			"postgres host "+s.Addr()+": standby (in recovery)",
			`synchronous_standby_names "", 1 replica: standby1 (streaming, async)`,
			"warning: asynchronous replication: a failover can lose the claims the primary acknowledged last")
	})
	t.Run("InspectSync", func(t *testing.T) {
		if err := p.Synchronous(ctx, "standby1"); err != nil {
			t.Fatal(err)
		}
		note := inspect(t, pgtest.MultiDSN(s, p))
		wantLines(t, note,
			"synchronous_commit on for the backend's sessions",
			`synchronous_standby_names "ANY 1 (standby1)", 1 replica: standby1 (streaming, quorum)`,
			"ok: synchronous replication: a claim is acknowledged once a synchronous standby has it")
		if strings.Contains(note, "warning") {
			t.Errorf("a synchronous pair warrants no warning:\n%s", note)
		}
		note = inspect(t, p.DSN())
		wantLines(t, note, "note: the DSN names one host: after a failover the daemons reach the new primary only if")
		note, err := check(ctx, Settings{DSN: pgtest.MultiDSN(p, s), Table: "t", SynchronousCommit: "local"})
		if err != nil {
			t.Fatal(err)
		}
		wantLines(t, note, "synchronous_commit local for the backend's sessions", "warning: asynchronous replication")
	})
	t.Run("MultiHostFindsPrimary", func(t *testing.T) {
		// The standby first, no target_session_attrs: the backend keeps
		// only connections that accept writes.
		b := openWith(t, Options{DSN: pgtest.MultiDSN(s, p), Table: "multihost"})
		claimOne(t, b, "multihost")
		var port int
		if err := b.pool.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port); err != nil || port != p.Port {
			t.Fatalf("the pool's sessions must be on the primary (port %d): port %d, %v", p.Port, port, err)
		}
	})
	t.Run("StandbyAloneRefused", func(t *testing.T) {
		for _, dsn := range []string{s.DSN(), s.DSN() + " target_session_attrs=read-write"} {
			_, err := New(ctx, Options{DSN: dsn, Table: "alone"})
			wantNoPrimary(t, err, s.Addr()+" (127.0.0.1): is a standby (in recovery): it accepts no writes")
			_, err = Inspect(ctx, Options{DSN: dsn})
			wantNoPrimary(t, err, s.Addr()+" standby (in recovery)")
		}
	})
	t.Run("ReadOnlyThenPromoted", func(t *testing.T) { readOnlyThenPromoted(t, p, s) })
}

// inspect is the note Check prints for dsn.
func inspect(t *testing.T, dsn string) string {
	t.Helper()
	note, err := check(t.Context(), Settings{DSN: dsn, Table: "t"})
	if err != nil {
		t.Fatalf("validate's check of %s: %v", dsn, err)
	}
	t.Logf("validate prints:\n%s", note)
	return note
}

// wantLines fails unless note holds every part.
func wantLines(t *testing.T, note string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(note, p) {
			t.Errorf("validate's note lacks %q:\n%s", p, note)
		}
	}
}

// wantNoPrimary fails unless err says that no host accepts writes and
// names the host with what it said.
func wantNoPrimary(t *testing.T, err error, said string) {
	t.Helper()
	if err == nil {
		t.Fatal("a DSN with no host that accepts writes must be refused")
	}
	msg := err.Error()
	for _, want := range []string{"no host of backend.postgres.dsn accepts writes", said, "promote a standby"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if claim.IsPermanent(err) {
		t.Errorf("no primary is transient (a promotion heals it), not permanent: %v", err)
	}
}

// claimOne claims a fresh slot of job and fails unless it is won.
func claimOne(t *testing.T, b *Backend, job string) error {
	t.Helper()
	now := time.Now()
	res, err := b.Claim(t.Context(), claim.Request{Job: job, Slot: now.UnixMilli(), Token: claim.NewToken(),
		Instance: "i", MaxLate: time.Minute, Lease: time.Minute, MaxAttempts: 1, Overlap: claim.OverlapAllow, Now: now})
	if err == nil && res.Outcome != claim.Won {
		t.Fatalf("claim of a fresh slot: %s", res.Outcome)
	}
	return err
}

// readOnlyThenPromoted: the primary turns read-only under a live pool.
// The first claim answered 25006 drops the pool's connections; the next
// ones find no host that accepts writes (the primary read-only, the
// standby in recovery) and say so, host by host; once the standby is
// promoted, a claim succeeds there, with no restart.
func readOnlyThenPromoted(t *testing.T, p, s *pgtest.Server) {
	ctx := t.Context()
	b := openWith(t, Options{DSN: pgtest.MultiDSN(p, s), Table: "readonly"})
	if err := claimOne(t, b, "before"); err != nil {
		t.Fatal(err)
	}
	before := b.pool.Stat().NewConnsCount()
	// No more synchronous standby: the primary must commit on its own.
	for _, sql := range []string{"ALTER SYSTEM RESET synchronous_standby_names",
		"ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()"} {
		if err := p.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	err := awaitClaimError(t, b, func(err error) bool {
		var pg *pgconn.PgError
		return errors.As(err, &pg) && pg.Code == sqlstateReadOnly
	})
	if !strings.Contains(err.Error(), "its connections are dropped") {
		t.Errorf("a read-only answer must say the pool reconnects: %v", err)
	}
	err = awaitClaimError(t, b, refusedWrites)
	wantNoPrimary(t, err, p.Addr()+" (127.0.0.1): is read-only (default_transaction_read_only is on)")
	if b.pool.Stat().NewConnsCount() == before {
		t.Error("after the read-only answer the pool must have connected again")
	}
	if err := s.Promote(); err != nil {
		t.Fatal(err)
	}
	writable, err := s.AwaitWritable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := writable.Add(2 * time.Second)
	for claimOne(t, b, "after") != nil {
		if time.Now().After(deadline) {
			t.Fatal("no claim succeeded within 2 s of the promoted standby accepting writes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("a claim succeeded %v after the promoted standby first accepted a write", time.Since(writable).Round(time.Millisecond))
	var port int
	if err := b.pool.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port); err != nil || port != s.Port {
		t.Fatalf("the pool's sessions must be on the promoted standby (port %d): port %d, %v", s.Port, port, err)
	}
}

// awaitClaimError claims until a claim fails with an error match accepts
// (10 s at most) and returns it.
func awaitClaimError(t *testing.T, b *Backend, match func(error) bool) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		now := time.Now()
		_, err := b.Claim(ctx, claim.Request{Job: "ro", Slot: now.UnixMilli(), Token: claim.NewToken(), Instance: "i",
			MaxLate: time.Minute, Lease: time.Minute, MaxAttempts: 1, Overlap: claim.OverlapAllow, Now: now})
		cancel()
		if err != nil && match(err) {
			return err
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no claim failed as expected within 10 s; last: %v", last)
	return fmt.Errorf("unreachable")
}
