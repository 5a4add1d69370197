// Package sqliteclaim is the SQLite lease backend (docs/spec.md#s3-1-sqlite):
// several anarchond instances on one host share one database file, and
// SQLite's single writer serialises their claims.
//
// Every claim that may write runs in one BEGIN IMMEDIATE transaction (the DSN
// sets _txlock=immediate, so database/sql's BeginTx issues it): the write
// lock is taken at BEGIN, waiting up to the busy timeout, so a second
// claimer waits there and then reads what the first one wrote. Inside the
// transaction the decision is claim.Decide, the table every lease backend
// implements. Store time is SQLite's own clock (unixepoch('subsec'), read in
// the SQL); the backend never consults the Go clock for a decision.
//
// The backend is a claim.Recorder: the outcome of a slot no attempt ran
// (skipped, missed, unknown) is a row of runs too, a note (schema
// migration 2), inserted if the slot has no row yet. A note is final: its
// status is not running, so a claim answers it done from the plain read,
// the overlap question (running rows only) never counts it, and Prune
// deletes it once old like a finished run. Within the claim's write
// transaction the run is read again under the write lock, so a note
// recorded before it commits is seen there.
//
// The file must be on a local filesystem: SQLite's locking is not reliable
// over NFS or SMB, and this backend is not supported there.
package sqliteclaim

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sqlclaim"
)

// DefaultBusyTimeout is how long a writer waits for another's write lock
// when Options.BusyTimeout is zero (busyTimeoutMs, docs/spec.md#s6-config).
const DefaultBusyTimeout = 5 * time.Second

// defaultListLimit is ListRuns's limit when the query sets none.
const defaultListLimit = 50

// maxConns bounds the connections to the file per Backend. Writes are
// serialised in-process anyway (see Backend.wlock); the rest serve the
// plain reads of backups and status.
const maxConns = 8

// Options configures New.
type Options struct {
	// Path is the database file. Its directory must exist and be writable
	// (the file, its -wal and -shm companions are created there); New does
	// not create directories.
	Path string
	// BusyTimeout is how long a write waits for another connection's write
	// lock before failing with "database is locked"; 0 means
	// DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Log receives migration and takeover messages; nil discards them.
	Log *zap.Logger
}

// Backend is a claim.Leaser, claim.Pruner and claim.Recorder on one SQLite
// file. It is safe
// for concurrent use.
type Backend struct {
	db   *sql.DB
	path string
	log  *zap.Logger
	// wlock serialises this process's writers before they reach SQLite.
	// SQLite admits one writer at a time anyway; queueing on a channel
	// instead of on SQLite's busy handler (which sleeps and polls) keeps the
	// latency of contended claims low, and honours ctx while waiting. Other
	// processes are still serialised by SQLite's lock.
	wlock chan struct{}
}

var _ claim.LeaseStore = (*Backend)(nil)

// nowMs is the store's clock in integer milliseconds since the Unix epoch.
// unixepoch('subsec') needs SQLite 3.42; mattn/go-sqlite3 v1.14.53 bundles
// 3.54. SQLite fixes 'now' for the duration of one sqlite3_step, so every
// use of nowMs within one statement reads the same instant.
const nowMs = `CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)`

