package pgclaim

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/anarchon/anarchon/internal/claim"
)

// The SQLSTATEs that no retry changes: the operator has to act.
const (
	sqlstateInsufficientPrivilege = "42501"
	sqlstateInvalidPassword       = "28P01"
	sqlstateInvalidAuthorization  = "28000"
	sqlstateInvalidCatalogName    = "3D000"
	sqlstateUndefinedTable        = "42P01"
)

// refusals classifies the server's refusals of one role on one table
// (docs/write-a-backend.md#classify).
type refusals struct {
	role   string // the DSN's user; empty: the server's default
	schema string // empty before the search_path was read
	table  string
}

// classify returns shown (err, its passwords scrubbed) as a
// claim.PermanentError when err is a refusal no re-send changes: a missing
// privilege, a failed login, no such database, the table gone after its
// migration. Any other error is returned as shown.
func (r refusals) classify(shown, err error) error {
	var pg *pgconn.PgError
	if err == nil || !errors.As(err, &pg) {
		return shown
	}
	role := r.role
	if role == "" {
		role = "the DSN's user"
	}
	where := r.table
	if r.schema != "" {
		where = r.schema + "." + r.table
	}
	switch pg.Code {
	case sqlstateInsufficientPrivilege:
		schema := r.schema
		if schema == "" {
			schema = "<schema>"
		}
		s, q := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{r.role}.Sanitize()
		return claim.Permanent("postgres", shown,
			fmt.Sprintf("role %s lacks a privilege on the tables of %s (SQLSTATE %s)", role, where, pg.Code),
			fmt.Sprintf("as the tables' owner: GRANT USAGE ON SCHEMA %[1]s TO %[2]s; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %[1]s TO %[2]s; GRANT USAGE ON ALL SEQUENCES IN SCHEMA %[1]s TO %[2]s", s, q))
	case sqlstateInvalidPassword, sqlstateInvalidAuthorization:
		return claim.Permanent("postgres", shown,
			fmt.Sprintf("the server refused the login of role %s (SQLSTATE %s)", role, pg.Code),
			"correct the user and password of backend.postgres.dsn (or passwordFile), or the server's pg_hba.conf rule for this host")
	case sqlstateInvalidCatalogName:
		return claim.Permanent("postgres", shown,
			fmt.Sprintf("the database of backend.postgres.dsn does not exist (SQLSTATE %s)", pg.Code),
			fmt.Sprintf("create it (CREATE DATABASE ... OWNER %s) or name an existing one in backend.postgres.dsn", pgx.Identifier{r.role}.Sanitize()))
	case sqlstateUndefinedTable:
		if r.schema == "" {
			return shown // before the migration: New creates the tables
		}
		return claim.Permanent("postgres", shown,
			fmt.Sprintf("a table of %s is gone after its migration (SQLSTATE %s)", where, pg.Code),
			"restart anarchond on every host: the start creates the tables again (the runs they held are lost)")
	}
	return shown
}
