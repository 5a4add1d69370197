// Package pgclaim is the PostgreSQL lease backend
// (docs/spec.md#s3-1-postgres): anarchond instances on any hosts share one
// database, and a per-job row lock serialises their claims.
//
// A run is a row keyed (job, slot) in the configured table. The claim is
// one round trip: a PL/pgSQL function, created by the schema migration,
// upserts the job's row in <table>_jobs (the row lock, held to COMMIT,
// queues the claims of one job behind each other), locks the run, reads
// store time with clock_timestamp() once the locks are held, and applies
// the decision table of claim.Decide. Before it, Claim does the cheap read
// of docs/spec.md#s3-1: a plain SELECT that answers done, running, or "my own
// claim" without taking any lock; only a run with no state or an expired
// lease calls the function.
//
// The backend is a claim.Recorder: the outcome of a slot no attempt ran
// (skipped, missed, unknown) is a row of the table too, a note (schema
// migration 5), inserted with ON CONFLICT DO NOTHING. A note is final: its
// status is not running, so the claim function answers it done (with no
// holder) from its first read, the overlap question (running rows only)
// never counts it, and Prune deletes it once old like a finished run. A
// note that lands between the function's read under the job's lock and
// its INSERT makes that INSERT do nothing, and the claim is answered done.
//
// Renew, Finish and Release are single UPDATE statements fenced by token
// and status. Store time is PostgreSQL's clock_timestamp(); the backend
// never consults the Go clock for a decision.
//
// TLS and authentication come from the DSN as pgx parses it (sslmode,
// sslrootcert, sslcert, sslkey, ...); Options.PasswordFile supplies the
// password from a file instead. Options.TLS (backend.postgres.tls), when
// set, replaces the DSN's TLS settings and makes TLS required on every
// host the DSN names: no fallback connects in plaintext. Passwords never appear in the errors New
// and the methods return, nor in logs.
//
// Options.SynchronousCommit (backend.postgres.synchronousCommit), when set,
// is the synchronous_commit of every session of the pool, sent with the
// other runtime parameters at connection start. Unset, the backend leaves
// the server's setting (postgresql.conf, ALTER ROLE/DATABASE, the DSN)
// alone. "off" trades durability for latency: a claim that writes is
// acknowledged before its commit reaches the disk, so a server crash may
// forget it and the slot can be won a second time (docs/backends.md).
package pgclaim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/sqlclaim"
)

// DefaultTable is the runs table when Options.Table is empty.
const DefaultTable = "anarchon_runs"

// defaultConnectTimeout bounds each connection attempt when the DSN sets no
// connect_timeout, so that an unreachable server fails New instead of
// hanging on a black-holed address.
const defaultConnectTimeout = 10 * time.Second

// multiHostConnectTimeout is the connect timeout of each host of a DSN
// that names several, when it sets no connect_timeout: after a failover,
// a dead primary listed first delays every new connection by this much.
const multiHostConnectTimeout = 2 * time.Second

// defaultMaxConns is the pool's size unless the DSN sets pool_max_conns.
const defaultMaxConns = 16

// defaultListLimit is ListRuns's limit when the query sets none.
const defaultListLimit = 50

// applicationName is set on the sessions unless the DSN names one, so that
// pg_stat_activity shows who holds a lock.
const applicationName = "anarchond"

// synchronousCommitModes are the values Options.SynchronousCommit takes:
// PostgreSQL's synchronous_commit, spelt as SHOW reports them.
var synchronousCommitModes = []string{"on", "off", "local", "remote_write", "remote_apply"}