// SQL of the claim and of the fenced writes.
const (
	// selectRunSQL reads store now and the run (all NULL when there is none)
	// in one statement. It is both the read before the transaction and the
	// read under the write lock.
	selectRunSQL = `SELECT ` + nowMs + `, r.job, r.slot, r.status, r.attempt, r.instance, r.token,
		r.started_at, r.finished_at, r.lease_until, r.exit_code, r.output_tail,
		r.reason, r.held_by
		FROM (SELECT 1) LEFT JOIN runs r ON r.job = ? AND r.slot = ?`

	// otherLiveSQL is the overlap rule's question (uses index runs_live).
	otherLiveSQL = `SELECT EXISTS (SELECT 1 FROM runs
		WHERE job = ? AND status = 'running' AND lease_until >= ? AND slot <> ?)`

	// upsertRunSQL stores the state claim.Decide asked for: a new run,
	// a takeover or an interruption.
	upsertRunSQL = `INSERT INTO runs (job, slot, status, attempt, instance, token,
		started_at, finished_at, lease_until, exit_code, output_tail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (job, slot) DO UPDATE SET
		status = excluded.status, attempt = excluded.attempt,
		instance = excluded.instance, token = excluded.token,
		started_at = excluded.started_at, finished_at = excluded.finished_at,
		lease_until = excluded.lease_until, exit_code = excluded.exit_code,
		output_tail = excluded.output_tail`

	// insertHistorySQL appends one event of one attempt to the history.
	insertHistorySQL = `INSERT INTO run_history (job, slot, attempt, token, instance, event, at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`

	// renewSQL extends a lease, fenced by token and status. StoreNow is
	// returned as lease_until - lease: the same reading of the clock.
	renewSQL = `UPDATE runs SET lease_until = ` + nowMs + ` + ?3
		WHERE job = ?1 AND slot = ?2 AND token = ?4 AND status = 'running'
		RETURNING attempt, lease_until - ?3, lease_until`

	// finishSQL records a result, fenced by token and status.
	finishSQL = `UPDATE runs SET status = ?3, exit_code = ?4, output_tail = ?5,
		finished_at = max(started_at, ` + nowMs + `)
		WHERE job = ?1 AND slot = ?2 AND token = ?6 AND status = 'running'
		RETURNING attempt, instance, finished_at`

	// releaseSQL ends a lease, fenced by token and status. The lease ends
	// one millisecond before now, so that lease_until < now holds at once
	// and a backup's claim in the same millisecond already takes over.
	releaseSQL = `UPDATE runs SET lease_until = ` + nowMs + ` - 1
		WHERE job = ?1 AND slot = ?2 AND token = ?3 AND status = 'running'
		RETURNING attempt, instance, lease_until + 1`

	runColumns = `job, slot, status, attempt, instance, token,
		started_at, finished_at, lease_until, exit_code, output_tail, reason, held_by`

	// listRunsSQL serves status, newest slot first; listSQL adds the
	// WHERE clause of a query between its two parts.
	listRunsSQL   = `SELECT ` + runColumns + ` FROM runs`
	listOrderSQL  = ` ORDER BY slot DESC, job LIMIT ?`
	listJobSQL    = `job = ?`
	listStatusSQL = `status IN (?`

	// recordSQL inserts a note unless the slot has a row (a claim or an
	// earlier note), stamped with store time.
	recordSQL = `INSERT INTO runs (job, slot, status, attempt, instance, token,
		started_at, finished_at, lease_until, exit_code, output_tail, reason, held_by)
		VALUES (?, ?, ?, 0, ?, '', 0, ` + nowMs + `, 0, NULL, '', ?, ?)
		ON CONFLICT (job, slot) DO NOTHING`

	// selectNowSQL reads store now alone.
	selectNowSQL = `SELECT ` + nowMs

	// pruneRunsSQL deletes old runs that are finished or whose lease ended
	// before the cutoff; a live run's lease_until >= now > cutoff, so it is
	// never deleted.
	pruneRunsSQL = `DELETE FROM runs
		WHERE slot < ?1 AND (status <> 'running' OR lease_until < ?1)
		RETURNING job, slot`
	pruneHistorySQL = `DELETE FROM run_history WHERE job = ? AND slot = ?`
)

