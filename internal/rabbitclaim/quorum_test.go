package rabbitclaim_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestQuorumQueueIsNoGate records why gates are classic queues
// (docs/design.md, RabbitMQ gates): a quorum queue declared with the
// gate's arguments (x-max-length 1, x-overflow reject-publish) confirms a
// second publish made after the first was confirmed, so two claims of one
// run would both win. Should a broker version enforce the limit on quorum
// queues, this test fails: the decision is then worth revisiting.
func TestQuorumQueueIsNoGate(t *testing.T) {
	u := brokerURL(t)
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	q := fmt.Sprintf("anarchon-test-quorum-%08x", rand.Uint32())
	args := amqp.Table{"x-queue-type": "quorum", "x-max-length": int64(1), "x-overflow": "reject-publish", "x-expires": int64(60000)}
	if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
		t.Fatalf("declare a quorum queue with the gate's arguments: %v", err)
	}
	defer func() { _, _ = ch.QueueDelete(q, false, false, false) }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	acked := 0
	for i := range 3 {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, true, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: fmt.Appendf(nil, "claim %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			acked++
		}
	}
	t.Logf("a quorum queue with x-max-length 1 and reject-publish confirmed %d of 3 publishes made one after the other", acked)
	if acked < 2 {
		t.Errorf("the broker now confirms %d of 3 publishes to a quorum queue of x-max-length 1: "+
			"quorum gates may hold; revisit docs/design.md (RabbitMQ gates) and run the conformance suite with them", acked)
	}
}
