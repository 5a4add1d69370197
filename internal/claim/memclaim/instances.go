package memclaim

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// Beat stores inst's record at the injected clock's time (milliseconds,
// as the stores keep it), and prunes the records past their retention.
func (b *Backend) Beat(ctx context.Context, inst claim.Instance, ttl time.Duration) (claim.Instance, error) {
	if err := b.lock(ctx, inst.Check()); err != nil {
		return claim.Instance{}, err
	}
	defer b.mu.Unlock()
	now := b.clock.Now().Truncate(time.Millisecond).UTC()
	if !inst.LastSeen.IsZero() {
		inst.SkewMs = inst.LastSeen.Sub(now).Milliseconds()
	}
	inst.LastSeen, inst.ExpiresAt = now, now.Add(ttl)
	inst.StartedAt = inst.StartedAt.Truncate(time.Millisecond).UTC()
	inst.Tags, inst.Jobs = slices.Clone(inst.Tags), maps.Clone(inst.Jobs)
	if b.instances == nil {
		b.instances = map[string]claim.Instance{}
	}
	b.instances[inst.Name] = inst
	for name, i := range b.instances {
		if i.Gone(now) {
			delete(b.instances, name)
		}
	}
	return inst, nil
}

// Instances returns a copy of every record within its retention, and the
// clock's time.
func (b *Backend) Instances(ctx context.Context) ([]claim.Instance, time.Time, error) {
	if err := b.lock(ctx, nil); err != nil {
		return nil, time.Time{}, err
	}
	defer b.mu.Unlock()
	now := b.clock.Now().Truncate(time.Millisecond).UTC()
	out := make([]claim.Instance, 0, len(b.instances))
	for _, i := range b.instances {
		if !i.Gone(now) {
			i.Tags, i.Jobs = slices.Clone(i.Tags), maps.Clone(i.Jobs)
			out = append(out, i)
		}
	}
	return out, now, nil
}