// New opens (creating if needed) the database file o.Path, checks that it
// can be read and written, and migrates its schema. Several processes may
// call New on one file at once.
func New(ctx context.Context, o Options) (*Backend, error) {
	if err := checkPath(o.Path); err != nil {
		return nil, err
	}
	if o.BusyTimeout < 0 {
		return nil, fmt.Errorf("open sqlite database %q: negative busy timeout %v", o.Path, o.BusyTimeout)
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	createPrivate(o.Path)
	db, err := sql.Open("sqlite3", dsn(o.Path, o.BusyTimeout))
	if err != nil {
		return nil, fmt.Errorf("open sqlite database %q: %w", o.Path, err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	b := &Backend{db: db, path: o.Path, log: o.Log, wlock: make(chan struct{}, 1)}
	if err := whileBusy(ctx, o.BusyTimeout, func() error { return db.PingContext(ctx) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite database %q: %w", o.Path, err)
	}
	if err := whileBusy(ctx, o.BusyTimeout, func() error { return b.migrate(ctx) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate sqlite database %q: %w", o.Path, err)
	}
	return b, nil
}

// createPrivate creates the database file at path, empty (an empty file is
// an empty database) and mode 0600, if there is none: the runs it will hold
// (commands' output, hosts) are the daemon's alone. SQLite gives the -wal and
// -shm files it creates beside it the database file's mode. An existing
// file keeps its mode. A failure is left to SQLite's own open, which reports
// it.
func createPrivate(path string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_ = f.Chmod(0o600) // a umask such as 0277 would leave it unwritable
}

// whileBusy runs f again while it fails with "database is locked" (or
// busy), for up to timeout. Instances that start together on a new file
// race to switch it to WAL and to migrate it, and SQLite does not always
// call its busy handler for those (a journal-mode change fails at once).
func whileBusy(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := f()
		var se sqlite3.Error
		if err == nil || !errors.As(err, &se) || (se.Code != sqlite3.ErrBusy && se.Code != sqlite3.ErrLocked) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// checkPath refuses paths that would not name one shared file on disk.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("open sqlite database: backend.sqlite.path is empty")
	case p == ":memory:" || strings.HasPrefix(p, "file:"):
		// An in-memory database is private to one connection; a URI would
		// bypass the parameters dsn sets.
		return fmt.Errorf("open sqlite database %q: need the path of a file on a local disk", p)
	}
	return nil
}

// dsn builds the mattn/go-sqlite3 DSN for path.
//
//   - _txlock=immediate: BeginTx issues BEGIN IMMEDIATE, taking the write
//     lock at BEGIN. With the default (deferred) the lock is taken at the
//     first write, and two claimers that both read "none" conflict with
//     "database is locked" instead of queueing (docs/spec.md#s8).
//   - _busy_timeout: how long BEGIN IMMEDIATE waits for the lock.
//   - _journal_mode=WAL: readers (backups' cheap reads, status) never block
//     the writer and the writer never blocks them.
//   - _synchronous=FULL: the WAL is fsynced at every commit, so a claim
//     answered won survives a power loss. With NORMAL (mattn's WAL default)
//     the last commits may roll back after a power cut: the host's instances
//     died with it, but a restarted one could then win a slot whose command
//     had already started and had side effects. A cron claims a few runs a
//     second at most; one fsync per claim (about 0.2 ms here, see
//     bench_test.go) is cheap insurance.
//   - _stmt_cache_size: each connection keeps its prepared statements; the
//     claim's few statements are then not re-parsed (about 30% of an
//     uncontended claim's CPU time).
//
// The path is passed as a URI (file:...), escaped, so that a path with '?'
// or '#' is not cut short; the underscore parameters are read by the driver
// and ignored by SQLite.
func dsn(path string, busy time.Duration) string {
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", strconv.FormatInt(max(busy.Milliseconds(), 1), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_stmt_cache_size", "32")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// migrate applies the migrations the file lacks, all in one BEGIN IMMEDIATE
// transaction: processes starting together on a fresh file queue on the
// write lock, and each later one finds the schema already at the latest
// version.
func (b *Backend) migrate(ctx context.Context) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, createMigrationsSQL); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, currentVersionSQL).Scan(&have); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if have > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this anarchond knows (%d): upgrade anarchond", have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("apply migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, recordVersionSQL, v); err != nil {
			return fmt.Errorf("record migration %d: %w", v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	if have < len(migrations) {
		b.log.Info("sqlite schema migrated", zap.String("path", b.path),
			zap.Int("from", have), zap.Int("to", len(migrations)))
	}
	return nil
}

// Path returns the database file's path.
func (b *Backend) Path() string { return b.path }

// Close closes the database.
func (b *Backend) Close() error {
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("close sqlite database %q: %w", b.path, err)
	}
	return nil
}

// lockWrite waits for this process's write turn, or for ctx.
func (b *Backend) lockWrite(ctx context.Context) error {
	select {
	case b.wlock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Backend) unlockWrite() { <-b.wlock }

// Claim makes the decision of docs/spec.md#s3-1 for req, with store time.
//
// It first reads the run with a plain SELECT: a finished run (done), the
// caller's own live claim re-sent (won) and another's live lease (running)
// are answered from that read, without the write lock. Only a run with no
// state or an expired lease opens the BEGIN IMMEDIATE transaction, which
// reads again under the lock and applies claim.Decide.
func (b *Backend) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	if err := req.CheckLease(); err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	cur, now, err := b.readRun(ctx, b.db, req.Job, req.Slot)
	if err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: read: %w", req.Job, req.Slot, err)
	}
	if !claim.Contested(cur, now, req.Token) {
		return claim.Decide(cur, false, now, req).Result, nil
	}
	res, err := b.claimLocked(ctx, req)
	if err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	return res, nil
}

// claimLocked is the claim's write transaction.
func (b *Backend) claimLocked(ctx context.Context, req claim.Request) (claim.Result, error) {
	res, err := b.claimAllLocked(ctx, []claim.Request{req})
	if err != nil {
		return claim.Result{}, err
	}
	return res[0], nil
}

