// Package check is the chaos harness's independent checker: it reads what
// actually happened (the jobs' journals, the faults the harness injected,
// the daemons' logs and the store's history as `anarchond status --json`
// prints it) and reports every violation of anarchon's guarantees with its
// evidence. It knows nothing of how the harness ran: only these files.
//
// The files of one run, all in one directory (Dir):
//
//	run.json          RunInfo: the backend, the jobs, the lease settings
//	faults.jsonl      one Fault per line, in the order injected
//	journal-<i>.log   one Record per line, appended by the jobs of instance i
//	daemon-<i>.log    instance i's stderr: zap JSON lines (log.format json)
//	status.jsonl      `anarchond status --json --limit N` at the end of the run
//	fence/            the jobs' fenced-write registers (see Record.Fence)
package check

// RunInfo describes one harness run (run.json).
type RunInfo struct {
	Backend   string `json:"backend"`   // row name: sqlite, postgres, redis-lease, redis-stream-id, ...
	Lease     bool   `json:"lease"`     // a lease backend (takeover with attempt+1); false: claim-only
	Instances int    `json:"instances"` // instance i is named "chaos-<i>" and writes journal-<i>.log
	Seed      int64  `json:"seed"`
	StartMs   int64  `json:"start_ms"` // wall clock (unix ms) when the first instance was started
	EndMs     int64  `json:"end_ms"`   // wall clock when the faults stopped and the run began to drain
	// EpsilonMs is the stated ε of the takeover bound:
	// a dead runner's run starts again within LeaseMs + HeartbeatMs + EpsilonMs.
	EpsilonMs int64 `json:"epsilon_ms"`
	// StoreClockOffsetMs maps the store's clock onto the wall clock of the
	// files: store time minus wall time. The leases the runners log
	// (lease_until) are in store time; 0 for a store whose clock is this
	// host's (SQLite reads the host's clock, not the daemons' test clocks;
	// PostgreSQL's clock_timestamp() and Redis's TIME on loopback read the
	// same kernel clock).
	StoreClockOffsetMs int64     `json:"store_clock_offset_ms"`
	Jobs               []JobInfo `json:"jobs"`
}

// JobInfo is one job of the crontab as the instances ran it.
type JobInfo struct {
	Name     string `json:"name"`
	Schedule string `json:"schedule"` // the schedule every instance has, except Drift
	// Drift, when set, is the schedule instance DriftInstance has for the
	// same job name instead (crontab drift).
	Drift         string `json:"drift,omitempty"`
	DriftInstance int    `json:"drift_instance,omitempty"`
	Timezone      string `json:"timezone"` // "UTC" in the harness
	SleepMs       int64  `json:"sleep_ms"` // how long the command runs
	Exit          int    `json:"exit"`     // the exit code the command ends with
	LeaseMs       int64  `json:"lease_ms"`
	HeartbeatMs   int64  `json:"heartbeat_ms"`
	MaxLateMs     int64  `json:"max_late_ms"`
	MaxAttempts   int    `json:"max_attempts"`
	Overlap       string `json:"overlap"` // skip | allow
	// ClaimAheadMs is the job's claimAheadMs as the daemons resolved it:
	// its claims are won up to this long before the slot.
	ClaimAheadMs int64 `json:"claim_ahead_ms"`
}

// FaultKind names what the harness did.
type FaultKind string

// The faults, each with what the harness did.
const (
	FaultKill         FaultKind = "kill"          // SIGKILL of instance Instance
	FaultStart        FaultKind = "start"         // instance Instance (re)started
	FaultStop         FaultKind = "stop"          // SIGSTOP of instance Instance (the daemon process only)
	FaultCont         FaultKind = "cont"          // SIGCONT of instance Instance
	FaultCut          FaultKind = "cut"           // Instance's store connections closed, new ones refused
	FaultBlackhole    FaultKind = "blackhole"     // Instance's requests delivered, replies dropped
	FaultLatency      FaultKind = "latency"       // Instance's store traffic delayed by DurationMs... see Detail
	FaultHeal         FaultKind = "heal"          // Instance's proxy passes traffic again
	FaultStoreDown    FaultKind = "store-down"    // the store stopped (Instance -1)
	FaultStoreUp      FaultKind = "store-up"      // the store answers again (Instance -1)
	FaultSkew         FaultKind = "skew"          // Instance's clock offset set to SkewMs
	FaultDriftOn      FaultKind = "drift"         // informational: which instance drifts (at start)
	FaultQuiesce      FaultKind = "quiesce"       // faults end; everything healed and running (Instance -1)
	FaultStopInstance FaultKind = "stop-instance" // SIGTERM at the end of the run
	// FaultOverload is busy-loop processes beside the daemons that starve
	// them of CPU while a burst of runs falls due (Instance -1; Detail says
	// how many loops for how long). FaultOverloadEnd: the loops are killed.
	FaultOverload    FaultKind = "overload"
	FaultOverloadEnd FaultKind = "overload-end"
)

// Fault is one line of faults.jsonl.
type Fault struct {
	AtMs     int64     `json:"at_ms"` // wall clock, unix ms, taken just before the fault was applied
	Kind     FaultKind `json:"kind"`
	Instance int       `json:"instance"` // -1: the store or the whole run
	SkewMs   int64     `json:"skew_ms,omitempty"`
	Detail   string    `json:"detail,omitempty"` // e.g. "latency 300ms", "pause 4500ms"
}

// Record is one line of journal-<i>.log, written by a job with one
// write(2) on an O_APPEND file:
//
//	job slot_ms attempt token instance start_ms end_ms exit fence
//
// A job writes two records: at its start, with end_ms, exit and fence "-";
// and at its end, with all fields. start_ms/end_ms are the job's wall clock
// (unix ms). Fence is the job's fenced write's outcome: "ok" when it was
// accepted, "rejected" when a newer attempt of the same (job, slot) had
// registered first.
//
// The fenced write uses fence/<job>@<slot_ms>, a file under flock: at its
// start a job raises the file's number to its attempt (never lowers it); at
// its end its write is accepted only if the number still equals its
// attempt.
type Record struct {
	Job      string
	SlotMs   int64
	Attempt  int
	Token    string
	Instance string
	StartMs  int64
	EndMs    int64  // 0 in a start record
	Exit     int    // -1 in a start record
	Fence    string // "-" in a start record, else "ok" or "rejected"
}
