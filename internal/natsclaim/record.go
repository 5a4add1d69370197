package natsclaim

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/anarchon/anarchon/internal/claim"
)

// Record stores n, the outcome of a slot no attempt ran, as the slot's
// claim would be stored: published to <namespace>.<job>.claims with the
// run's Nats-Msg-Id <namespace>:<job>:<slot>. The stream's de-duplication
// keeps the first of the claims and notes of the run, so Record reports
// false when a claim or an earlier note came first, and a claim after the
// note is lost. Like a claim, a note is de-duplicated within the stream's
// duplicate window only (see the package doc). An error means no answer
// arrived; Record may be called again.
func (b *Backend) Record(ctx context.Context, n claim.Note) (bool, error) {
	wrote, err := b.record(ctx, n)
	if err != nil {
		return false, fmt.Errorf("record %s of %s@%d: %w", n.Status, n.Job, n.Slot, err)
	}
	return wrote, nil
}

func (b *Backend) record(ctx context.Context, n claim.Note) (bool, error) {
	if err := n.Check(); err != nil {
		return false, err
	}
	if !validToken(n.Job) {
		return false, fmt.Errorf("job name %q is not a valid subject token", n.Job)
	}
	body, err := json.Marshal(claimRecord{
		Instance: n.Instance, Job: n.Job, Slot: n.Slot,
		Status: n.Status, Reason: n.Reason, HeldBy: n.HeldBy,
	})
	if err != nil {
		return false, err
	}
	msg := &nats.Msg{Subject: b.claimSubject(n.Job), Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, b.claimMsgID(n.Job, n.Slot))
	ack, err := b.publish(ctx, msg)
	if err != nil {
		return false, fmt.Errorf("publish: %w", err)
	}
	return !ack.Duplicate, nil
}
