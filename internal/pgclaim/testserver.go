package pgclaim

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anarchon/anarchon/internal/store"
)

// testServer is how the test harnesses reach a PostgreSQL server: each
// test gets a schema of its own, dropped with everything in it afterwards.
var testServer = &store.Testing{
	Require: "postgres",
	Title:   "PostgreSQL",
	URLEnv:  "ANARCHON_TEST_POSTGRES_DSN",
	URL:     "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
	URLKey:  "dsn",
	Start:   "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
	Isolate: isolate,
}

// schemaPattern is what a test's schema may be: an identifier that needs
// no quoting, so that the table key names it as it was created.
var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// isolate creates the schema p.ID (lower-cased) for one test; its table is
// <schema>.runs.
func isolate(ctx context.Context, p store.IsolateParams) (store.Isolation, error) {
	schema := strings.ToLower(p.ID)
	if !schemaPattern.MatchString(schema) {
		return store.Isolation{}, fmt.Errorf("postgres: %q cannot name a schema", p.ID)
	}
	if err := Exec(ctx, p.URL, "CREATE SCHEMA "+schema); err != nil {
		return store.Isolation{}, err
	}
	return store.Isolation{
		Keys: map[string]any{"table": schema + ".runs"},
		Cleanup: func(ctx context.Context) error {
			return dropSchema(ctx, p.URL, schema)
		},
	}, nil
}

// dropSchema drops schema with everything in it. A daemon killed a moment
// ago may still hold locks, and the drop may deadlock with its session's
// end: it is tried five times, a second apart.
func dropSchema(ctx context.Context, dsn, schema string) error {
	var err error
	for range 5 {
		if err = Exec(ctx, dsn, "DROP SCHEMA "+schema+" CASCADE"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	return err
}

// Exec runs sql on a connection of its own to dsn: the harnesses'
// administration of a test server.
func Exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("postgres: %s: %w", sql, err)
	}
	return nil
}