// ClaimBatch decides reqs in one write transaction, one commit (one sync
// of the file) for all: a batch costs about what one claim costs. Runs
// that the plain read answers (finished, held by a live lease, my own
// re-sent claim) are answered from it first, and when none is left to
// decide no write transaction is opened.
func (b *Backend) ClaimBatch(ctx context.Context, reqs []claim.Request) ([]claim.Result, error) {
	for _, req := range reqs {
		if err := req.CheckLease(); err != nil {
			return nil, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
		}
	}
	out := make([]claim.Result, len(reqs))
	var contested []int
	for i, req := range reqs {
		cur, now, err := b.readRun(ctx, b.db, req.Job, req.Slot)
		if err != nil {
			return nil, fmt.Errorf("claim %s@%d: read: %w", req.Job, req.Slot, err)
		}
		if claim.Contested(cur, now, req.Token) {
			contested = append(contested, i)
			continue
		}
		out[i] = claim.Decide(cur, false, now, req).Result
	}
	if len(contested) == 0 {
		return out, nil
	}
	batch := make([]claim.Request, len(contested))
	for k, i := range contested {
		batch[k] = reqs[i]
	}
	res, err := b.claimAllLocked(ctx, batch)
	if err != nil {
		return nil, fmt.Errorf("claim a batch of %d: %w", len(batch), err)
	}
	for k, i := range contested {
		out[i] = res[k]
	}
	return out, nil
}

// claimAllLocked decides reqs in order in one write transaction.
func (b *Backend) claimAllLocked(ctx context.Context, reqs []claim.Request) ([]claim.Result, error) {
	if err := b.lockWrite(ctx); err != nil {
		return nil, err
	}
	defer b.unlockWrite()
	tx, err := b.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	out := make([]claim.Result, len(reqs))
	var logged []claim.Decision
	wrote := false
	for i, req := range reqs {
		d, err := b.decideIn(ctx, tx, req)
		if err != nil {
			if len(reqs) > 1 {
				err = fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
			}
			return nil, err
		}
		out[i] = d.Result
		if d.Write != nil {
			wrote = true
			if d.Event != claim.EventClaimed {
				logged = append(logged, d)
			}
		}
	}
	if !wrote {
		return out, nil // rolled back: nothing was written
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	for _, d := range logged {
		w := d.Write
		b.log.Debug("claim decision", zap.String("event", string(d.Event)),
			zap.String("job", w.Job), zap.Int64("slot", w.Slot), zap.Int("attempt", w.Attempt),
			zap.String("instance", w.Instance), zap.String("token", w.Token.Short()))
	}
	return out, nil
}

// decideIn reads the run under the write lock, decides, and writes the
// decision's run and history event in tx.
func (b *Backend) decideIn(ctx context.Context, tx *sql.Tx, req claim.Request) (claim.Decision, error) {
	cur, now, err := b.readRun(ctx, tx, req.Job, req.Slot)
	if err != nil {
		return claim.Decision{}, fmt.Errorf("read under lock: %w", err)
	}
	// The overlap question is asked only where the table looks at it.
	otherLive := false
	if req.Overlap.Exclusive() && claim.Contested(cur, now, req.Token) {
		if err := tx.QueryRowContext(ctx, otherLiveSQL, req.Job, ms(now), req.Slot).Scan(&otherLive); err != nil {
			return claim.Decision{}, fmt.Errorf("overlap check: %w", err)
		}
	}
	d := claim.Decide(cur, otherLive, now, req)
	if d.Write == nil {
		return d, nil
	}
	w := d.Write
	if _, err := tx.ExecContext(ctx, upsertRunSQL, w.Job, w.Slot, string(w.Status), w.Attempt,
		w.Instance, string(w.Token), ms(w.StartedAt), nullMs(w.FinishedAt), ms(w.LeaseUntil),
		nullInt(w.ExitCode), w.OutputTail); err != nil {
		return claim.Decision{}, fmt.Errorf("write run: %w", err)
	}
	if _, err := tx.ExecContext(ctx, insertHistorySQL, w.Job, w.Slot, w.Attempt,
		string(w.Token), w.Instance, string(d.Event), ms(now)); err != nil {
		return claim.Decision{}, fmt.Errorf("append history: %w", err)
	}
	return d, nil
}

// querier is *sql.DB or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readRun returns the run (nil when there is none) and store now.
func (b *Backend) readRun(ctx context.Context, q querier, job string, slot int64) (*claim.Run, time.Time, error) {
	var (
		now int64
		row sqlclaim.RunRow
	)
	if err := q.QueryRowContext(ctx, selectRunSQL, job, slot).Scan(row.Dest(&now)...); err != nil {
		return nil, time.Time{}, err
	}
	return row.Run(), fromMs(now), nil
}

// Read is the cheap read of a run: one plain SELECT, no transaction. It
// returns store now also with claim.ErrNotFound.
func (b *Backend) Read(ctx context.Context, job string, slot int64) (claim.Run, time.Time, error) {
	r, now, err := b.readRun(ctx, b.db, job, slot)
	return sqlclaim.ReadAnswer(job, slot, r, now, err, nil)
}

// Renew extends f's lease to store now + lease, only while f's token owns
// the run and it is running; otherwise claim.ErrFenced (claim.ErrRunLost
// when the file no longer holds f's claim: restored from an older copy).
func (b *Backend) Renew(ctx context.Context, f claim.Fence, lease time.Duration) (claim.Result, error) {
	if lease < time.Millisecond {
		return claim.Result{}, fmt.Errorf("renew %s: lease %v is shorter than 1ms", f, lease)
	}
	if err := b.lockWrite(ctx); err != nil {
		return claim.Result{}, fmt.Errorf("renew %s: %w", f, err)
	}
	var attempt int
	var now, until int64
	err := b.db.QueryRowContext(ctx, renewSQL, f.Job, f.Slot, lease.Milliseconds(), string(f.Token)).
		Scan(&attempt, &now, &until)
	b.unlockWrite()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return claim.Result{}, fmt.Errorf("renew %s: %w", f, claim.Fenced(ctx, b.Read, f))
	case err != nil:
		return claim.Result{}, fmt.Errorf("renew %s: %w", f, err)
	}
	return claim.Result{Outcome: claim.Won, Attempt: attempt, StoreNow: fromMs(now), LeaseUntil: fromMs(until)}, nil
}