// identPattern is one part of Options.Table, as config validation accepts
// it: the derived names (<table>_history_id_seq, the longest) then fit in
// PostgreSQL's 63-byte identifiers.
var identPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// Options configures New.
type Options struct {
	// DSN is a postgres:// URL or a key=value connection string, as pgx
	// parses it: host, port, database, user, sslmode, sslrootcert, ...
	// pool_max_conns and default_query_exec_mode (use exec or
	// simple_protocol behind a transaction-mode pgbouncer) are honoured.
	DSN string
	// PasswordFile, if set, names a file whose content (without its
	// trailing newline) is the password; it overrides one in the DSN.
	PasswordFile string
	// Table is the runs table, optionally schema-qualified ("cron.runs");
	// default DefaultTable. The backend also creates <table>_jobs,
	// <table>_history, <table>_schema and the function <table>_claim in the
	// same schema. An unqualified name is resolved once, at New, in the
	// session's current_schema(). Names are used as written (quoted, so
	// case-sensitive).
	Table string
	// TLS, if set (storetls.Config of backend.postgres.tls), is the client
	// TLS configuration of every connection: it replaces the DSN's
	// sslmode/sslrootcert/sslcert/sslkey and TLS is required. An empty
	// ServerName verifies each host's certificate against the host name.
	TLS *tls.Config
	// SynchronousCommit, if set, is the synchronous_commit of every
	// session of the pool (one of on, off, local, remote_write,
	// remote_apply), overriding the server's, the role's, the database's
	// and the DSN's. Empty leaves the server's setting in effect. With off
	// a claim's commit is acknowledged before it is flushed to disk: a
	// server crash may lose the last claims, renewals and results, and a
	// lost claim can be won again (docs/backends.md).
	SynchronousCommit string
	// Log receives migration and takeover messages; nil discards them.
	Log *zap.Logger

	// tracer, set by tests, observes the queries sent.
	tracer pgx.QueryTracer
}

// Backend is a claim.Leaser, claim.Pruner and claim.Recorder on one
// PostgreSQL table. It is
// safe for concurrent use.
type Backend struct {
	pool    *pgxpool.Pool
	log     *zap.Logger
	names   names
	secrets []string // the passwords to scrub from errors
	refuse  refusals
	sql     queries
}

var _ claim.LeaseStore = (*Backend)(nil)

// names are the quoted, qualified names of one table's objects.
type names struct {
	schema, table string // unquoted, as resolved
	replacer      *strings.Replacer
}

func newNames(schema, table string) names {
	q := func(suffix string) string { return pgx.Identifier{schema, table + suffix}.Sanitize() }
	i := func(suffix string) string { return pgx.Identifier{table + suffix}.Sanitize() }
	return names{
		schema: schema, table: table,
		replacer: strings.NewReplacer(
			"{{runs}}", q(""),
			"{{jobs}}", q("_jobs"),
			"{{history}}", q("_history"),
			"{{schema}}", q("_schema"),
			"{{control}}", q("_control"),
			"{{instances}}", q("_instances"),
			"{{claim}}", q("_claim"),
			"{{live}}", i("_live"),
			"{{slotidx}}", i("_slot_job"),
			"{{histidx}}", i("_history_run"),
			"{{statuscheck}}", i("_status_check"),
			"{{attemptcheck}}", i("_attempt_check"),
			"{{now}}", nowMs,
		),
	}
}

// expand replaces the placeholders of a SQL template.
func (n names) expand(sql string) string { return n.replacer.Replace(sql) }

// qualified is "schema.table", unquoted.
func (n names) qualified() string { return n.schema + "." + n.table }

// lockKey is the advisory lock key of the table's migrations (purpose
// "migrate") or prunes ("prune"): a hash of the qualified name, the same
// for every instance.
func (n names) lockKey(purpose string) int64 {
	h := fnv.New64a()
	h.Write([]byte("anarchon/" + purpose + "/" + n.qualified()))
	return int64(h.Sum64())
}

// queries are the SQL statements with the table's names in them.
type queries struct {
	selectRun, claim, claimBatch, renew        string
	finish, release                            string
	listRuns, listJobRuns, prune, pruneJobs    string
	listStatus, listJobStatus, record          string
	currentVersion, recordVersion, createTable string
}

