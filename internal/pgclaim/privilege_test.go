package pgclaim

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anarchon/anarchon/internal/claim"
)

// newRole creates a login role of its own for t (no password: the test
// server trusts loopback), dropped when t ends, and returns its name and a
// DSN that connects as it.
func newRole(t *testing.T) (string, string) {
	t.Helper()
	dsn := requireServer(t)
	var rnd [6]byte
	rand.Read(rnd[:])
	role := "anarchon_role_" + hex.EncodeToString(rnd[:])
	exec(t, dsn, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN")
	t.Cleanup(func() {
		exec(t, dsn, "DROP OWNED BY "+pgx.Identifier{role}.Sanitize())
		exec(t, dsn, "DROP ROLE "+pgx.Identifier{role}.Sanitize())
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Skipf("%s is not a URL: %v", dsnEnv, err)
	}
	u.User = url.User(role)
	return role, u.String()
}

// TestMissingPrivilege: a role that may not use the tables an
// administrator created gets one error at start that says which table and
// that the privilege is missing; a role that may read but not write gets
// it at its first claim, naming the run.
func TestMissingPrivilege(t *testing.T) {
	schema := newSchema(t)
	table := schema + ".runs"
	open(t, table) // the administrator's migration
	role, dsn := newRole(t)
	q := pgx.Identifier{schema}.Sanitize()
	exec(t, testDSN(), "GRANT USAGE ON SCHEMA "+q+" TO "+pgx.Identifier{role}.Sanitize())

	_, err := New(t.Context(), Options{DSN: dsn, Table: table})
	if err == nil {
		t.Fatal("a role without privileges on the tables must not start")
	}
	t.Logf("start: %v", err)
	for _, want := range []string{"permission denied", schema, "runs_schema", "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error must say %q: %v", want, err)
		}
	}
	if !claim.IsPermanent(err) {
		t.Errorf("a missing privilege is a refusal no retry changes (claim.IsPermanent): %v", err)
	}

	// Read only: the backend starts (it can see the schema version) but a
	// claim fails with the cause.
	exec(t, testDSN(), "GRANT SELECT ON ALL TABLES IN SCHEMA "+q+" TO "+pgx.Identifier{role}.Sanitize())
	b, err := New(t.Context(), Options{DSN: dsn, Table: table})
	if err != nil {
		t.Fatalf("a role that may read the schema version must start: %v", err)
	}
	defer b.Close()
	_, err = b.Claim(t.Context(), claim.Request{Job: "j", Slot: time.Now().UnixMilli(), Token: claim.NewToken(),
		Instance: "x", MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 1})
	if err == nil {
		t.Fatal("a claim by a role that may not write must fail")
	}
	t.Logf("claim: %v", err)
	for _, want := range []string{"claim j@", "permission denied", "fix: as the tables' owner: GRANT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error must say %q: %v", want, err)
		}
	}
	if !claim.IsPermanent(err) {
		t.Errorf("a missing privilege is a refusal no retry changes (claim.IsPermanent): %v", err)
	}
}
