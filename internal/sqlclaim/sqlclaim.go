// Package sqlclaim is what the two SQL lease backends, pgclaim and
// sqliteclaim, share: how a run's row reads back as a claim.Run, and the
// upsert of an instance record. Each backend keeps its own schema and
// statements; these parts are written alike in both dialects.
package sqlclaim

import (
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