func newQueries(n names) queries {
	return queries{
		selectRun:      n.expand(selectRunSQL),
		claim:          n.expand(claimSQL),
		claimBatch:     n.expand(claimBatchSQL),
		renew:          n.expand(renewSQL),
		finish:         n.expand(finishSQL),
		release:        n.expand(releaseSQL),
		listRuns:       n.expand(listRunsSQL),
		listJobRuns:    n.expand(listJobRunsSQL),
		listStatus:     n.expand(listStatusSQL),
		listJobStatus:  n.expand(listJobStatusSQL),
		record:         n.expand(recordSQL),
		prune:          n.expand(pruneSQL),
		pruneJobs:      n.expand(pruneJobsSQL),
		currentVersion: n.expand(currentVersionSQL),
		recordVersion:  n.expand(recordVersionSQL),
		createTable:    n.expand(createMigrationsT),
	}
}

// splitTable parses Options.Table into schema (may be empty) and table.
func splitTable(t string) (schema, table string, err error) {
	if t == "" {
		t = DefaultTable
	}
	schema, table, ok := strings.Cut(t, ".")
	if !ok {
		schema, table = "", t
	} else if !identPattern.MatchString(schema) {
		return "", "", fmt.Errorf("table %q: schema %q is not a name of letters, digits and _ (at most 48)", t, schema)
	}
	if !identPattern.MatchString(table) {
		return "", "", fmt.Errorf("table %q: %q is not a name of letters, digits and _ (at most 48)", t, table)
	}
	return schema, table, nil
}

