package rabbitclaim

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The gate of a run is declared ahead of its slot (claim.Preparer): the
// declare of a durable queue is most of a claim's cost (the broker creates
// the queue's process and records it), and a claim of a gate declared
// ahead only publishes. A gate declared ahead that is gone at the claim
// (expired, deleted) returns the publish, which stored the claim nowhere:
// the claim then declares the gate and publishes again. So the decision is
// the same with or without the preparation.

// maxPrepareLead bounds how early a gate is declared. x-expires runs from
// the declare (publishing does not reset it): a gate declared ahead is
// kept that much less after its slot, so the lead is also at most a
// twentieth of slotTtlMs, far inside the half that maxLateMs may not
// exceed.
const maxPrepareLead = time.Second

// PrepareLead is how long before its slot a gate is declared.
func (b *Backend) PrepareLead() time.Duration { return min(maxPrepareLead, b.o.SlotTTL/20) }

// Prepare declares the gate of (job, slot), so that the claims of this
// Backend only publish to it.
func (b *Backend) Prepare(ctx context.Context, job string, slot int64) error {
	queue := GateQueue(b.o.Namespace, job, slot)
	s, err := b.current()
	if err != nil {
		return fmt.Errorf("prepare %s@%d: %w", job, slot, err)
	}
	gc, err := b.get(ctx, s)
	if err != nil {
		return fmt.Errorf("prepare %s@%d: open a channel: %w", job, slot, b.scrub(err))
	}
	handedOff, err := b.declareGate(ctx, s, gc, queue)
	switch {
	case err == nil:
		b.put(s, gc)
	case !handedOff:
		b.closeChannel(s, gc.ch, "close a gate channel")
	}
	if err != nil {
		return fmt.Errorf("prepare %s@%d: %w", job, slot, err)
	}
	b.prepared.add(queue, b.clock.Now())
	return nil
}

// maxPrepared bounds the gates remembered; beyond it the old ones are
// forgotten (their claims declare again).
const maxPrepared = 4096

// preparedGates are the gates this Backend declared ahead, each with when.
type preparedGates struct {
	maxAge time.Duration // older: the claim declares again (renewing x-expires)
	mu     sync.Mutex
	at     map[string]time.Time
}

func newPreparedGates(maxAge time.Duration) *preparedGates {
	return &preparedGates{maxAge: maxAge, at: map[string]time.Time{}}
}

func (p *preparedGates) add(queue string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.at) >= maxPrepared {
		for q, at := range p.at {
			if now.Sub(at) > p.maxAge {
				delete(p.at, q)
			}
		}
		if len(p.at) >= maxPrepared {
			clear(p.at)
		}
	}
	p.at[queue] = now
}

// take reports whether queue was declared ahead within maxAge, and
// forgets it: one claim per instance uses a preparation.
func (p *preparedGates) take(queue string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.at[queue]
	delete(p.at, queue)
	return ok && now.Sub(at) <= p.maxAge
}
