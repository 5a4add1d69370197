package pgclaim

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/store"
	"github.com/anarchon/anarchon/internal/storetls"
)

// Settings are backend.postgres.
type Settings struct {
	DSN          string
	Table        string
	PasswordFile string
	TLS          storetls.Settings
	// SynchronousCommit is the synchronous_commit of the backend's
	// sessions: on | off | local | remote_write | remote_apply; empty
	// leaves the server's setting in effect.
	SynchronousCommit string
}

// defaultTable is backend.postgres.table's default.
const defaultTable = "anarchon_runs"

var (
	tablePattern = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]{0,47}\.)?[A-Za-z_][A-Za-z0-9_]{0,47}$`)
	// syncCommitLevels are PostgreSQL's synchronous_commit levels, as SHOW
	// spells them (its aliases true, yes, 1, ... are not taken).
	syncCommitLevels = []string{"on", "off", "local", "remote_write", "remote_apply"}
)

func init() {
	store.Register(store.Driver{
		Name:    "postgres",
		Summary: "PostgreSQL: one row per run, leases, fenced writes; failover through a multi-host DSN",
		Keys: store.NetworkKeys("dsn",
			store.Key{Name: "table", Kind: store.String},
			store.Key{Name: "synchronousCommit", Kind: store.String},
		),
		Parse: parseSection,
		Check: check,
		Open: func(ctx context.Context, p store.OpenParams) (claim.Backend, error) {
			o, err := p.Settings.(Settings).options()
			if err != nil {
				return nil, err
			}
			o.Log = p.Log
			return New(ctx, o)
		},
		Testing: testServer,
	})
}

func parseSection(s store.Section) store.Settings {
	c := Settings{
		DSN:               s.String("dsn", "", checkDSN),
		Table:             s.String("table", defaultTable, store.Matches(tablePattern, "table name", "a table name of letters, digits and _ (at most 48), not starting with a digit, optionally schema-qualified (schema.table)")),
		PasswordFile:      s.Path("passwordFile", ""),
		SynchronousCommit: s.String("synchronousCommit", "", store.OneOf(syncCommitLevels...)),
		TLS:               s.TLS(),
	}
	if s.Selected() && !s.Set("dsn") {
		s.Errorf("dsn", "required when backend.type is postgres (a postgres:// URL or a key=value connection string)")
	}
	return c
}

// checkDSN accepts a postgres:// or postgresql:// URL or a key=value
// connection string, without ever quoting it.
func checkDSN(dsn string) string {
	if strings.TrimSpace(dsn) == "" {
		return "must not be empty"
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if msg := store.OneURL(dsn, []string{"postgres", "postgresql"}); msg != "" {
			return msg
		}
		return checkTargetSessionAttrs(dsn)
	}
	if !strings.Contains(dsn, "=") {
		return "must be a postgres:// URL or a key=value connection string (host=... dbname=...)"
	}
	return checkTargetSessionAttrs(dsn)
}

// Describe implements store.Settings.
func (c Settings) Describe() string {
	return fmt.Sprintf("postgres (%s, table %s)", secret.Redact(c.DSN), c.Table)
}

// Leases implements store.Settings: PostgreSQL keeps a lease on every run.
func (Settings) Leases() bool { return true }

// Memory implements store.Settings: finished runs are kept until
// backend.retention prunes them.
func (Settings) Memory() []store.Limit { return nil }

// check is what validate asks of the store: the topology the DSN's hosts
// report (Inspect), printed as a note; an error when no host accepts
// writes.
func check(ctx context.Context, st store.Settings) (string, error) {
	o, err := st.(Settings).options()
	if err != nil {
		return "", err
	}
	t, err := Inspect(ctx, o)
	if err != nil {
		return "", err
	}
	return t.String(), nil
}

// options are the Options the section gives every use of the server.
func (c Settings) options() (Options, error) {
	tc, err := store.TLSConfig("postgres", c.TLS)
	if err != nil {
		return Options{}, err
	}
	return Options{DSN: c.DSN, PasswordFile: c.PasswordFile, Table: c.Table, TLS: tc,
		SynchronousCommit: c.SynchronousCommit}, nil
}
