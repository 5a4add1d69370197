package memclaim

import (
	"context"
	"slices"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// Beat stores inst's record at the injected clock's time (milliseconds,
// as the stores keep it), and prunes the records past their retention.
func (b *Backend) Beat(ctx context.Context, inst claim.Instance, ttl time.Duration) (claim.Instance, error) {
	if err := inst.Check(); err != nil {
		return claim.Instance{}, err
	}
	if err := ctx.Err(); err != nil {
		return claim.Instance{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now().Truncate(time.Millisecond).UTC()
	if !inst.LastSeen.IsZero() {
		inst.SkewMs = inst.LastSeen.Sub(now).Milliseconds()
	}
	inst.LastSeen, inst.ExpiresAt = now, now.Add(ttl)
	inst.StartedAt = inst.StartedAt.Truncate(time.Millisecond).UTC()
	inst.Tags, inst.Jobs = slices.Clone(inst.Tags), cloneMap(inst.Jobs)
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
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now().Truncate(time.Millisecond).UTC()
	out := make([]claim.Instance, 0, len(b.instances))
	for _, i := range b.instances {
		if !i.Gone(now) {
			i.Tags, i.Jobs = slices.Clone(i.Tags), cloneMap(i.Jobs)
			out = append(out, i)
		}
	}
	return out, now, nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
