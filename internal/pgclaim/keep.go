package pgclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

var _ claim.CountPruner = (*Backend)(nil)

// pruneKeepSQL deletes the runs and notes of job $1 older than its $2-th
// newest slot (the primary key (job, slot), read backwards) and than store
// now - $3, unless running, and their history, in one statement; it
// returns how many runs it deleted. With fewer than $2 slots nth is NULL
// and nothing goes.
const pruneKeepSQL = `WITH c AS (SELECT {{now}} - $3::bigint AS cutoff,
			(SELECT r.slot FROM {{runs}} AS r WHERE r.job = $1 ORDER BY r.slot DESC OFFSET $2 - 1 LIMIT 1) AS nth),
		d AS (DELETE FROM {{runs}} AS r USING c
			WHERE r.job = $1 AND r.slot < c.nth AND r.slot < c.cutoff AND r.status <> 'running'
			RETURNING r.job, r.slot),
		h AS (DELETE FROM {{history}} AS h USING d WHERE h.job = d.job AND h.slot = d.slot)
		SELECT count(*) FROM d`

// PruneKeep deletes job's runs and notes beyond its keep newest slots whose
// slot is older than store now - olderThan and that are not running, with
// their history. It takes the prune lock, as Prune does, so that the
// instances' prunes do not contend for the same rows.
func (b *Backend) PruneKeep(ctx context.Context, job string, keep int, olderThan time.Duration) (int64, error) {
	if err := claim.CheckKeep(job, keep, olderThan); err != nil {
		return 0, err
	}
	var n int64
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockPruneSQL, b.names.lockKey("prune")); err != nil {
			return fmt.Errorf("take the prune lock: %w", err)
		}
		if err := tx.QueryRow(ctx, b.names.expand(pruneKeepSQL), job, keep, olderThan.Milliseconds()).Scan(&n); err != nil {
			return fmt.Errorf("delete runs: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, b.wrap(fmt.Errorf("prune keep %s: %w", job, err))
	}
	if n > 0 {
		b.log.Debug("pruned runs beyond keepRuns", zap.String("job", job), zap.Int64("runs", n), zap.Int("keep", keep))
	}
	return n, nil
}
