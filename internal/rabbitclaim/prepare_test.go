package rabbitclaim_test

import (
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
)

// prepared opens a backend on a namespace of its own that counts its
// declares, and prepares the claim r of job, due in a second: one declare.
func prepared(t *testing.T, job string) (u string, n *testNS, b *rabbitclaim.Backend, declares *atomic.Int32, r claim.Request) {
	t.Helper()
	u = brokerURL(t)
	n = newNS(t, u)
	b = n.open(t)
	declares = new(atomic.Int32)
	rabbitclaim.SetHooks(b, func(q string) { declares.Add(1); n.declared(q) }, nil)
	r = request(job, time.Now().Add(time.Second))
	if err := b.Prepare(t.Context(), r.Job, r.Slot); err != nil {
		t.Fatal(err)
	}
	if got := declares.Load(); got != 1 {
		t.Fatalf("Prepare declared %d gates, want 1", got)
	}
	wantMessages(t, u, rabbitclaim.GateQueue(n.name, r.Job, r.Slot), 0, "the gate after its preparation (the primer dropped at once)")
	return u, n, b, declares, r
}

// wantMessages asserts that queue holds want messages.
func wantMessages(t *testing.T, u, queue string, want int, what string) {
	t.Helper()
	q, err := inspect(t, u, queue)
	if err != nil || q.Messages != want {
		t.Fatalf("%s: %+v %v, want %d message(s)", what, q, err, want)
	}
}

// TestPrepareSendsPrimer: Prepare publishes into the gate a persistent
// primer with a per-message TTL of 0. The broker hands such a message to a
// consumer when the queue has one, and drops it otherwise: a consumer on
// the gate (never there in production) shows the primer, and the gate is
// empty without it, so the next claim wins.
func TestPrepareSendsPrimer(t *testing.T) {
	u, n, b, _, r := prepared(t, "primer")
	queue := rabbitclaim.GateQueue(n.name, r.Job, r.Slot)
	ch := adminChannel(t, u)
	deliveries, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume the gate: %v", err)
	}
	if err := b.Prepare(t.Context(), r.Job, r.Slot); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-deliveries:
		if d.Type != "primer" || d.Expiration != "0" || d.DeliveryMode != amqp.Persistent || len(d.Body) != 0 {
			t.Fatalf("the preparation's message: type %q, expiration %q, delivery mode %d, body %q; want a persistent empty primer with expiration 0",
				d.Type, d.Expiration, d.DeliveryMode, d.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no primer reached the gate's consumer within 10s of Prepare")
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	wantMessages(t, u, queue, 0, "the gate after its primer")
	wantOutcome(t, mustClaim(t, b, r), claim.Won, "the claim of a primed gate")
}

// TestPrepareAfterWin: preparing a gate that holds the winner's claim
// again (an instance whose clock runs late) leaves the claim in it: the
// primer is rejected like any claim, and the next claim still loses.
func TestPrepareAfterWin(t *testing.T) {
	u, n, b, _, r := prepared(t, "afterwin")
	queue := rabbitclaim.GateQueue(n.name, r.Job, r.Slot)
	wantOutcome(t, mustClaim(t, b, r), claim.Won, "the claim of a prepared gate")
	late := n.open(t)
	if err := late.Prepare(t.Context(), r.Job, r.Slot); err != nil {
		t.Fatalf("prepare a gate that holds a claim: %v", err)
	}
	wantMessages(t, u, queue, 1, "the gate prepared again after its claim")
	wantOutcome(t, mustClaim(t, late, other(r)), claim.Lost, "another instance's claim after its preparation")
}

// TestPreparedClaimOnlyPublishes: after Prepare declared the gate, the
// claims of the instance publish without declaring it again, and decide
// as usual: won, then lost for another instance's claim.
func TestPreparedClaimOnlyPublishes(t *testing.T) {
	u, n, b, declares, r := prepared(t, "prepared")
	wantOutcome(t, mustClaim(t, b, r), claim.Won, "the claim of a prepared gate")
	if got := declares.Load(); got != 1 {
		t.Fatalf("%d declares after the claim, want 1 (the preparation's): the claim of a prepared gate declared it again", got)
	}
	wantMessages(t, u, rabbitclaim.GateQueue(n.name, r.Job, r.Slot), 1, "the gate after the won claim")
	wantOutcome(t, mustClaim(t, b, other(r)), claim.Lost, "another instance's claim (declares: unprepared)")
}

// TestPreparedGateGone: a gate declared ahead and deleted before the claim
// (expired, or deleted by an operator) returns the claim's publish; the
// claim declares the gate and publishes again, and wins.
func TestPreparedGateGone(t *testing.T) {
	u, n, b, declares, r := prepared(t, "gone")
	queue := rabbitclaim.GateQueue(n.name, r.Job, r.Slot)
	if _, err := adminChannel(t, u).QueueDelete(queue, false, false, false); err != nil {
		t.Fatalf("delete the prepared gate: %v", err)
	}
	wantOutcome(t, mustClaim(t, b, r), claim.Won, "the claim of a prepared gate deleted since")
	if got := declares.Load(); got != 2 {
		t.Fatalf("%d declares, want 2: the preparation's and the claim's after its publish was returned", got)
	}
	wantMessages(t, u, queue, 1, "the gate after the won claim")
	wantOutcome(t, mustClaim(t, b, other(r)), claim.Lost, "another instance's claim")
}

// TestPrepareLead: a second before the slot, or a twentieth of slotTtlMs
// when that is shorter (the gate's x-expires runs from its declare).
func TestPrepareLead(t *testing.T) {
	u := brokerURL(t)
	n := newNS(t, u)
	for _, tc := range []struct{ ttl, want time.Duration }{
		{time.Hour, time.Second},
		{10 * time.Second, 500 * time.Millisecond},
	} {
		b := n.open(t, func(o *rabbitclaim.Options) { o.SlotTTL = tc.ttl })
		if got := b.PrepareLead(); got != tc.want {
			t.Errorf("slotTtl %v: lead %v, want %v", tc.ttl, got, tc.want)
		}
	}
}
