package redisclaim

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

var (
	//go:embed lua/lease_keep.lua
	leaseKeepLua string

	leaseKeep = redis.NewScript(leasePreludeLua + leaseKeepLua)

	_ claim.CountPruner = (*Backend)(nil)
)

// PruneKeep deletes job's runs and notes beyond its keep newest slots whose
// slot is older than store now - olderThan and that are not running, in
// batches of pruneBatch (lua/lease_keep.lua).
func (b *Backend) PruneKeep(ctx context.Context, job string, keep int, olderThan time.Duration) (int64, error) {
	if err := claim.CheckKeep(job, keep, olderThan); err != nil {
		return 0, err
	}
	if err := checkJob(job); err != nil {
		return 0, fmt.Errorf("prune keep: %w", err)
	}
	k := b.keys(job)
	keys := []string{k.state, k.slots, k.live, k.notes}
	var total int64
	for {
		v, err := leaseKeep.Run(ctx, b.c, keys, keep, olderThan.Milliseconds(), pruneBatch).Slice()
		if err != nil {
			return total, fmt.Errorf("prune keep %s: %w", job, err)
		}
		nums, err := int64s(v)
		if err != nil || len(nums) != 2 {
			return total, fmt.Errorf("prune keep %s: unexpected script reply %v", job, v)
		}
		total += nums[0]
		if nums[1] == 0 {
			break
		}
	}
	if total > 0 {
		b.log.Debug("pruned runs beyond keepRuns", zap.String("job", job), zap.Int64("runs", total), zap.Int("keep", keep))
	}
	return total, nil
}
