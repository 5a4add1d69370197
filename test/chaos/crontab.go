package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/test/chaos/check"
)

// The policies every job of the harness runs with. The lease is shorter
// than the long jobs, so that they live on heartbeats, and short enough
// that a takeover happens within a few seconds of a fault.
const (
	leaseMs     = 3000
	heartbeatMs = 1000
	maxLateMs   = 5000
	maxAttempts = 3
	// killGraceMs: a fenced job gets SIGTERM, then SIGKILL after this.
	killGraceMs = 1000
	// shutdownGraceMs: at the end of a run (SIGTERM) running jobs may
	// finish; it exceeds the longest job of the templates (6 s), so that
	// they all do.
	shutdownGraceMs = 7000
	// epsilonMs is the stated ε of the takeover bound written to run.json:
	// a dead runner's run starts again within lease + heartbeat + ε. It
	// covers the claim round trip (through a proxy that may add up to 400
	// ms), the backup's own scheduling and the start of the command.
	epsilonMs = 1500
	// driftInstance is the instance whose crontab differs for the drift job.
	driftInstance = 0
	// claimRetentionMs is the memory of the claim-only backends whose
	// memory expires (RabbitMQ gate queues, the Redis script window, the
	// NATS duplicate window): far above maxLate + the largest skew (1.5 s)
	// + the longest pause (6 s).
	claimRetentionMs = 120000
)

// jobTemplate is one kind of job of the mix; the n-th job of a run uses
// template n modulo the list.
type jobTemplate struct {
	name     string
	schedule string
	drift    string // the schedule of driftInstance, if it differs
	sleepMs  int64
	exit     int
	overlap  string
}

// templates: schedules every 1, 2, 3 and 5 s; short commands (0–200 ms),
// long ones (2.5–6 s, longer than the lease), some exiting 3; overlap skip
// for most, allow for some; one job whose schedule drifts on one instance.
var templates = []jobTemplate{
	{name: "s1", schedule: "* * * * * *", sleepMs: 100, overlap: "skip"},
	{name: "s2", schedule: "*/2 * * * * *", sleepMs: 50, overlap: "skip"},
	{name: "drift3", schedule: "*/3 * * * * *", drift: "*/2 * * * * *", sleepMs: 150, overlap: "skip"},
	{name: "long5", schedule: "*/5 * * * * *", sleepMs: 4000, overlap: "skip"},
	{name: "long2", schedule: "*/2 * * * * *", sleepMs: 3000, overlap: "skip"},
	{name: "fail1", schedule: "* * * * * *", sleepMs: 20, exit: 3, overlap: "skip"},
	{name: "long3a", schedule: "*/3 * * * * *", sleepMs: 5000, overlap: "allow"},
	{name: "longfail5", schedule: "@every 5s", sleepMs: 2500, exit: 3, overlap: "skip"},
	{name: "s1a", schedule: "* * * * * *", sleepMs: 200, overlap: "allow"},
	{name: "long2a", schedule: "*/2 * * * * *", sleepMs: 6000, overlap: "allow"},
	{name: "s3", schedule: "*/3 * * * * *", sleepMs: 0, overlap: "skip"},
	{name: "fail5", schedule: "*/5 * * * * *", sleepMs: 100, exit: 3, overlap: "skip"},
}

