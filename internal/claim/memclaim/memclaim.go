// Package memclaim is an in-memory lease backend on an injected clock. It
// speeds up the scheduler's unit tests and passes the same conformance suite
// as the real stores; it never stands in for a store's proof, and the daemon
// cannot be configured to use it.
package memclaim

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

type key struct {
	job  string
	slot int64
}

// Backend keeps runs in a map guarded by one mutex; its store time is the
// injected clock.
type Backend struct {
	clock clock.Clock
	mu    sync.Mutex
	runs  map[key]*claim.Run
	// controls are the jobs' control records (control.go).
	controls map[string]claim.Control
	// controlErr, when set, fails Controls and SetControl (tests).
	controlErr error
	// instances are the instances' heartbeat records (instances.go).
	instances map[string]claim.Instance
}

var (
	_ claim.Backend     = (*Backend)(nil)
	_ claim.Leaser      = (*Backend)(nil)
	_ claim.Pruner      = (*Backend)(nil)
	_ claim.CountPruner = (*Backend)(nil)
	_ claim.Batcher     = (*Backend)(nil)
	_ claim.Recorder    = (*Backend)(nil)
	_ claim.Controller  = (*Backend)(nil)
	_ claim.Registry    = (*Backend)(nil)
)

// New returns an empty backend whose store time is c.
func New(c clock.Clock) *Backend {
	return &Backend{clock: c, runs: map[key]*claim.Run{}}
}

// otherLive reports whether a run of job other than slot holds a live lease.
func (b *Backend) otherLive(job string, slot int64, now time.Time) bool {
	for k, r := range b.runs {
		if k.job == job && k.slot != slot && r.Status == claim.StatusRunning && !r.LeaseUntil.Before(now) {
			return true
		}
	}
	return false
}

// lock locks b.mu for a call under ctx, unless check (the error of the
// record's Check; nil for none) or ctx refuses it. After a nil error the
// caller unlocks b.mu.
func (b *Backend) lock(ctx context.Context, check error) error {
	if check != nil {
		return check
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	return nil
}

// Claim applies claim.Decide under the mutex.
func (b *Backend) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	if err := b.lock(ctx, nil); err != nil {
		return claim.Result{}, err
	}
	defer b.mu.Unlock()
	return b.decide(req), nil
}

// decide applies claim.Decide to req and stores its write; b.mu must be
// held.
func (b *Backend) decide(req claim.Request) claim.Result {
	now := b.clock.Now()
	d := claim.Decide(b.runs[key{req.Job, req.Slot}], b.otherLive(req.Job, req.Slot, now), now, req)
	if d.Write != nil {
		b.runs[key{req.Job, req.Slot}] = d.Write
	}
	return d.Result
}

// ClaimBatch applies claim.Decide to each request in order, under the
// mutex: the whole batch is one atomic step, as one round trip would be.
func (b *Backend) ClaimBatch(ctx context.Context, reqs []claim.Request) ([]claim.Result, error) {
	if err := b.lock(ctx, nil); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	out := make([]claim.Result, len(reqs))
	for i, req := range reqs {
		out[i] = b.decide(req)
	}
	return out, nil
}

// owned returns the run f owns, or claim.ErrFenced (claim.ErrRunLost when
// the store no longer holds f's claim); b.mu must be held.
func (b *Backend) owned(f claim.Fence) (*claim.Run, error) {
	r := b.runs[key{f.Job, f.Slot}]
	if r == nil || r.Token != f.Token || r.Status != claim.StatusRunning {
		return nil, claim.FencedBy(f, r)
	}
	return r, nil
}

// Renew extends f's lease.
func (b *Backend) Renew(ctx context.Context, f claim.Fence, lease time.Duration) (claim.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.owned(f)
	if err != nil {
		return claim.Result{}, err
	}
	now := b.clock.Now()
	r.LeaseUntil = now.Add(lease)
	return claim.Result{Outcome: claim.Won, Attempt: r.Attempt, StoreNow: now, LeaseUntil: r.LeaseUntil}, nil
}

// Release ends f's lease now.
func (b *Backend) Release(ctx context.Context, f claim.Fence) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.owned(f)
	if err != nil {
		return err
	}
	// One millisecond before now: expired at once for the decision table,
	// which takes over only when lease_until < now.
	r.LeaseUntil = b.clock.Now().Add(-time.Millisecond)
	return nil
}

// Finish records f's result; the same Finish re-sent succeeds.
func (b *Backend) Finish(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if claim.Recorded(f, fin, b.runs[key{f.Job, f.Slot}]) {
		return nil
	}
	r, err := b.owned(f)
	if err != nil {
		return err
	}
	code := fin.ExitCode
	r.Status, r.ExitCode, r.OutputTail, r.FinishedAt = fin.Status, &code, fin.OutputTail, b.clock.Now()
	if r.FinishedAt.Before(r.StartedAt) {
		r.FinishedAt = r.StartedAt // claimed ahead, finished before its slot by store time
	}
	return nil
}

// Read returns a copy of the run.
func (b *Backend) Read(ctx context.Context, job string, slot int64) (claim.Run, time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	r := b.runs[key{job, slot}]
	if r == nil {
		return claim.Run{}, now, claim.ErrNotFound
	}
	return *r, now, nil
}

// ListRuns returns runs newest slot first.
func (b *Backend) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []claim.Run
	for _, r := range b.runs {
		if (q.Job == "" || r.Job == q.Job) && q.Wants(r.Status) {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b claim.Run) int {
		return cmp.Or(cmp.Compare(b.Slot, a.Slot), cmp.Compare(a.Job, b.Job))
	})
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	return out[:min(limit, len(out))], nil
}

// Prune deletes old runs that are finished or whose lease ended long ago.
func (b *Backend) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cut := b.clock.Now().Add(-olderThan)
	var n int64
	for k, r := range b.runs {
		if time.UnixMilli(k.slot).Before(cut) && (r.Status.Final() || r.LeaseUntil.Before(cut)) {
			delete(b.runs, k)
			n++
		}
	}
	return n, nil
}

// PruneKeep deletes job's runs and notes beyond its keep newest slots,
// older than now - olderThan and not running.
func (b *Backend) PruneKeep(ctx context.Context, job string, keep int, olderThan time.Duration) (int64, error) {
	if err := claim.CheckKeep(job, keep, olderThan); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var slots []int64
	for k := range b.runs {
		if k.job == job {
			slots = append(slots, k.slot)
		}
	}
	if len(slots) <= keep {
		return 0, nil
	}
	slices.Sort(slots)
	nth := slots[len(slots)-keep] // the oldest slot kept
	cut := b.clock.Now().Add(-olderThan)
	var n int64
	for _, slot := range slots {
		k := key{job, slot}
		if slot < nth && time.UnixMilli(slot).Before(cut) && b.runs[k].Status != claim.StatusRunning {
			delete(b.runs, k)
			n++
		}
	}
	return n, nil
}

// Record stores n unless the slot has a run, stamped with the store time.
func (b *Backend) Record(ctx context.Context, n claim.Note) (bool, error) {
	if err := n.Check(); err != nil {
		return false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := key{n.Job, n.Slot}
	if b.runs[k] != nil {
		return false, nil
	}
	n.At = b.clock.Now()
	r := n.Run()
	b.runs[k] = &r
	return true, nil
}

// Close does nothing.
func (b *Backend) Close() error { return nil }
