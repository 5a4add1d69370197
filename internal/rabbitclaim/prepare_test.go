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
	return u, n, b, declares, r
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
	q, err := inspect(t, u, rabbitclaim.GateQueue(n.name, r.Job, r.Slot))
	if err != nil || q.Messages != 1 {
		t.Fatalf("the gate after the won claim: %+v %v, want 1 message", q, err)
	}
	wantOutcome(t, mustClaim(t, b, other(r)), claim.Lost, "another instance's claim (declares: unprepared)")
}

// TestPreparedGateGone: a gate declared ahead and deleted before the claim
// (expired, or deleted by an operator) returns the claim's publish; the
// claim declares the gate and publishes again, and wins.
func TestPreparedGateGone(t *testing.T) {
	u, n, b, declares, r := prepared(t, "gone")
	queue := rabbitclaim.GateQueue(n.name, r.Job, r.Slot)
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(queue, false, false, false); err != nil {
		t.Fatalf("delete the prepared gate: %v", err)
	}
	wantOutcome(t, mustClaim(t, b, r), claim.Won, "the claim of a prepared gate deleted since")
	if got := declares.Load(); got != 2 {
		t.Fatalf("%d declares, want 2: the preparation's and the claim's after its publish was returned", got)
	}
	q, err := inspect(t, u, queue)
	if err != nil || q.Messages != 1 {
		t.Fatalf("the gate after the won claim: %+v %v, want 1 message", q, err)
	}
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
