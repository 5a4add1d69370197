package rabbitclaim

import "github.com/anarchon/anarchon/internal/claim"

// The backend keeps no control records (docs/spec.md#s6-control): it is
// not a claim.Controller, and says why.
var _ claim.NoController = (*Backend)(nil)

// WhyNoControl implements claim.NoController. A pause must be one record
// that every instance reads and that a writer compares and sets. RabbitMQ
// has no such thing: a queue's messages cannot be read without taking
// them (a basic.get hides a message from the other readers until it is
// requeued), and a publish cannot be made conditional on what a queue
// holds. A length-1 queue that rejects overflow admits one record for
// good; one that drops its head lets a second writer overwrite the first
// unseen; a stream keeps every write in order but cannot refuse a stale
// one, so a write that lost would already be half-done.
func (*Backend) WhyNoControl() string { return whyNoControl }

// whyNoControl is WhyNoControl's answer, and the driver's NoControl.
const whyNoControl = "a queue cannot be read without taking its messages, nor a publish made conditional on what it holds, so there is no record to compare and set: edit the crontab on every host instead"

// The backend keeps no instance records (docs/spec.md#s6-cluster): it is
// not a claim.Registry, and says why.
var _ claim.NoRegistry = (*Backend)(nil)

// WhyNoRegistry implements claim.NoRegistry. A heartbeat record must be
// one value per instance that every instance reads and each overwrites;
// a queue's messages cannot be read without taking them, and a stream
// keeps every beat, so reading the instances would mean reading the
// whole stream back.
func (*Backend) WhyNoRegistry() string {
	return "a queue cannot be read without taking its messages, and a stream would have to be read whole for the last beat of each instance: the cluster view, crontab drift detection and the check of duplicate instance names are off"
}