// New connects to the database o.DSN names, checks that it answers, and
// migrates the table's schema. Several instances may call New on one table
// at once. Its errors never contain a password.
func New(ctx context.Context, o Options) (*Backend, error) {
	c, err := setup(o)
	if err != nil {
		return nil, err
	}
	log, dsn := logger(o), c.dsn
	pool, err := pgxpool.NewWithConfig(ctx, c.cfg)
	if err != nil {
		return nil, c.fail(fmt.Errorf("connect to postgres %s: %w", dsn, err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, c.fail(fmt.Errorf("connect to postgres %s: %w", dsn, err))
	}
	if o.SynchronousCommit != "" {
		if err := checkSynchronousCommit(ctx, pool, o.SynchronousCommit, log); err != nil {
			pool.Close()
			return nil, c.fail(fmt.Errorf("postgres %s: %w", dsn, err))
		}
	}
	schema := c.schema
	if schema == "" {
		var cur *string
		if err := pool.QueryRow(ctx, currentSchemaSQL).Scan(&cur); err != nil {
			pool.Close()
			return nil, c.fail(fmt.Errorf("postgres %s: read current_schema(): %w", dsn, err))
		}
		if cur == nil {
			pool.Close()
			return nil, fmt.Errorf("postgres %s: table %q: no schema of the search_path exists; name one (schema.table)", dsn, c.table)
		}
		schema = *cur
	}
	n := newNames(schema, c.table)
	c.refuse.schema, c.refuse.table = schema, c.table
	b := &Backend{pool: pool, log: log, names: n, secrets: c.sec, refuse: c.refuse, sql: newQueries(n)}
	if err := b.migrate(ctx); err != nil {
		pool.Close()
		return nil, c.fail(fmt.Errorf("migrate postgres table %s (%s): %w", n.qualified(), dsn, err))
	}
	return b, nil
}

// wrap scrubs err's passwords and classifies the server's refusals. An
// answer of a read-only server (SQLSTATE 25006) drops every connection of
// the pool (readOnlyAnswer), so that the next call connects again to a
// server that accepts writes.
func (b *Backend) wrap(err error) error {
	err = b.readOnlyAnswer(err)
	return b.refuse.classify(secret.Scrub(explainConnect(err), b.secrets...), err)
}

// requireTLS makes every connection attempt of cc (the primary host and
// every fallback) use TLS with t, its ServerName defaulting to the host's
// name. pgx's sslmode=prefer/allow fallbacks without TLS would otherwise
// connect in plaintext; the attempts left are one per host and port.
func requireTLS(cc *pgconn.Config, t *tls.Config) error {
	all := append([]*pgconn.FallbackConfig{{Host: cc.Host, Port: cc.Port}}, cc.Fallbacks...)
	var out []*pgconn.FallbackConfig
	seen := map[string]bool{}
	for _, f := range all {
		if network, _ := pgconn.NetworkAddress(f.Host, f.Port); network == "unix" {
			return fmt.Errorf("backend.postgres.tls is set but host %s is a Unix socket, which carries no TLS", f.Host)
		}
		k := fmt.Sprintf("%s:%d", f.Host, f.Port)
		if seen[k] {
			continue
		}
		seen[k] = true
		c := t.Clone()
		if c.ServerName == "" {
			c.ServerName = f.Host
		}
		if cc.SSLNegotiation == "direct" && len(c.NextProtos) == 0 {
			c.NextProtos = []string{"postgresql"} // as pgx sets it
		}
		out = append(out, &pgconn.FallbackConfig{Host: f.Host, Port: f.Port, TLSConfig: c})
	}
	cc.Host, cc.Port, cc.TLSConfig = out[0].Host, out[0].Port, out[0].TLSConfig
	cc.Fallbacks = out[1:]
	return nil
}

// checkSynchronousCommit reads synchronous_commit on a session of the pool
// and logs it. A value other than want means that something between the
// backend and the server dropped the startup parameter (a pooler's
// ignore_startup_parameters): that is logged as a warning, since the
// sessions' durability is then not the one configured.
func checkSynchronousCommit(ctx context.Context, pool *pgxpool.Pool, want string, log *zap.Logger) error {
	var got string
	if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&got); err != nil {
		return fmt.Errorf("read synchronous_commit: %w", err)
	}
	if got != want {
		log.Warn("postgres sessions do not run with the configured synchronous_commit: a connection pooler may drop startup parameters; set it on the role instead (ALTER ROLE ... SET synchronous_commit)",
			zap.String("configured", want), zap.String("session", got))
		return nil
	}
	log.Info("postgres sessions run with synchronous_commit from backend.postgres.synchronousCommit",
		zap.String("synchronous_commit", got))
	return nil
}

// migrate brings the table's schema to the latest version in one
// transaction, under an advisory lock derived from the table's name.
func (b *Backend) migrate(ctx context.Context) error {
	// Most starts find the schema current: look first without the lock, so
	// that one instance stuck inside its migration transaction (paused, or
	// its replies lost on the network while the server holds its session)
	// does not hold every other instance's start. Any doubt (no table yet,
	// an error) takes the locked path, which also reports the error.
	if b.schemaCurrent(ctx) {
		return nil
	}
	var have int
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockMigrationSQL, b.names.lockKey("migrate")); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		var ok bool
		if err := tx.QueryRow(ctx, schemaExistsSQL, b.names.schema).Scan(&ok); err != nil {
			return fmt.Errorf("look up schema %q: %w", b.names.schema, err)
		}
		if !ok {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{b.names.schema}.Sanitize()); err != nil {
				return fmt.Errorf("create schema %q: %w", b.names.schema, err)
			}
		}
		if err := tx.QueryRow(ctx, regclassSQL, b.names.expand("{{schema}}")).Scan(&ok); err != nil {
			return fmt.Errorf("look up %s_schema: %w", b.names.table, err)
		}
		if !ok {
			if _, err := tx.Exec(ctx, b.sql.createTable); err != nil {
				return fmt.Errorf("create %s_schema: %w", b.names.table, err)
			}
		}
		if err := tx.QueryRow(ctx, b.sql.currentVersion).Scan(&have); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if have > len(migrations) {
			return fmt.Errorf("schema version %d is newer than this anarchond knows (%d): upgrade anarchond", have, len(migrations))
		}
		for v := have + 1; v <= len(migrations); v++ {
			// A simple-protocol Exec may hold several statements; a
			// parameterised one may not (docs/spec.md#s8).
			if _, err := tx.Exec(ctx, b.names.expand(migrations[v-1]), pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("apply migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, b.sql.recordVersion, v); err != nil {
				return fmt.Errorf("record migration %d: %w", v, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if have < len(migrations) {
		b.log.Info("postgres schema migrated", zap.String("table", b.names.qualified()),
			zap.Int("from", have), zap.Int("to", len(migrations)))
	}
	return nil
}

// schemaCurrent reports whether the table's schema is at the latest
// version, read without the migration lock.
func (b *Backend) schemaCurrent(ctx context.Context) bool {
	var ok bool
	if err := b.pool.QueryRow(ctx, regclassSQL, b.names.expand("{{schema}}")).Scan(&ok); err != nil || !ok {
		return false
	}
	var have int
	if err := b.pool.QueryRow(ctx, b.sql.currentVersion).Scan(&have); err != nil {
		return false
	}
	return have == len(migrations)
}

// Table returns the runs table, schema-qualified ("public.anarchon_runs").
func (b *Backend) Table() string { return b.names.qualified() }

// closeTimeout bounds Close's wait for the pool's connections.
const closeTimeout = 5 * time.Second

// Close closes the connection pool, waiting up to closeTimeout for the
// connections in use: a connection whose replies a network fault swallows
// (a health-check ping of the pool, a query without a deadline) would
// otherwise hold the daemon's exit forever. Past the timeout the pool is
// left to close in the background and Close returns an error.
func (b *Backend) Close() error {
	done := make(chan struct{})
	go func() {
		b.pool.Close()
		close(done)
	}()
	t := time.NewTimer(closeTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("close postgres pool: connections still busy after %v; leaving them", closeTimeout)
	}
}

// Claim makes the decision of docs/spec.md#s3-1 for req, with store time.
//
// It is one call of the claim function, one round trip. The function
// first reads the run with a plain SELECT: a finished run (done), the
// caller's own live claim re-sent (won) and another's live lease (running)
// are answered from that read, without a lock and without writing. Only a
// run with no state or an expired lease is decided again under the job's
// lock.
func (b *Backend) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	if err := req.CheckLease(); err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	res, err := b.claimLocked(ctx, req)
	if err != nil {
		return claim.Result{}, b.wrap(fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err))
	}
	return res, nil
}

// claimLocked calls the claim function: one statement, one round trip,
// one implicit transaction.
func (b *Backend) claimLocked(ctx context.Context, req claim.Request) (claim.Result, error) {
	var r claimRow
	// Durations in ms, truncated: for an integer age x, x > maxLate holds
	// exactly when x > floor(maxLate in ms). maxAttempts <= 0 behaves as 0
	// in claim.Decide (no takeover ever), so it is clamped into int4.
	err := b.pool.QueryRow(ctx, b.sql.claim, req.Job, req.Slot, string(req.Token), req.Instance,
		req.MaxLate.Milliseconds(), req.Lease.Milliseconds(), maxAttempts(req),
		req.Overlap.Exclusive()).Scan(&r.outcome, &r.attempt, &r.storeNow, &r.leaseUntil, &r.holder)
	if err != nil {
		return claim.Result{}, err
	}
	return b.result(req, r), nil
}

// ClaimBatch decides reqs in one statement that calls the claim function
// for each, in order: one round trip and one transaction, so one commit
// (one WAL flush) for the batch. The job locks taken are held to the end
// of the batch; two instances' batches that lock the same jobs in
// opposite orders may deadlock, and PostgreSQL then aborts one of them,
// which is re-sent: the scheduler sends its batches ordered by job, so
// this does not happen between anarchon instances.
func (b *Backend) ClaimBatch(ctx context.Context, reqs []claim.Request) ([]claim.Result, error) {
	n := len(reqs)
	var (
		jobs, tokens, instances = make([]string, n), make([]string, n), make([]string, n)
		slots, maxLate, lease   = make([]int64, n), make([]int64, n), make([]int64, n)
		attempts                = make([]int32, n)
		skip                    = make([]bool, n)
	)
	for i, req := range reqs {
		if err := req.CheckLease(); err != nil {
			return nil, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
		}
		jobs[i], slots[i], tokens[i], instances[i] = req.Job, req.Slot, string(req.Token), req.Instance
		maxLate[i], lease[i], attempts[i] = req.MaxLate.Milliseconds(), req.Lease.Milliseconds(), maxAttempts(req)
		skip[i] = req.Overlap.Exclusive()
	}
	rows, err := b.pool.Query(ctx, b.sql.claimBatch, jobs, slots, tokens, instances, maxLate, lease, attempts, skip)
	if err != nil {
		return nil, b.wrap(fmt.Errorf("claim a batch of %d: %w", n, err))
	}
	out := make([]claim.Result, 0, n)
	var r claimRow
	_, err = pgx.ForEachRow(rows, []any{&r.outcome, &r.attempt, &r.storeNow, &r.leaseUntil, &r.holder}, func() error {
		if len(out) == n {
			return errors.New("more answers than claims")
		}
		out = append(out, b.result(reqs[len(out)], r))
		return nil
	})
	if err == nil && len(out) != n {
		err = fmt.Errorf("%d answers for %d claims", len(out), n)
	}
	if err != nil {
		return nil, b.wrap(fmt.Errorf("claim a batch of %d: %w", n, err))
	}
	return out, nil
}

// claimRow is one answer of the claim function.
type claimRow struct {
	outcome    string
	attempt    int32
	storeNow   int64
	leaseUntil *int64
	holder     string
}

// maxAttempts is req's maxAttempts clamped into int4; <= 0 behaves as 0 in
// claim.Decide (no takeover ever).
func maxAttempts(req claim.Request) int32 { return int32(max(0, min(req.MaxAttempts, 1<<31-1))) }

// result converts the function's answer to req, logging takeovers and
// interruptions.
func (b *Backend) result(req claim.Request, r claimRow) claim.Result {
	res := claim.Result{Outcome: claim.Outcome(r.outcome), Attempt: int(r.attempt), StoreNow: fromMs(r.storeNow), Holder: r.holder}
	if r.leaseUntil != nil {
		res.LeaseUntil = fromMs(*r.leaseUntil)
	}
	switch {
	case res.Outcome == claim.Won && res.Attempt > 1:
		b.log.Debug("claim decision", zap.String("event", string(claim.EventTakeover)),
			zap.String("job", req.Job), zap.Int64("slot", req.Slot), zap.Int("attempt", res.Attempt),
			zap.String("instance", req.Instance), zap.String("token", req.Token.Short()))
	case res.Outcome == claim.Done && res.Attempt > 0:
		b.log.Debug("claim decision", zap.String("event", string(claim.EventInterrupted)),
			zap.String("job", req.Job), zap.Int64("slot", req.Slot), zap.Int("attempt", res.Attempt),
			zap.String("instance", req.Instance), zap.String("token", req.Token.Short()))
	}
	return res
}

// readRun returns the run (nil when there is none) and store now.
func (b *Backend) readRun(ctx context.Context, job string, slot int64) (*claim.Run, time.Time, error) {
	var (
		now int64
		row sqlclaim.RunRow
	)
	if err := b.pool.QueryRow(ctx, b.sql.selectRun, job, slot).Scan(row.Dest(&now)...); err != nil {
		return nil, time.Time{}, err
	}
	return row.Run(), fromMs(now), nil
}

// Read is the cheap read of a run: one plain SELECT, no lock. It returns
// store now also with claim.ErrNotFound.
func (b *Backend) Read(ctx context.Context, job string, slot int64) (claim.Run, time.Time, error) {
	r, now, err := b.readRun(ctx, job, slot)
	return sqlclaim.ReadAnswer(job, slot, r, now, err, b.wrap)
}

// Renew extends f's lease to store now + lease, only while f's token owns
// the run and it is running; otherwise claim.ErrFenced (claim.ErrRunLost
// when the table no longer holds f's claim).
func (b *Backend) Renew(ctx context.Context, f claim.Fence, lease time.Duration) (claim.Result, error) {
	if lease < time.Millisecond {
		return claim.Result{}, fmt.Errorf("renew %s: lease %v is shorter than 1ms", f, lease)
	}
	var attempt int32
	var now, until int64
	err := b.pool.QueryRow(ctx, b.sql.renew, f.Job, f.Slot, lease.Milliseconds(), string(f.Token)).
		Scan(&attempt, &now, &until)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return claim.Result{}, fmt.Errorf("renew %s: %w", f, b.fenced(ctx, f, nil))
	case err != nil:
		return claim.Result{}, b.wrap(fmt.Errorf("renew %s: %w", f, err))
	}
	return claim.Result{Outcome: claim.Won, Attempt: int(attempt), StoreNow: fromMs(now), LeaseUntil: fromMs(until)}, nil
}

