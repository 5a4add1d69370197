package pgclaim

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sqlclaim"
)

// The jobs' control records (docs/spec.md#s6-control): the table
// <table>_control, one row per job (schema migration 6). A write is one
// statement that compares and sets the version: an INSERT that does
// nothing when the job has a row (the first record, previous version 0),
// or an UPDATE of the row at the previous version; under READ COMMITTED
// an UPDATE that waited for a concurrent one re-checks the version on the
// row it committed. Either changes no row when the version moved, and the
// write is refused as claim.ErrConflict. The table belongs to the runs
// table, as its namespace.

var _ claim.Controller = (*Backend)(nil)

// controlV6 is schema migration 6.
const controlV6 = `	CREATE TABLE {{control}} (
		job      text    PRIMARY KEY,
		version  bigint  NOT NULL CHECK (version >= 1),
		paused   boolean NOT NULL,
		until_ms bigint  NOT NULL DEFAULT 0,     -- ms since the Unix epoch; 0: until resumed
		reason   text    NOT NULL DEFAULT '',
		set_by   text    NOT NULL DEFAULT '',    -- user@host
		set_at   bigint  NOT NULL DEFAULT 0      -- ms, the writer's clock
	);
`

// controlV7 is schema migration 7: the record's triggers
// (docs/spec.md#s6-trigger), claim.EncodeTriggers's JSON text (” for
// none), written with the rest of the record.
const controlV7 = `	ALTER TABLE {{control}} ADD COLUMN triggers text NOT NULL DEFAULT '';
`

// SQL of the control records.
const (
	listControlSQL = `SELECT ` + sqlclaim.ControlColumns + ` FROM {{control}}`

	// insertControlSQL writes a job's first record.
	insertControlSQL = `INSERT INTO {{control}} AS c (` + sqlclaim.ControlColumns + `)
		VALUES ($1, 1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (job) DO NOTHING
		RETURNING ` + sqlclaim.ControlColumns

	// updateControlSQL writes a record over the one at version $8.
	updateControlSQL = `UPDATE {{control}} AS c SET version = c.version + 1, paused = $2, until_ms = $3,
		reason = $4, set_by = $5, set_at = $6, triggers = $7
		WHERE c.job = $1 AND c.version = $8
		RETURNING ` + sqlclaim.ControlColumns
)

// Controls returns every control record of the table.
func (b *Backend) Controls(ctx context.Context) ([]claim.Control, error) {
	return queryAll(ctx, b, "read control records", sqlclaim.ScanControl, b.names.expand(listControlSQL))
}

// SetControl writes c over the record at prevVersion in one statement.
func (b *Backend) SetControl(ctx context.Context, c claim.Control, prevVersion int64) (claim.Control, error) {
	if err := c.Check(); err != nil {
		return claim.Control{}, err
	}
	trig, err := claim.EncodeTriggers(c.Triggers)
	if err != nil {
		return claim.Control{}, fmt.Errorf("set control of %s: %w", c.Job, err)
	}
	args := []any{c.Job, c.Paused, c.Until, cleanText(c.Reason), cleanText(c.By), c.At, cleanText(trig)}
	query := insertControlSQL
	if prevVersion != 0 {
		query, args = updateControlSQL, append(args, prevVersion)
	}
	rows, err := b.pool.Query(ctx, b.names.expand(query), args...)
	if err != nil {
		return claim.Control{}, b.wrap(fmt.Errorf("set control of %s: %w", c.Job, err))
	}
	got, err := pgx.CollectExactlyOneRow(rows, rowTo(sqlclaim.ScanControl))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return claim.Control{}, fmt.Errorf("set control of %s at version %d: %w", c.Job, prevVersion, claim.ErrConflict)
	case err != nil:
		return claim.Control{}, b.wrap(fmt.Errorf("set control of %s: %w", c.Job, err))
	}
	return got, nil
}
