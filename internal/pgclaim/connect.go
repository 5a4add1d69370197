package pgclaim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/secret"
)

// connSetup is what New and Check derive from Options before they
// connect: the pool's configuration, the DSN as it may be shown, the
// passwords to scrub, and the classifier of the server's refusals.
type connSetup struct {
	cfg           *pgxpool.Config
	dsn           string // redacted
	sec           []string
	refuse        refusals
	schema, table string // of Options.Table; schema empty: current_schema()
}

// fail scrubs err's passwords and classifies the server's refusals.
func (c *connSetup) fail(err error) error {
	return c.refuse.classify(secret.Scrub(explainConnect(err), c.sec...), err)
}

// setup validates o and builds the pool's configuration: the DSN as pgx
// parses it, the password file, TLS, the connect timeout, the pool's
// size, the sessions' runtime parameters, and the check that each
// connection reaches a server that accepts writes (writable).
func setup(o Options) (*connSetup, error) {
	schema, table, err := splitTable(o.Table)
	if err != nil {
		return nil, fmt.Errorf("open postgres backend: %w", err)
	}
	if strings.TrimSpace(o.DSN) == "" {
		return nil, errors.New("open postgres backend: backend.postgres.dsn is empty")
	}
	if o.SynchronousCommit != "" && !slices.Contains(synchronousCommitModes, o.SynchronousCommit) {
		return nil, fmt.Errorf("open postgres backend: backend.postgres.synchronousCommit %q: must be one of %s",
			o.SynchronousCommit, strings.Join(synchronousCommitModes, ", "))
	}
	c := &connSetup{dsn: secret.Redact(o.DSN), sec: secret.Find(o.DSN), schema: schema, table: table}
	if msg := checkTargetSessionAttrs(o.DSN); msg != "" {
		return nil, fmt.Errorf("open postgres backend: backend.postgres.dsn: %s", msg)
	}
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		return nil, secret.Scrub(fmt.Errorf("parse postgres dsn %s: %w", c.dsn, err), c.sec...)
	}
	c.cfg = cfg
	c.sec = append(c.sec, cfg.ConnConfig.Password)
	c.refuse = refusals{role: cfg.ConnConfig.User, table: o.Table}
	if c.refuse.table == "" {
		c.refuse.table = DefaultTable
	}
	if err := c.credentials(o); err != nil {
		return nil, err
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
		if len(hostConfigs(cfg.ConnConfig)) > 1 {
			// Each new connection tries the hosts in order: a dead host
			// that does not refuse (a power cut, a partition) costs every
			// one of them this long before the next host is tried.
			cfg.ConnConfig.ConnectTimeout = multiHostConnectTimeout
		}
	}
	if !strings.Contains(o.DSN, "pool_max_conns") {
		// pgxpool's default (4 on small hosts) lets claims stuck on a lossy
		// network hold every connection while renewals of running jobs
		// queue behind them; a cron's load is small, connections cheap.
		cfg.MaxConns = defaultMaxConns
	}
	// Every claim writes: a connection is kept only on a server that
	// accepts writes, whatever target_session_attrs says (read-write,
	// primary, any or nothing), so that a multi-host DSN finds the
	// primary and a standby is never mistaken for it.
	cfg.ConnConfig.ValidateConnect = writable
	sessionParams(cfg, o)
	return c, nil
}

// credentials applies o's password file and TLS to c's configuration.
func (c *connSetup) credentials(o Options) error {
	if o.PasswordFile != "" {
		pw, err := secret.ReadFile(o.PasswordFile, "backend.postgres.passwordFile")
		if err != nil {
			return c.fail(fmt.Errorf("postgres %s: %w", c.dsn, err))
		}
		c.sec = append(c.sec, pw)
		c.cfg.ConnConfig.Password = pw
	}
	if o.TLS != nil {
		if err := requireTLS(&c.cfg.ConnConfig.Config, o.TLS); err != nil {
			return fmt.Errorf("postgres %s: %w", c.dsn, err)
		}
	}
	return nil
}

// sessionParams sets the runtime parameters of the backend's sessions.
func sessionParams(cfg *pgxpool.Config, o Options) {
	rp := cfg.ConnConfig.RuntimeParams
	if _, ok := rp["application_name"]; !ok {
		rp["application_name"] = applicationName
	}
	// The claim function relies on READ COMMITTED (a fresh snapshot per
	// statement, see schema.go); a database or role default of REPEATABLE
	// READ would turn a queued claim into a serialization failure.
	rp["default_transaction_isolation"] = "read committed"
	if o.SynchronousCommit != "" {
		// A startup parameter outranks postgresql.conf and ALTER
		// ROLE/DATABASE settings, and the DSN's own, which it replaces.
		rp["synchronous_commit"] = o.SynchronousCommit
	}
	if o.tracer != nil {
		cfg.ConnConfig.Tracer = o.tracer
	}
}

// logger is o.Log, or one that discards.
func logger(o Options) *zap.Logger {
	if o.Log == nil {
		return zap.NewNop()
	}
	return o.Log
}