// Finish records the result of f's attempt with store-time finished_at,
// only while f's token owns the run and it is running; otherwise
// claim.ErrFenced. The exit code is NULL for interrupted. fin.StartedAt and
// fin.FinishedAt are not used: the run keeps the store's stamps. The output
// tail is stored as valid UTF-8 without NUL bytes (PostgreSQL text holds
// neither), each offending byte replaced by "?".
func (b *Backend) Finish(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	if !fin.Status.Final() {
		return fmt.Errorf("finish %s: status %q is not a final status", f, fin.Status)
	}
	var exit *int32
	if fin.Status != claim.StatusInterrupted {
		c := int32(fin.ExitCode)
		exit = &c
	}
	err := b.fencedWrite(ctx, f, &fin, b.sql.finish, f.Job, f.Slot, string(fin.Status), exit,
		cleanText(fin.OutputTail), string(f.Token))
	if err != nil {
		return b.wrap(fmt.Errorf("finish %s: %w", f, err))
	}
	return nil
}

// Release ends f's lease now, so that a backup's claim takes over at once
// (attempt+1); claim.ErrFenced when f no longer owns a running run.
func (b *Backend) Release(ctx context.Context, f claim.Fence) error {
	if err := b.fencedWrite(ctx, f, nil, b.sql.release, f.Job, f.Slot, string(f.Token)); err != nil {
		return b.wrap(fmt.Errorf("release %s: %w", f, err))
	}
	return nil
}