// Finish records the result of f's attempt with store-time finished_at,
// only while f's token owns the run and it is running; otherwise
// claim.ErrFenced. fin.StartedAt and fin.FinishedAt are not used: the run
// keeps the store's stamps.
func (b *Backend) Finish(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	if !fin.Status.Final() {
		return fmt.Errorf("finish %s: status %q is not a final status", f, fin.Status)
	}
	var exit any = fin.ExitCode
	if fin.Status == claim.StatusInterrupted {
		exit = nil
	}
	err := b.fencedWrite(ctx, f, claim.EventFinished, finishSQL,
		f.Job, f.Slot, string(fin.Status), exit, fin.OutputTail, string(f.Token))
	if errors.Is(err, claim.ErrFenced) {
		err = b.fenced(ctx, f, fin)
	}
	if err != nil {
		return fmt.Errorf("finish %s: %w", f, err)
	}
	return nil
}

// Release ends f's lease now, so that a backup's claim takes over at once
// (attempt+1); claim.ErrFenced when f no longer owns a running run.
func (b *Backend) Release(ctx context.Context, f claim.Fence) error {
	err := b.fencedWrite(ctx, f, claim.EventReleased, releaseSQL, f.Job, f.Slot, string(f.Token))
	if errors.Is(err, claim.ErrFenced) {
		err = claim.Fenced(ctx, b.Read, f)
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", f, err)
	}
	return nil
}

// fenced says why a Finish of fin by f wrote nothing: nil when the run
// already holds that result from f's token (claim.Recorded: an earlier
// copy was stored), else claim.ErrRunLost or claim.ErrFenced
// (claim.FencedBy).
func (b *Backend) fenced(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	r, _, err := b.Read(ctx, f.Job, f.Slot)
	switch {
	case errors.Is(err, claim.ErrNotFound):
		return claim.ErrRunLost
	case err != nil:
		return claim.ErrFenced
	case claim.Recorded(f, fin, &r):
		return nil
	}
	return claim.FencedBy(f, &r)
}

