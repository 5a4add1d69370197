package rabbitclaim

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The gate of a run is declared ahead of its slot (claim.Preparer): the
// declare of a durable queue is most of a claim's cost (the broker creates
// the queue's process and records it), and a claim of a gate declared
// ahead only publishes. A gate declared ahead that is gone at the claim
// (expired, deleted) returns the publish, which stored the claim nowhere:
// the claim then declares the gate and publishes again. So the decision is
// the same with or without the preparation.
//
// The preparation also primes the gate. The first persistent message of a
// fresh classic queue pays for the queue's files on disk: its confirm took
// about three times a later message's (3.1 ms against 1.0 ms, p50 here).
// Prepare pays it instead of the claim by publishing a primer: a
// persistent message with a per-message TTL of 0, which the broker drops
// within its enqueue (a message with expiration 0 "expires upon reaching a
// queue unless it can be delivered to a consumer immediately", and a gate
// has no consumer). The gate stays empty, and its first claim costs what a
// later message costs. A primer sent to a gate that already holds a claim
// is rejected like any claim (x-overflow reject-publish) and changes
// nothing. The broker stamps the primer's expiry and compares it with its
// system clock a few microseconds apart, within one enqueue: only a step
// of that clock backwards between the two would keep the primer in the
// gate, until the stamped expiry, and the claims sent meanwhile would lose
// to it (a missed run, never a second one).

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
	if err == nil {
		err = b.prime(ctx, gc, queue)
	}
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

// prime publishes the primer into queue on gc and waits for its confirm,
// bounded by ctx. An ack (the gate was empty: the primer was written and
// dropped) and a nack (the gate holds a claim already) both leave gc clean
// for the next claim; an error means gc must be closed (a late confirm
// must not answer the next claim).
func (b *Backend) prime(ctx context.Context, gc *gateChannel, queue string) error {
	msg := amqp.Publishing{
		DeliveryMode: amqp.Persistent,
		Expiration:   "0",
		MessageId:    "primer " + queue,
		Type:         "primer",
		AppId:        "anarchon",
	}
	dc, err := gc.ch.PublishWithDeferredConfirm("", queue, true, false, msg)
	if err != nil {
		return unavailable("publish the primer to %q: %v", queue, b.scrub(err))
	}
	select {
	case <-dc.Done():
	case <-ctx.Done():
		return fmt.Errorf("%w: no confirm of the primer sent to %q: %w", ErrUnavailable, queue, ctx.Err())
	}
	switch {
	case gc.drainReturns(msg.MessageId):
		return unavailable("the gate %q vanished after its declare (basic.return 312 NO_ROUTE)", queue)
	case gc.ch.IsClosed():
		return unavailable("the channel closed at the primer's confirm")
	}
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
