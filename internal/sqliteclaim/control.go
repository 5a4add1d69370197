package sqliteclaim

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sqlclaim"
)

// The jobs' control records (docs/spec.md#s6-control): the table control,
// one row per job (schema migration 3). A write is one statement that
// compares and sets the version: an INSERT that does nothing when the job
// has a row (the first record, previous version 0), or an UPDATE of the
// row at the previous version. Either changes no row when the version
// moved, and the write is refused as claim.ErrConflict. Like runs, the
// records are the file's: SQLite has no namespace.

var _ claim.Controller = (*Backend)(nil)

// controlV3 is schema migration 3.
const controlV3 = `CREATE TABLE control (
		job      TEXT    NOT NULL PRIMARY KEY,
		version  INTEGER NOT NULL,
		paused   INTEGER NOT NULL,               -- 1 paused, 0 not
		until_ms INTEGER NOT NULL DEFAULT 0,     -- ms since the Unix epoch; 0: until resumed
		reason   TEXT    NOT NULL DEFAULT '',
		set_by   TEXT    NOT NULL DEFAULT '',    -- user@host
		set_at   INTEGER NOT NULL DEFAULT 0      -- ms, the writer's clock
	);`

// controlV4 is schema migration 4: the record's triggers
// (docs/spec.md#s6-trigger), claim.EncodeTriggers's JSON text (” for
// none), written with the rest of the record.
const controlV4 = `ALTER TABLE control ADD COLUMN triggers TEXT NOT NULL DEFAULT '';`

// SQL of the control records.
const (
	listControlSQL = `SELECT ` + sqlclaim.ControlColumns + ` FROM control`

	// insertControlSQL writes a job's first record.
	insertControlSQL = `INSERT INTO control (` + sqlclaim.ControlColumns + `)
		VALUES (?1, 1, ?2, ?3, ?4, ?5, ?6, ?8)
		ON CONFLICT (job) DO NOTHING
		RETURNING ` + sqlclaim.ControlColumns

	// updateControlSQL writes a record over the one at version ?7.
	updateControlSQL = `UPDATE control SET version = version + 1, paused = ?2, until_ms = ?3,
		reason = ?4, set_by = ?5, set_at = ?6, triggers = ?8
		WHERE job = ?1 AND version = ?7
		RETURNING ` + sqlclaim.ControlColumns
)

// Controls returns every control record of the file.
func (b *Backend) Controls(ctx context.Context) ([]claim.Control, error) {
	out, err := queryAll(ctx, b.db, sqlclaim.ScanControl, listControlSQL)
	if err != nil {
		return nil, fmt.Errorf("read control records: %w", err)
	}
	return out, nil
}

// SetControl writes c over the record at prevVersion in one statement,
// under this process's write turn (SQLite's write lock orders the other
// processes).
func (b *Backend) SetControl(ctx context.Context, c claim.Control, prevVersion int64) (claim.Control, error) {
	if err := c.Check(); err != nil {
		return claim.Control{}, err
	}
	if err := b.lockWrite(ctx); err != nil {
		return claim.Control{}, fmt.Errorf("set control of %s: %w", c.Job, err)
	}
	defer b.unlockWrite()
	trig, err := claim.EncodeTriggers(c.Triggers)
	if err != nil {
		return claim.Control{}, fmt.Errorf("set control of %s: %w", c.Job, err)
	}
	args := []any{c.Job, c.Paused, c.Until, c.Reason, c.By, c.At, prevVersion, trig}
	query := insertControlSQL
	if prevVersion != 0 {
		query = updateControlSQL
	}
	got, err := sqlclaim.ScanControl(b.db.QueryRowContext(ctx, query, args...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return claim.Control{}, fmt.Errorf("set control of %s at version %d: %w", c.Job, prevVersion, claim.ErrConflict)
	case err != nil:
		return claim.Control{}, fmt.Errorf("set control of %s: %w", c.Job, err)
	}
	return got, nil
}