// fencedWrite runs an UPDATE ... RETURNING attempt, instance, at (fenced by
// token and status in its WHERE) and appends ev to the history, in one
// transaction; no row means claim.ErrFenced.
func (b *Backend) fencedWrite(ctx context.Context, f claim.Fence, ev claim.Event, query string, args ...any) error {
	if err := b.lockWrite(ctx); err != nil {
		return err
	}
	defer b.unlockWrite()
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	var attempt int
	var instance string
	var at int64
	err = tx.QueryRowContext(ctx, query, args...).Scan(&attempt, &instance, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return claim.ErrFenced
	case err != nil:
		return err
	}
	if _, err := tx.ExecContext(ctx, insertHistorySQL, f.Job, f.Slot, attempt,
		string(f.Token), instance, string(ev), at); err != nil {
		return fmt.Errorf("append history: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// listSQL is the query and arguments of ListRuns for q, with limit.
func listSQL(q claim.ListQuery, limit int) (string, []any) {
	var where []string
	var args []any
	if q.Job != "" {
		where = append(where, listJobSQL)
		args = append(args, q.Job)
	}
	if len(q.Statuses) > 0 {
		where = append(where, listStatusSQL+strings.Repeat(", ?", len(q.Statuses)-1)+")")
		for _, st := range q.Statuses {
			args = append(args, string(st))
		}
	}
	query := listRunsSQL
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	return query + listOrderSQL, append(args, limit)
}

// ListRuns returns recent runs and notes, newest slot first (then by
// job), of q.Job (all when empty) and in one of q.Statuses (all when
// empty), at most q.Limit (default 50).
func (b *Backend) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	query, args := listSQL(q, limit)
	out, err := queryAll(ctx, b.db, sqlclaim.ScanRun, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// queryAll runs query and reads each row it returns with scan.
func queryAll[T any](ctx context.Context, db *sql.DB, scan func(sqlclaim.Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Record stores n as the run (n.Job, n.Slot), finished at store now, unless
// the file already has a run or a note of the slot; it reports whether it
// wrote. One INSERT ... ON CONFLICT DO NOTHING: a claim's transaction holds
// the write lock from its read to its commit, so the two never interleave.
func (b *Backend) Record(ctx context.Context, n claim.Note) (bool, error) {
	if err := n.Check(); err != nil {
		return false, fmt.Errorf("record: %w", err)
	}
	if err := b.lockWrite(ctx); err != nil {
		return false, fmt.Errorf("record %s@%d: %w", n.Job, n.Slot, err)
	}
	defer b.unlockWrite()
	res, err := b.db.ExecContext(ctx, recordSQL, n.Job, n.Slot, string(n.Status), n.Instance, n.Reason, n.HeldBy)
	if err != nil {
		return false, fmt.Errorf("record %s@%d: %w", n.Job, n.Slot, err)
	}
	rows, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record %s@%d: rows written: %w", n.Job, n.Slot, err)
	}
	return rows == 1, nil
}

// Prune deletes the runs and notes whose slot is older than store now -
// olderThan and that are finished (every note is) or whose lease ended
// before that cutoff, with their history; a run with a live lease is never deleted. olderThan must exceed
// every job's maxLate: a pruned slot that is not yet late would be won
// again.
func (b *Backend) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("prune: negative age %v", olderThan)
	}
	if err := b.lockWrite(ctx); err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	defer b.unlockWrite()
	n, err := b.prune(ctx, olderThan)
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	if n > 0 {
		b.log.Debug("pruned runs", zap.Int64("runs", n), zap.Duration("older_than", olderThan))
	}
	return n, nil
}

// beginAt begins a transaction and reads the store's time in it (ms).
func (b *Backend) beginAt(ctx context.Context) (*sql.Tx, int64, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("begin: %w", err)
	}
	var now int64
	if err := tx.QueryRowContext(ctx, selectNowSQL).Scan(&now); err != nil {
		tx.Rollback()
		return nil, 0, fmt.Errorf("read store time: %w", err)
	}
	return tx, now, nil
}

func (b *Backend) prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	tx, now, err := b.beginAt(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, pruneRunsSQL, now-olderThan.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("delete runs: %w", err)
	}
	type key struct {
		job  string
		slot int64
	}
	var gone []key
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.job, &k.slot); err != nil {
			rows.Close()
			return 0, fmt.Errorf("delete runs: %w", err)
		}
		gone = append(gone, k)
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("delete runs: %w", err)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("delete runs: %w", err)
	}
	for _, k := range gone {
		if _, err := tx.ExecContext(ctx, pruneHistorySQL, k.job, k.slot); err != nil {
			return 0, fmt.Errorf("delete history of %s@%d: %w", k.job, k.slot, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return int64(len(gone)), nil
}

// IsBusy reports whether err is SQLite's "database is locked" or "database
// table is locked": the write lock was not free within the busy timeout.
// It is transient: the claim may be re-sent with the same token.
func IsBusy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

func nullMs(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func nullInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
