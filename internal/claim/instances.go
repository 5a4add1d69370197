package claim

import (
	"context"
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
	// SkewMs is the instance's clock minus the store's at the last beat
	// (0 where the store has no clock of its own).
	SkewMs int64
	// Jobs maps each job of the instance's crontab to a hash of the
	// fields that change what runs; JobsHash is one hash over them all.
	Jobs     map[string]string
	JobsHash string
}

// Registry is a backend that keeps the instances' heartbeat records.
type Registry interface {
	Backend
	// Beat writes inst's record, to expire ttl after this beat unless
	// renewed, and returns it as stored (LastSeen and SkewMs set by the
	// store where it has a clock).
	Beat(ctx context.Context, inst Instance, ttl time.Duration) (Instance, error)
	// Instances returns every record the store holds, live or expired
	// within its retention, in no particular order, and the store's time
	// at the read (the zero time where it has no clock).
	Instances(ctx context.Context) ([]Instance, time.Time, error)
}
