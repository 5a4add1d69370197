// Package config loads and checks the crontab: one YAML file (docs/spec.md#s6),
// overridden by ANARCHON_* environment variables, with every job's defaults
// merged in. Load returns either a Config in which every job is resolved, or
// an Errors listing every problem with its file, line, job and field.
//
// The file is walked as a yaml.v3 node tree against a schema, so that every
// key and value keeps its line: unknown keys, repeated keys and wrong types are
// problems like any other, and all of them are listed. YAML anchors, aliases
// and merge keys ("<<: *common") work; top-level keys starting with "x-" are
// ignored so that anchors can be defined there.
//
// Precedence, for every job setting: the job's own value, then the value in
// defaults, then the built-in default. A heartbeatMs that is set nowhere is
// the job's own leaseMs / 3.
//
// Every scalar setting outside jobs may be overridden by an environment
// variable: ANARCHON_ + the key path upper-cased with "." -> "_", e.g.
// ANARCHON_BACKEND_SQLITE_BUSYTIMEOUTMS for backend.sqlite.busyTimeoutMs. An
// empty variable is ignored. Viper binds the variables (LoadOptions.Environ
// replaces the process environment, for tests and embedding).
package config

import (
	"context"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/store"
	"go.uber.org/zap"
)

// Config is a loaded, valid crontab with every default applied.
type Config struct {
	File          string // the path it was loaded from
	Instance      string // never empty after Load: <hostname>-<4 hex> by default
	Namespace     string
	ShutdownGrace time.Duration
	// Watch reloads the crontab when its file changes, as SIGHUP does.
	Watch   bool
	Metrics Metrics
	// Dashboard is the web dashboard on the metrics listener.
	Dashboard Dashboard
	Log       Log
	Backend   Backend
	Jobs      []Job
	// Warnings are problems that do not stop the daemon (no jobs, unknown
	// ANARCHON_* variables, a writable file accepted for development, ...),
	// one line each, formatted like an Error.
	Warnings []string

	// Tags are this instance's tags (top-level tags): it schedules only
	// the jobs whose tags it has all of (Job.RunsOn).
	Tags []string

	// StateDir is where the daemon keeps the records of its running
	// attempts (docs/spec.md#s4-processes); "": the daemon's default.
	StateDir string
}

// Metrics configures the Prometheus and health endpoints.
type Metrics struct {
	// Listen is the HTTP address of /metrics, /healthz and /readyz; empty
	// disables them.
	Listen string
}

// Log configures zap.
type Log struct {
	Level  string // debug | info | warn | error
	Format string // auto | console | json
}

// Backend selects and configures the store.
type Backend struct {
	// Type is backend.type: the name a store registered under
	// (store.Register).
	Type string
	// Retention is how long lease backends keep finished runs (by slot age)
	// before pruning them; never below the largest job maxLate.
	Retention time.Duration
	// Store is backend.<Type>, as the store's driver parsed it.
	Store store.Settings
	// sections are every registered store's section, as parsed (each is
	// checked whether selected or not), by store name.
	sections map[string]store.Settings
}

// Leases reports whether the store keeps a lease on every running run
// (store.Settings.Leases): a backup takes a run over when its lease ends,
// and overlap: skip is decided against the live lease. The other stores
// (claim-only) remember that a slot was claimed, not whether its run is
// still running.
func (b Backend) Leases() bool {
	return b.Store != nil && b.Store.Leases()
}

// Describe names the store and where it is, secrets hidden.
func (b Backend) Describe() string {
	if b.Store == nil {
		return b.Type
	}
	return b.Store.Describe()
}

// Job is one crontab entry with its defaults merged in.
type Job struct {
	Name     string
	Schedule string // the expression as written
	Command  string // run as Shell -c Command, unless Args is set
	Args     []string
	Env      map[string]string
	Workdir  string
	User     string
	Group    string // the primary group instead of the user's own (needs User)
	Timezone string
	Location *time.Location

	MaxLate         time.Duration
	ClaimSpread     time.Duration // bound of the delay before a slot's first claim (work spread); 0: none
	ClaimAhead      time.Duration // how long before its slot a run is claimed; the job starts at the slot
	Lease           time.Duration
	Heartbeat       time.Duration
	MaxAttempts     int
	Overlap         string // skip | allow | replace | queue
	CatchUp         string // none | latest | all: the slots missed while every instance was down that a start runs
	Timeout         time.Duration
	KillGrace       time.Duration
	Shell           string
	OutputTailBytes int
	// KeepRuns, when positive, is how many of the job's newest slots
	// (runs and notes) the store keeps; the older ones are pruned
	// (docs/spec.md#s6-keep-runs). 0: no such bound (backend.retention
	// alone).
	KeepRuns int
	// InheritEnv names the daemon's environment variables the job gets
	// besides its clean environment (docs/spec.md#s6-jobs); never ANARCHON_*.
	InheritEnv []string
	// OnFailure, OnSuccess and OnMissed are the job's hooks: commands run
	// by Shell, as the job is, after a run that failed or timed out, after
	// one that succeeded, and for a slot recorded missed
	// (docs/spec.md#s6-hooks); "": none.
	OnFailure string
	OnSuccess string
	OnMissed  string
	// HookTimeout bounds one hook's run; it is stopped after it.
	HookTimeout time.Duration
	// Jitter (jitterMs) bounds the delay of each run's start after its
	// slot: schedule.Jitter of (name, slot), the same on every instance.
	Jitter time.Duration
	// Tags are the tags an instance needs all of to schedule the job.
	Tags []string
	// PerInstance runs the job on every instance that schedules it, once
	// per slot each: its runs are claimed under the key Job.Key.
	PerInstance bool
	// Retry says how a failed or timed-out run is run again
	// (docs/spec.md#s6-retry); Attempts 0: never.
	Retry Retry
	// OnDrift is what the job does while the live instances' definitions
	// of it disagree (docs/spec.md#s6-cluster): run, or pause (no
	// instance claims it; its slots are recorded skipped, reason drift).
	OnDrift string

	Line  int // the line of the job's entry in File
	Index int // the job's position in jobs, from 0
}

// Catch-up policies: which of the slots that came due while every instance
// was down a start runs (docs/design.md, "Catch-up at start").
const (
	// CatchUpNone runs only the slots after the start.
	CatchUpNone = "none"
	// CatchUpLatest runs the newest missed slot still within maxLate, once.
	CatchUpLatest = "latest"
	// CatchUpAll runs every missed slot still within maxLate.
	CatchUpAll = "all"
)

// OnDrift policies: what a job does while the live instances' definitions
// of it disagree.
const (
	// OnDriftRun runs the job as each instance defines it (the default).
	OnDriftRun = "run"
	// OnDriftPause stops every instance claiming the job until they agree.
	OnDriftPause = "pause"
)

// OpenStore opens the store the crontab selects (store.Open).
func (c *Config) OpenStore(ctx context.Context, log *zap.Logger, clk clock.Clock) (claim.Backend, error) {
	return store.Open(ctx, c.Backend.Type, store.OpenParams{
		Settings: c.Backend.Store, Namespace: c.Namespace, Instance: c.Instance,
		Retention: c.Backend.Retention, Log: log, Clock: clk,
	})
}

// LocalStore reports whether the store is a file on this host
// (store.Driver.Local).
func (b Backend) LocalStore() bool {
	d, ok := store.Lookup(b.Type)
	return ok && d.Local
}