// fencedWrite runs a fenced UPDATE of f's run (a Finish of fin, or nil)
// that appends its history event in the same statement and returns a row
// per run written; none means claim.ErrFenced, or claim.ErrRunLost, or
// for a Finish already recorded, success (see fenced).
func (b *Backend) fencedWrite(ctx context.Context, f claim.Fence, fin *claim.Finish, query string, args ...any) error {
	var attempt int32
	err := b.pool.QueryRow(ctx, query, args...).Scan(&attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return b.fenced(ctx, f, fin)
	}
	return err
}

// fenced says why a fenced write of f (a Finish of fin, or nil) wrote
// nothing. It reads the run (one more round trip, on this path only):
// nil when the run already holds fin from f's token (a Finish re-sent
// after its answer was lost, claim.Recorded); claim.ErrRunLost when the
// table no longer holds f's claim (the row gone, as after a failover to a
// standby that had not received it, or the slot claimed anew);
// claim.ErrFenced when another attempt took the run over or it has ended.
func (b *Backend) fenced(ctx context.Context, f claim.Fence, fin *claim.Finish) error {
	r, _, err := b.readRun(ctx, f.Job, f.Slot)
	switch {
	case err != nil:
		return claim.ErrFenced
	case fin != nil && claim.Recorded(f, stored(*fin), r):
		return nil
	}
	return claim.FencedBy(f, r)
}

