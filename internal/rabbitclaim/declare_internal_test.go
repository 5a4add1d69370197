package rabbitclaim

import (
	"errors"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestDeclareFailure: which failed declares of a gate are transient (the
// claim was not published and may be sent again) and which are refusals.
// The 404 cannot be provoked on demand on one node: RabbitMQ answers it to
// a declare racing another declare of the same new durable queue, rarely.
func TestDeclareFailure(t *testing.T) {
	b := &Backend{}
	for _, tc := range []struct {
		name                string
		err                 error
		transient, conflict bool
	}{
		{"404, no live queue for the durable record", &amqp.Error{Code: amqp.NotFound, Server: true,
			Reason: "NOT_FOUND - home node 'rabbit@localhost' of durable queue 'ns.j.slot.1' in vhost '/' is down or inaccessible"}, true, false},
		{"406, other arguments", &amqp.Error{Code: amqp.PreconditionFailed, Server: true,
			Reason: "PRECONDITION_FAILED - inequivalent arg 'x-expires' for queue 'ns.j.slot.1' in vhost '/': received '120000' but current is '60000'"}, false, true},
		{"403, access refused", &amqp.Error{Code: amqp.AccessRefused, Server: true,
			Reason: "ACCESS_REFUSED - access to queue 'ns.j.slot.1' in vhost '/' refused for user 'u'"}, false, false},
		{"connection closed", amqp.ErrClosed, true, false},
		{"no answer", errNoAnswer, true, false},
	} {
		err := b.declareFailure("ns.j.slot.1", tc.err)
		if got := IsTransient(err); got != tc.transient {
			t.Errorf("%s: transient %v, want %v (%v)", tc.name, got, tc.transient, err)
		}
		if got := errors.Is(err, ErrQueueConflict); got != tc.conflict {
			t.Errorf("%s: conflict %v, want %v (%v)", tc.name, got, tc.conflict, err)
		}
	}
}