// makeJobs returns n jobs built from the templates, as run.json describes
// them. Only the first job made from the drift template drifts.
func makeJobs(n int) []check.JobInfo {
	jobs := make([]check.JobInfo, 0, n)
	drifted := false
	for i := range n {
		t := templates[i%len(templates)]
		j := check.JobInfo{
			Name:        fmt.Sprintf("j%02d-%s", i, t.name),
			Schedule:    t.schedule,
			Timezone:    "UTC",
			SleepMs:     t.sleepMs,
			Exit:        t.exit,
			LeaseMs:     leaseMs,
			HeartbeatMs: heartbeatMs,
			MaxLateMs:   maxLateMs,
			MaxAttempts: maxAttempts,
			Overlap:     t.overlap,
		}
		if t.drift != "" && !drifted {
			j.Drift, j.DriftInstance = t.drift, driftInstance
			drifted = true
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// withoutLeases makes every job allow overlap when the store keeps no
// leases: the claim-only stores refuse overlap skip, which they cannot
// enforce.
func withoutLeases(jobs []check.JobInfo, leases bool) []check.JobInfo {
	if !leases {
		for i := range jobs {
			jobs[i].Overlap = "allow"
		}
	}
	return jobs
}

// burstJobs returns n short jobs that share one schedule (burstSchedule),
// so that n runs fall due at the same instant, beside the other jobs whose
// schedules fall on it too.
func burstJobs(n int) []check.JobInfo {
	jobs := make([]check.JobInfo, 0, n)
	for i := range n {
		jobs = append(jobs, check.JobInfo{
			Name: fmt.Sprintf("b%02d-burst", i), Schedule: burstSchedule, Timezone: "UTC", SleepMs: burstSleepMs,
			LeaseMs: leaseMs, HeartbeatMs: heartbeatMs, MaxLateMs: maxLateMs, MaxAttempts: maxAttempts, Overlap: "skip",
		})
	}
	return jobs
}

// The crontab as YAML; field order follows configs/example.yaml.
type crontab struct {
	Instance        string         `yaml:"instance"`
	Namespace       string         `yaml:"namespace"`
	ShutdownGraceMs int            `yaml:"shutdownGraceMs"`
	Metrics         map[string]any `yaml:"metrics"`
	Log             map[string]any `yaml:"log"`
	Backend         map[string]any `yaml:"backend"`
	Defaults        defaults       `yaml:"defaults"`
	Jobs            []cronJob      `yaml:"jobs"`
}

type defaults struct {
	Timezone    string `yaml:"timezone"`
	MaxLateMs   int64  `yaml:"maxLateMs"`
	LeaseMs     int64  `yaml:"leaseMs"`
	HeartbeatMs int64  `yaml:"heartbeatMs"`
	MaxAttempts int    `yaml:"maxAttempts"`
	Overlap     string `yaml:"overlap"`
	Timeout     string `yaml:"timeout"`
	KillGraceMs int    `yaml:"killGraceMs"`
}

type cronJob struct {
	Name     string   `yaml:"name"`
	Schedule string   `yaml:"schedule"`
	Args     []string `yaml:"args"`
	Overlap  string   `yaml:"overlap"`
}

// writeCrontab writes instance i's crontab (mode 0600: the daemon refuses
// a crontab others can write). backend is the backend section, pointing at
// the instance's proxy; jobBin runs the jobs (see job.go).
func writeCrontab(path string, i int, namespace string, backend map[string]any, jobs []check.JobInfo, jobBin, dir string) error {
	ct := crontab{
		Instance:        instanceName(i),
		Namespace:       namespace,
		ShutdownGraceMs: shutdownGraceMs,
		Metrics:         map[string]any{"listen": "127.0.0.1:0"},
		// Debug: the checker reads the answers of lost races (running,
		// done, lost), which the daemon logs at debug.
		Log:     map[string]any{"level": "debug", "format": "json"},
		Backend: backend,
		Defaults: defaults{
			Timezone: "UTC", MaxLateMs: maxLateMs, LeaseMs: leaseMs, HeartbeatMs: heartbeatMs,
			MaxAttempts: maxAttempts, Overlap: "skip", Timeout: "60s", KillGraceMs: killGraceMs,
		},
	}
	// Absolute: a job runs in its user's home, not in the harness's
	// directory.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("crontab of instance %d: %w", i, err)
	}
	journal := filepath.Join(dir, fmt.Sprintf("journal-%d.log", i))
	fence := filepath.Join(dir, "fence")
	for _, j := range jobs {
		sched := j.Schedule
		if j.Drift != "" && j.DriftInstance == i {
			sched = j.Drift
		}
		ct.Jobs = append(ct.Jobs, cronJob{
			Name:     j.Name,
			Schedule: sched,
			Args:     []string{jobBin, jobArg, fmt.Sprint(j.SleepMs), fmt.Sprint(j.Exit), journal, fence},
			Overlap:  j.Overlap,
		})
	}
	b, err := yaml.Marshal(ct)
	if err != nil {
		return fmt.Errorf("crontab of instance %d: %w", i, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("crontab of instance %d: %w", i, err)
	}
	// WriteFile keeps the mode of an existing file.
	return os.Chmod(path, 0o600)
}

// resolvedClaimAhead sets each job's ClaimAheadMs to what the daemons make
// of the crontab at path: the crontab leaves it to the backend's built-in
// default.
func resolvedClaimAhead(path string, jobs []check.JobInfo) error {
	cfg, err := config.Load(path, config.LoadOptions{Environ: []string{}})
	if err != nil {
		return fmt.Errorf("resolve the crontab %s: %w", path, err)
	}
	ahead := make(map[string]time.Duration, len(cfg.Jobs))
	for _, j := range cfg.Jobs {
		ahead[j.Name] = j.ClaimAhead
	}
	for i := range jobs {
		jobs[i].ClaimAheadMs = ahead[jobs[i].Name].Milliseconds()
	}
	return nil
}

// instanceName is instance i's id, as run.json and the journals name it.
func instanceName(i int) string { return fmt.Sprintf("chaos-%d", i) }
