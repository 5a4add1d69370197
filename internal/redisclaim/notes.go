package redisclaim

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
)

// What the strategies share to record notes (claim.Recorder: the outcome
// of a slot no attempt ran) and to list runs.

// runKey names one run (or note) of a listing.
type runKey struct {
	job  string
	slot int64
}

// checkNote refuses a note a strategy should not record: claim.Note.Check,
// a job name that would break the keys' hash tag, a slot (or held-by slot)
// outside minSlot..maxMs.
func checkNote(n claim.Note, minSlot int64) error {
	if err := n.Check(); err != nil {
		return err
	}
	if err := checkJob(n.Job); err != nil {
		return err
	}
	switch {
	case n.Slot < minSlot || n.Slot >= maxMs:
		return fmt.Errorf("slot %d is out of range", n.Slot)
	case n.HeldBy < 0 || n.HeldBy >= maxMs:
		return fmt.Errorf("held-by slot %d is out of range", n.HeldBy)
	}
	return nil
}

// listLimit is q's limit, or the default.
func listLimit(q claim.ListQuery) int {
	if q.Limit <= 0 {
		return defaultListLimit
	}
	return q.Limit
}

// listJobs is the jobs a listing reads: q's job, or every job in the
// index of jobs (jobsKey) whose name this package could have written.
func listJobs(ctx context.Context, c redis.UniversalClient, jobsKey string, q claim.ListQuery) ([]string, error) {
	if q.Job != "" {
		if err := checkJob(q.Job); err != nil {
			return nil, err
		}
		return []string{q.Job}, nil
	}
	jobs, err := c.SMembers(ctx, jobsKey).Result()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", jobsKey, err)
	}
	return slices.DeleteFunc(jobs, func(j string) bool { return checkJob(j) != nil }), nil
}