// stored is fin as the table keeps it: its output tail cleaned.
func stored(fin claim.Finish) claim.Finish {
	fin.OutputTail = cleanText(fin.OutputTail)
	return fin
}

// cleanText makes s storable in a text column: NUL bytes and invalid UTF-8
// become "?" (never longer than what they replace, as the runner does).
func cleanText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "?"), "\x00", "?")
}

// ListRuns returns recent runs and notes, newest slot first (then by
// job), of q.Job (all when empty) and in one of q.Statuses (all when
// empty), at most q.Limit (default 50).
func (b *Backend) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	statuses := make([]string, len(q.Statuses))
	for i, st := range q.Statuses {
		statuses[i] = string(st)
	}
	query, args := b.sql.listRuns, []any{limit}
	switch {
	case q.Job == "" && len(statuses) > 0:
		query, args = b.sql.listStatus, append(args, statuses)
	case len(statuses) > 0:
		query, args = b.sql.listJobStatus, append(args, q.Job, statuses)
	case q.Job != "":
		query, args = b.sql.listJobRuns, append(args, q.Job)
	}
	return queryAll(ctx, b, "list runs", sqlclaim.ScanRun, query, args...)
}

// queryAll runs query and reads every row it returns with scan; what
// names the reading in its errors.
func queryAll[T any](ctx context.Context, b *Backend, what string, scan func(sqlclaim.Scanner) (T, error),
	query string, args ...any,
) ([]T, error) {
	rows, err := b.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, b.wrap(fmt.Errorf("%s: %w", what, err))
	}
	out, err := pgx.CollectRows(rows, rowTo(scan))
	if err != nil {
		return nil, b.wrap(fmt.Errorf("%s: %w", what, err))
	}
	return out, nil
}

