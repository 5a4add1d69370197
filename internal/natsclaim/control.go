package natsclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/anarchon/anarchon/internal/claim"
)

// The jobs' control records (docs/spec.md#s6-control) are the entries of a
// JetStream key-value bucket, <stream>_CONTROL, with the key
// <namespace>.<job> and a JSON value (paused, until, reason, by, at,
// triggers); a
// record's version is the entry's revision. A write is the bucket's
// compare and set: Create for a job's first record (refused when the key
// exists), Update at the previous revision (Nats-Expected-Last-Subject-
// Sequence, refused when the key moved on); either refusal is
// claim.ErrConflict. The claim stream cannot hold the records: its max age
// would end a long pause.
//
// The bucket is created by the first write, with the claim stream's
// replicas and file storage, history 1 and no max age; Controls finds no
// record while it does not exist. Controls reads the namespace's keys with
// one short-lived watch (an ordered consumer delivering the last entry of
// each key, stopped once it delivered them): one read, however many jobs.

var _ claim.Controller = (*Backend)(nil)

// controlBucket is the backend's handle on a key-value bucket (the control
// records', or within registryBucket the instances'), once found.
type controlBucket struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

// controlValue is an entry's value.
type controlValue struct {
	Paused bool   `json:"paused"`
	Until  int64  `json:"until,omitempty"`
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
	At     int64  `json:"at"`
	// Triggers: docs/spec.md#s6-trigger; absent for none.
	Triggers []claim.Trigger `json:"triggers,omitempty"`
}

// ControlBucket is the name of the control records' bucket of a stream.
func ControlBucket(stream string) string { return stream + "_CONTROL" }

// controlKey is a job's key in the bucket.
func (b *Backend) controlKey(job string) string { return b.ns + "." + job }

// bucket returns the control records' bucket, creating it when create is
// set; without create, a missing bucket is (nil, nil).
func (b *Backend) bucket(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	return b.openBucket(ctx, &b.ctl, ControlBucket(b.name), "control records (pause, resume)", create)
}

// openBucket returns the bucket name of h, found once: created, when
// create is set, with the claim stream's replicas (one another instance
// created first is used as it is); without create, a missing bucket is
// (nil, nil). records says what the bucket holds ("instance records"); its
// first word names the bucket in errors.
func (b *Backend) openBucket(ctx context.Context, h *controlBucket, name, records string, create bool) (jetstream.KeyValue, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kv != nil {
		return h.kv, nil
	}
	kv, err := b.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		replicas := 1
		if b.stream != nil {
			replicas = max(1, b.stream.CachedInfo().Config.Replicas)
		}
		kv, err = b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: "anarchon " + records + " of stream " + b.name,
			History: 1, Storage: jetstream.FileStorage, Replicas: replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = b.js.KeyValue(ctx, name)
		}
	}
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound) && !create:
		return nil, nil
	case err != nil:
		what, _, _ := strings.Cut(records, " ")
		return nil, controlRefusal(fmt.Errorf("%s bucket %s: %w", what, name, err), name)
	}
	h.kv = kv
	return kv, nil
}

// Controls returns every control record of the namespace.
func (b *Backend) Controls(ctx context.Context) ([]claim.Control, error) {
	ctx, cancel := b.bounded(ctx)
	defer cancel()
	kv, err := b.bucket(ctx, false)
	if err != nil || kv == nil {
		return nil, err
	}
	return readAll(ctx, kv, b.ns, "control records", b.parseControl)
}

// readAll reads the last entry of each of the namespace ns's keys of kv
// with one short-lived watch, each parsed by parse; records names what
// they are in errors ("control records").
func readAll[T any](ctx context.Context, kv jetstream.KeyValue, ns, records string, parse func(jetstream.KeyValueEntry) (T, error)) ([]T, error) {
	w, err := kv.Watch(ctx, ns+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, controlRefusal(fmt.Errorf("read %s: %w", records, err), kv.Bucket())
	}
	defer w.Stop() //nolint:errcheck // the watch's consumer is ephemeral
	var out []T
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s: %w", records, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("read %s: the watch ended early", records)
			}
			if e == nil {
				return out, nil // every key's last entry delivered
			}
			v, err := parse(e)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", records, err)
			}
			out = append(out, v)
		}
	}
}

// parseControl reads one entry.
func (b *Backend) parseControl(e jetstream.KeyValueEntry) (claim.Control, error) {
	var v controlValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return claim.Control{}, fmt.Errorf("key %s: %w", e.Key(), err)
	}
	return claim.Control{
		Job: strings.TrimPrefix(e.Key(), b.ns+"."), Version: int64(e.Revision()),
		Paused: v.Paused, Until: v.Until, Reason: v.Reason, By: v.By, At: v.At, Triggers: v.Triggers,
	}, nil
}

// SetControl writes c over the record at prevVersion: Create, or Update at
// that revision.
func (b *Backend) SetControl(ctx context.Context, c claim.Control, prevVersion int64) (claim.Control, error) {
	if err := c.Check(); err != nil {
		return claim.Control{}, err
	}
	if !validToken(c.Job) {
		return claim.Control{}, fmt.Errorf("set control: job %q is not a valid subject token", c.Job)
	}
	if prevVersion < 0 {
		return claim.Control{}, fmt.Errorf("set control of %s at version %d: %w", c.Job, prevVersion, claim.ErrConflict)
	}
	ctx, cancel := b.bounded(ctx)
	defer cancel()
	kv, err := b.bucket(ctx, true)
	if err != nil {
		return claim.Control{}, fmt.Errorf("set control of %s: %w", c.Job, err)
	}
	data, err := json.Marshal(controlValue{Paused: c.Paused, Until: c.Until, Reason: c.Reason, By: c.By, At: c.At, Triggers: c.Triggers})
	if err != nil {
		return claim.Control{}, fmt.Errorf("set control of %s: %w", c.Job, err)
	}
	var rev uint64
	if prevVersion == 0 {
		rev, err = kv.Create(ctx, b.controlKey(c.Job), data)
	} else {
		rev, err = kv.Update(ctx, b.controlKey(c.Job), data, uint64(prevVersion))
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return claim.Control{}, fmt.Errorf("set control of %s at version %d: %w", c.Job, prevVersion, claim.ErrConflict)
	case err != nil:
		return claim.Control{}, controlRefusal(fmt.Errorf("set control of %s: %w", c.Job, err), kv.Bucket())
	}
	c.Version = int64(rev)
	if len(c.Triggers) == 0 {
		c.Triggers = nil
	}
	return c, nil
}

// bounded gives ctx the backend's request timeout when it has no deadline.
func (b *Backend) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, b.timeout)
}

// controlRefusal classifies err as refusal does, naming the bucket's
// subjects where the server refused the user a subject.
func controlRefusal(err error, bucket string) error {
	if errors.Is(err, nats.ErrPermissionViolation) {
		return claim.Permanent("nats", err, "the server refused the user the subjects of the key-value bucket "+bucket,
			fmt.Sprintf("allow the user to publish and subscribe to $KV.%s.> (with $JS.API.> and _INBOX.>)", bucket))
	}
	return refusal(err)
}
