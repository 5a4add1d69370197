package rabbitclaim

import (
	"context"
	"encoding/json"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/anarchon/anarchon/internal/claim"
)

// noteMessage is the body of a note in a gate. Nobody reads a gate; the
// body is for an operator who looks at one.
type noteMessage struct {
	Instance string       `json:"instance"`
	Job      string       `json:"job"`
	Slot     int64        `json:"slot"`
	Status   claim.Status `json:"status"`
	Reason   string       `json:"reason"`
}

// Record stores n, the outcome of a slot no attempt ran, as the slot's
// claim would be stored: published into the run's gate, which holds
// whichever of the claims and notes of the run reaches it first. An ack
// (the gate was empty: the note holds it, and every later claim is lost)
// writes the note's "noted" record to the history stream and waits for its
// confirm; a nack (a claim or an earlier note holds the gate) reports
// false. See the package doc ("Notes") for the answers that decide
// nothing. An error means the note may not hold the gate; Record may be
// called again.
func (b *Backend) Record(ctx context.Context, n claim.Note) (bool, error) {
	wrote, err := b.record(ctx, n)
	if err != nil {
		return wrote, fmt.Errorf("record %s of %s@%d: %w", n.Status, n.Job, n.Slot, err)
	}
	return wrote, nil
}

func (b *Backend) record(ctx context.Context, n claim.Note) (bool, error) {
	if err := n.Check(); err != nil {
		return false, err
	}
	if n.At.IsZero() {
		n.At = b.clock.Now()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultClaimTimeout)
		defer cancel()
	}
	body, err := json.Marshal(noteMessage{Instance: n.Instance, Job: n.Job, Slot: n.Slot, Status: n.Status, Reason: n.Reason})
	if err != nil {
		return false, err
	}
	queue := GateQueue(b.o.Namespace, n.Job, n.Slot)
	a, why, err := b.publishGate(ctx, queue, amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    "note " + string(claim.NewToken()),
		Type:         "note",
		AppId:        "anarchon",
		Body:         body,
	})
	if err != nil {
		return false, err
	}
	rec := record{Type: recordNoted, Job: n.Job, Slot: n.Slot, Instance: n.Instance,
		Status: n.Status, Reason: n.Reason, HeldBy: n.HeldBy, FinishedAt: n.At}
	switch a {
	case answerAck:
		if err := b.hist.write(ctx, rec); err != nil {
			return true, fmt.Errorf("the note holds the gate %q, its history record is not confirmed: %w", queue, err)
		}
		return true, nil
	case answerNack:
		if b.tokens.maybeHeld(n.Job, n.Slot) {
			// The gate may hold this Backend's claim that nobody runs:
			// status shows the note unless a run of the slot is recorded.
			if err := b.hist.write(ctx, rec); err != nil {
				return false, fmt.Errorf("write the history record of a note of a slot whose claim got no answer: %w", err)
			}
		}
		return false, nil
	case answerReturned:
		return false, unavailable("the gate %q vanished between its declare and the note's publish (basic.return 312 NO_ROUTE)", queue)
	}
	// Published, no answer: the note may hold the gate. Status shows it
	// unless a run (or an earlier note) of the slot is recorded.
	b.hist.enqueue(rec)
	return false, fmt.Errorf("the note may or may not hold the gate %q: %s", queue, why)
}
