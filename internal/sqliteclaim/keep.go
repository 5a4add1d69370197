package sqliteclaim

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

var _ claim.CountPruner = (*Backend)(nil)

// SQL of keepRuns (claim.CountPruner).
const (
	// pruneKeepSQL deletes the runs and notes of job ?1 older than its
	// ?2-th newest slot (the primary key (job, slot), read backwards) and
	// than the cutoff ?3, unless running. With fewer than ?2 slots the
	// subquery is NULL and nothing goes.
	pruneKeepSQL = `DELETE FROM runs
		WHERE job = ?1 AND slot < ?3 AND status <> 'running'
		AND slot < (SELECT slot FROM runs WHERE job = ?1 ORDER BY slot DESC LIMIT 1 OFFSET ?2 - 1)
		RETURNING slot`
	pruneKeepHistorySQL = `DELETE FROM run_history WHERE job = ?1 AND slot < ?2 AND NOT EXISTS
		(SELECT 1 FROM runs r WHERE r.job = ?1 AND r.slot = run_history.slot)`
)

// PruneKeep deletes job's runs and notes beyond its keep newest slots whose
// slot is older than store now - olderThan and that are not running, with
// their history, in one write transaction.
func (b *Backend) PruneKeep(ctx context.Context, job string, keep int, olderThan time.Duration) (int64, error) {
	if err := claim.CheckKeep(job, keep, olderThan); err != nil {
		return 0, err
	}
	if err := b.lockWrite(ctx); err != nil {
		return 0, fmt.Errorf("prune keep %s: %w", job, err)
	}
	defer b.unlockWrite()
	n, err := b.pruneKeep(ctx, job, keep, olderThan)
	if err != nil {
		return 0, fmt.Errorf("prune keep %s: %w", job, err)
	}
	if n > 0 {
		b.log.Debug("pruned runs beyond keepRuns", zap.String("job", job), zap.Int64("runs", n), zap.Int("keep", keep))
	}
	return n, nil
}

func (b *Backend) pruneKeep(ctx context.Context, job string, keep int, olderThan time.Duration) (int64, error) {
	tx, now, err := b.beginAt(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, pruneKeepSQL, job, keep, now-olderThan.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("delete runs: %w", err)
	}
	var n, newest int64
	for rows.Next() {
		var slot int64
		if err := rows.Scan(&slot); err != nil {
			rows.Close()
			return 0, fmt.Errorf("delete runs: %w", err)
		}
		n, newest = n+1, max(newest, slot)
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("delete runs: %w", err)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("delete runs: %w", err)
	}
	if n == 0 {
		return 0, nil // rolled back: nothing was written
	}
	if _, err := tx.ExecContext(ctx, pruneKeepHistorySQL, job, newest+1); err != nil {
		return 0, fmt.Errorf("delete history: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return n, nil
}
