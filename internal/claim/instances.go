package claim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Instance is one instance's heartbeat record (docs/spec.md#s6-cluster):
// who it is, what it runs and what it last said. Each instance writes its
// own record every beat; the record expires when the instance stops
// beating, and the cluster view lists the records a store still holds.
type Instance struct {
	Name    string // the instance id (config instance)
	Host    string // the hostname
	PID     int
	Version string // the anarchond version
	Tags    []string
	// StartedAt is when the daemon started, by its clock; LastSeen is the
	// last beat, in store time where the store has a clock (else the
	// instance's).
	StartedAt time.Time
	LastSeen  time.Time
	// ExpiresAt is when the record stops saying the instance is alive
	// unless renewed: LastSeen plus the ttl of the last Beat, in the same
	// time as LastSeen.
	ExpiresAt time.Time
	// Retain is how long the store keeps the record readable after
	// ExpiresAt (the instance's backend.retention); then it is pruned.
	Retain time.Duration
	// SkewMs is the instance's clock minus the store's at the last beat
	// (0 where the store has no clock of its own).
	SkewMs int64
	// Jobs maps each job of the instance's crontab to a hash of the
	// fields that change what runs; JobsHash is one hash over them all.
	// The hash's format is internal/cluster's (one short hash per group
	// of fields, so that a difference names its fields).
	Jobs     map[string]string
	JobsHash string
}

// Alive reports whether the record says the instance was beating at now
// (in the store's time).
func (i Instance) Alive(now time.Time) bool { return now.Before(i.ExpiresAt) }

// Gone reports whether the record is past its retention at now: a store
// prunes it, and a reader ignores it.
func (i Instance) Gone(now time.Time) bool { return !now.Before(i.ExpiresAt.Add(i.Retain)) }

// MaxInstanceName bounds an instance's name and host, in bytes.
const MaxInstanceName = 255

// Check refuses a record a store should not write.
func (i Instance) Check() error {
	switch {
	case i.Name == "":
		return errors.New("instance record: empty instance name")
	case len(i.Name) > MaxInstanceName:
		return fmt.Errorf("instance record: name of %d bytes (at most %d)", len(i.Name), MaxInstanceName)
	case len(i.Host) > MaxInstanceName:
		return fmt.Errorf("instance record of %s: host of %d bytes (at most %d)", i.Name, len(i.Host), MaxInstanceName)
	case i.Retain < 0:
		return fmt.Errorf("instance record of %s: negative retention %s", i.Name, i.Retain)
	}
	return nil
}

// Registry is a backend that keeps the instances' heartbeat records.
type Registry interface {
	Backend
	// Beat writes inst's record, to expire ttl after this beat unless
	// renewed, and returns it as stored (LastSeen and SkewMs set by the
	// store where it has a clock). inst.LastSeen is the instance's clock
	// at the beat. It also prunes the records past their retention.
	Beat(ctx context.Context, inst Instance, ttl time.Duration) (Instance, error)
	// Instances returns every record the store holds, live or expired
	// within its retention, in no particular order, and the store's time
	// at the read (the zero time where it has no clock).
	Instances(ctx context.Context) ([]Instance, time.Time, error)
}

// NoRegistry is a backend that cannot keep instance records and says why.
type NoRegistry interface {
	// WhyNoRegistry says, in a few words, why the store keeps no
	// instance records.
	WhyNoRegistry() string
}

// ErrNoRegistry is the error of the cluster view on a backend that is not
// a Registry.
var ErrNoRegistry = errors.New("the backend keeps no instance records")

// RegistryOf returns b as a Registry, or an error wrapping ErrNoRegistry
// that names the backend type typ and, where the backend says, why.
func RegistryOf(b Backend, typ string) (Registry, error) {
	return capability[Registry](b, NoRegistry.WhyNoRegistry, "the store has no place for them", func(why string) error {
		return fmt.Errorf("%w: backend %s: %s", ErrNoRegistry, typ, why)
	})
}

// instanceJSON is the JSON form of a record, for stores that keep it as
// one value (EncodeInstance).
type instanceJSON struct {
	Name      string            `json:"name"`
	Host      string            `json:"host,omitempty"`
	PID       int               `json:"pid,omitempty"`
	Version   string            `json:"version,omitempty"`
	Tags      []string          `json:"tags,omitempty"`
	StartedAt int64             `json:"started"`
	LastSeen  int64             `json:"seen"`
	ExpiresAt int64             `json:"expires"`
	RetainMs  int64             `json:"retain"`
	SkewMs    int64             `json:"skew,omitempty"`
	Jobs      map[string]string `json:"jobs,omitempty"`
	JobsHash  string            `json:"jobs_hash,omitempty"`
}

// EncodeInstance is i as one JSON value, times in ms since the Unix epoch.
func EncodeInstance(i Instance) ([]byte, error) {
	return json.Marshal(instanceJSON{
		Name: i.Name, Host: i.Host, PID: i.PID, Version: i.Version, Tags: i.Tags,
		StartedAt: MillisOf(i.StartedAt), LastSeen: MillisOf(i.LastSeen), ExpiresAt: MillisOf(i.ExpiresAt),
		RetainMs: i.Retain.Milliseconds(), SkewMs: i.SkewMs, Jobs: i.Jobs, JobsHash: i.JobsHash,
	})
}

// DecodeInstance reads EncodeInstance's value.
func DecodeInstance(data []byte) (Instance, error) {
	var v instanceJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return Instance{}, fmt.Errorf("instance record: %w", err)
	}
	return Instance{
		Name: v.Name, Host: v.Host, PID: v.PID, Version: v.Version, Tags: v.Tags,
		StartedAt: TimeOfMillis(v.StartedAt), LastSeen: TimeOfMillis(v.LastSeen), ExpiresAt: TimeOfMillis(v.ExpiresAt),
		Retain: time.Duration(v.RetainMs) * time.Millisecond, SkewMs: v.SkewMs, Jobs: v.Jobs, JobsHash: v.JobsHash,
	}, nil
}

// MillisOf is t in ms since the Unix epoch; 0 for the zero time (a store's
// column or field of a time that may be unset).
func MillisOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// TimeOfMillis is MillisOf's inverse, in UTC.
func TimeOfMillis(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}