// rowTo adapts a reader of rows to pgx's collecting functions.
func rowTo[T any](scan func(sqlclaim.Scanner) (T, error)) pgx.RowToFunc[T] {
	return func(row pgx.CollectableRow) (T, error) { return scan(row) }
}

// Record stores n as the run (n.Job, n.Slot), finished at store now, unless
// the table already has a run or a note of the slot; it reports whether it
// wrote. One INSERT ... ON CONFLICT DO NOTHING, one round trip, no lock
// beyond the row's: a claim that inserts the slot's row after it answers
// done, and one that inserted first makes it write nothing.
func (b *Backend) Record(ctx context.Context, n claim.Note) (bool, error) {
	if err := n.Check(); err != nil {
		return false, fmt.Errorf("record: %w", err)
	}
	tag, err := b.pool.Exec(ctx, b.sql.record, n.Job, n.Slot, string(n.Status), n.Instance,
		cleanText(n.Reason), n.HeldBy)
	if err != nil {
		return false, b.wrap(fmt.Errorf("record %s@%d: %w", n.Job, n.Slot, err))
	}
	return tag.RowsAffected() == 1, nil
}

// Prune deletes the runs and notes whose slot is older than store now -
// olderThan and that are finished (every note is) or whose lease ended
// before that cutoff, with their history; a run with a live lease is never deleted. It then forgets the
// lock rows of jobs with no runs left. olderThan must exceed every job's
// maxLate: a pruned slot that is not yet late would be won again.
func (b *Backend) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("prune: negative age %v", olderThan)
	}
	var n int64
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockPruneSQL, b.names.lockKey("prune")); err != nil {
			return fmt.Errorf("take the prune lock: %w", err)
		}
		if err := tx.QueryRow(ctx, b.sql.prune, olderThan.Milliseconds()).Scan(&n); err != nil {
			return fmt.Errorf("delete runs: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, b.wrap(fmt.Errorf("prune: %w", err))
	}
	if n > 0 {
		if _, err := b.pool.Exec(ctx, b.sql.pruneJobs); err != nil {
			return n, b.wrap(fmt.Errorf("prune: forget jobs with no runs: %w", err))
		}
		b.log.Debug("pruned runs", zap.Int64("runs", n), zap.Duration("older_than", olderThan))
	}
	return n, nil
}

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }
