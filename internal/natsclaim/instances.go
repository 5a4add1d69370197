package natsclaim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/anarchon/anarchon/internal/claim"
)

// The instances' heartbeat records (docs/spec.md#s6-cluster) are the
// entries of a JetStream key-value bucket, <stream>_INSTANCES, with the
// key <namespace>.<instance name, base64url> (a name may hold characters
// a key may not) and a JSON value: the record (claim.EncodeInstance),
// the beat's ttl and the instance's clock at the beat. JetStream has no
// clock a client can read, but every entry carries the server's time of
// its write: a record's LastSeen is that time, its expiry LastSeen + ttl
// and its skew the instance's clock minus it. A beat is a Put, then a
// get of the revision written for its time. Instances returns the zero
// store time: a reader judges alive and gone by its own clock.
//
// The bucket is created by the first beat, with the claim stream's
// replicas, file storage, history 1 and no max age. One beat in
// pruneEvery (and the first) also deletes the namespace's records past
// their retention; a reader skips them meanwhile.

var _ claim.Registry = (*Backend)(nil)

// pruneEvery: one beat in pruneEvery prunes the records.
const pruneEvery = 12

// registryBucket is the backend's handle on the instances' bucket.
type registryBucket struct {
	controlBucket
	beats atomic.Int64
}

// instanceValue is an entry's value.
type instanceValue struct {
	Record json.RawMessage `json:"record"`
	TTLMs  int64           `json:"ttl"`
	SentMs int64           `json:"sent,omitempty"`
}

// InstanceBucket is the name of the instance records' bucket of a stream.
func InstanceBucket(stream string) string { return stream + "_INSTANCES" }

// instanceKey is an instance's key in the bucket.
func (b *Backend) instanceKey(name string) string {
	return b.ns + "." + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// instanceBucket returns the instance records' bucket, creating it when
// create is set; without create, a missing bucket is (nil, nil).
func (b *Backend) instanceBucket(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	return b.openBucket(ctx, &b.reg.controlBucket, InstanceBucket(b.name), "instance records", create)
}

// Beat writes inst's record, reads back the server's time of the write,
// and every pruneEvery beats prunes the records past their retention.
func (b *Backend) Beat(ctx context.Context, inst claim.Instance, ttl time.Duration) (claim.Instance, error) {
	if err := inst.Check(); err != nil {
		return claim.Instance{}, err
	}
	ctx, cancel := b.bounded(ctx)
	defer cancel()
	kv, err := b.instanceBucket(ctx, true)
	if err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	}
	body := inst
	body.LastSeen, body.ExpiresAt, body.SkewMs = time.Time{}, time.Time{}, 0
	rec, err := claim.EncodeInstance(body)
	if err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	}
	v := instanceValue{Record: rec, TTLMs: ttl.Milliseconds()}
	if !inst.LastSeen.IsZero() {
		v.SentMs = inst.LastSeen.UnixMilli()
	}
	data, err := json.Marshal(v)
	if err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	}
	key := b.instanceKey(inst.Name)
	rev, err := kv.Put(ctx, key, data)
	if err != nil {
		return claim.Instance{}, controlRefusal(fmt.Errorf("beat of %s: %w", inst.Name, err), kv.Bucket())
	}
	e, err := kv.GetRevision(ctx, key, rev)
	if err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: read it back: %w", inst.Name, err)
	}
	if b.reg.beats.Add(1)%pruneEvery == 1 {
		b.pruneInstances(ctx, kv)
	}
	return parseInstance(e)
}

// pruneInstances deletes the namespace's records past their retention
// (by the local clock); a failure waits for the next prune.
func (b *Backend) pruneInstances(ctx context.Context, kv jetstream.KeyValue) {
	all, err := b.readInstances(ctx, kv, false)
	if err != nil {
		return
	}
	now := time.Now()
	for _, i := range all {
		if i.Gone(now) {
			_ = kv.Purge(ctx, b.instanceKey(i.Name)) //nolint:errcheck // pruned at the next prune
		}
	}
}

// Instances returns every record within its retention by the local clock,
// and the zero store time (JetStream's clock cannot be read).
func (b *Backend) Instances(ctx context.Context) ([]claim.Instance, time.Time, error) {
	ctx, cancel := b.bounded(ctx)
	defer cancel()
	kv, err := b.instanceBucket(ctx, false)
	if err != nil || kv == nil {
		return nil, time.Time{}, err
	}
	out, err := b.readInstances(ctx, kv, true)
	return out, time.Time{}, err
}

// readInstances reads the namespace's keys with one short-lived watch;
// live drops the records past their retention.
func (b *Backend) readInstances(ctx context.Context, kv jetstream.KeyValue, live bool) ([]claim.Instance, error) {
	now := time.Now()
	out, err := readAll(ctx, kv, b.ns, "instance records", parseInstance)
	if err != nil || !live {
		return out, err
	}
	return slices.DeleteFunc(out, func(i claim.Instance) bool { return i.Gone(now) }), nil
}

// parseInstance reads one entry, stamped with its server time.
func parseInstance(e jetstream.KeyValueEntry) (claim.Instance, error) {
	var v instanceValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return claim.Instance{}, fmt.Errorf("key %s: %w", e.Key(), err)
	}
	i, err := claim.DecodeInstance(v.Record)
	if err != nil {
		return claim.Instance{}, fmt.Errorf("key %s: %w", e.Key(), err)
	}
	seen := e.Created().Truncate(time.Millisecond).UTC()
	i.LastSeen, i.ExpiresAt = seen, seen.Add(time.Duration(v.TTLMs)*time.Millisecond)
	if v.SentMs != 0 {
		i.SkewMs = v.SentMs - seen.UnixMilli()
	}
	if i.Name == "" {
		return claim.Instance{}, fmt.Errorf("key %s: a record without a name", e.Key())
	}
	return i, nil
}
