// Package sqlclaim is what the two SQL lease backends, pgclaim and
// sqliteclaim, share: how the rows of runs and control records read back,
// Read's answer, the upsert of an instance record, and the check that no
// released migration has changed. Each backend keeps its own schema and
// statements; these parts are written alike in both dialects.
package sqlclaim

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// RunRow receives the columns of a run in the order both backends select
// them (job, slot, status, attempt, instance, token, started_at,
// finished_at, lease_until, exit_code, output_tail, reason, held_by).
// Times are integer milliseconds since the Unix epoch; nil is NULL, which
// every column is in the row of an outer join that found no run.
type RunRow struct {
	job, status, instance, token, tail, reason                *string
	slot, attempt, started, finished, until, exitCode, heldBy *int64
}

// Dest returns the scan destinations: first, then the run's columns.
func (w *RunRow) Dest(first ...any) []any {
	return append(first, &w.job, &w.slot, &w.status, &w.attempt, &w.instance, &w.token,
		&w.started, &w.finished, &w.until, &w.exitCode, &w.tail, &w.reason, &w.heldBy)
}

// Run returns the run read, nil when the row had none. A note has the
// zero start and lease of a slot no attempt ran (the row holds 0 in those
// NOT NULL columns).
func (w *RunRow) Run() *claim.Run {
	if w.status == nil {
		return nil
	}
	r := &claim.Run{
		Job: *w.job, Slot: *w.slot, Status: claim.Status(*w.status), Attempt: int(*w.attempt),
		Instance: *w.instance, Token: claim.Token(*w.token),
		StartedAt: fromMs(*w.started), LeaseUntil: fromMs(*w.until),
		OutputTail: *w.tail, Reason: *w.reason, HeldBy: *w.heldBy,
	}
	if w.finished != nil {
		r.FinishedAt = fromMs(*w.finished)
	}
	if w.exitCode != nil {
		c := int(*w.exitCode)
		r.ExitCode = &c
	}
	if r.Status.Noted() {
		r.StartedAt, r.LeaseUntil = time.Time{}, time.Time{}
	}
	return r
}

// fromMs is a store's millisecond time, in UTC.
func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

// Scanner is a row to read: pgx's rows and *sql.Row or *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

// ScanRun reads a row of a run's columns (see RunRow).
func ScanRun(s Scanner) (claim.Run, error) {
	var w RunRow
	if err := s.Scan(w.Dest()...); err != nil {
		return claim.Run{}, err
	}
	return *w.Run(), nil
}

// ReadAnswer is Leaser.Read's answer from a read of (job, slot) that found
// r (nil: no run) at store now, or failed with err, which wrap (when not
// nil) decorates: claim.ErrNotFound, with store now, when there is no run.
func ReadAnswer(job string, slot int64, r *claim.Run, now time.Time, err error, wrap func(error) error) (claim.Run, time.Time, error) {
	switch {
	case err != nil:
		err = fmt.Errorf("read %s@%d: %w", job, slot, err)
		if wrap != nil {
			err = wrap(err)
		}
		return claim.Run{}, time.Time{}, err
	case r == nil:
		return claim.Run{}, now, fmt.Errorf("read %s@%d: %w", job, slot, claim.ErrNotFound)
	}
	return *r, now, nil
}

// ControlColumns are the columns of a control record, as ScanControl
// reads them.
const ControlColumns = `job, version, paused, until_ms, reason, set_by, set_at, triggers`

// ScanControl reads a row of ControlColumns.
func ScanControl(s Scanner) (claim.Control, error) {
	var (
		c    claim.Control
		trig string
	)
	if err := s.Scan(&c.Job, &c.Version, &c.Paused, &c.Until, &c.Reason, &c.By, &c.At, &trig); err != nil {
		return c, err
	}
	var err error
	c.Triggers, err = claim.DecodeTriggers(trig)
	return c, err
}

// InstanceColumns are the columns of an instance record.
const InstanceColumns = `name, host, pid, version, tags, started_at, last_seen, expires_at, retain_ms, skew_ms, jobs, jobs_hash`

// UpsertInstance ends a beat's INSERT of an instance record: the record
// replaces the one of the same name, and the statement returns it.
const UpsertInstance = `ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid,
			version = excluded.version, tags = excluded.tags, started_at = excluded.started_at,
			last_seen = excluded.last_seen, expires_at = excluded.expires_at,
			retain_ms = excluded.retain_ms, skew_ms = excluded.skew_ms,
			jobs = excluded.jobs, jobs_hash = excluded.jobs_hash
		RETURNING ` + InstanceColumns

// ChangedMigrations compares a backend's migrations with the sha256 (hex)
// of each released one and returns one line per released migration whose
// text has changed. A released migration is applied once to a store, so
// an edit, whichever shared constant it comes from, would never reach the
// stores already past it; a new migration appends its hash.
func ChangedMigrations(migrations, released []string) []string {
	if len(migrations) < len(released) {
		return []string{fmt.Sprintf("%d migrations, %d released", len(migrations), len(released))}
	}
	var changed []string
	for i, want := range released {
		if got := fmt.Sprintf("%x", sha256.Sum256([]byte(migrations[i]))); got != want {
			changed = append(changed, fmt.Sprintf("migration %d changed: sha256 %s, released %s", i+1, got, want))
		}
	}
	return changed
}
