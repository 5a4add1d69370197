// Package supervise is the supervising parent of a job (SPEC §4): the
// process the runner starts as the leader of the job's process group, with
// the parent-death signal, so that a daemon killed even by SIGKILL takes the
// whole group, grandchildren included, down with it.
//
// It runs once per job start, so its start-up is on every job's start lag:
// this package and its small binary, cmd/anarchon-supervise, import nothing
// but the standard library (a test keeps it so). The daemon's own binary
// also serves as the supervisor (`anarchond supervise -- <argv...>`) when
// anarchon-supervise is not installed beside it, at the cost of its package
// initialisation (prometheus, the store clients, cobra...) on every start.
//
// The runner (internal/runner) imports this package for the instructions it
// passes (Env, Spec) and the exit codes; this package imports nothing of the
// daemon's.
package supervise

// Env carries the supervisor's instructions (a JSON Spec) from the runner to
// Main; the supervisor removes it before it starts the job.
const Env = "ANARCHON_SUPERVISE"

// Spec is what the supervisor needs besides the job's argv.
type Spec struct {
	// Parent is the daemon's pid: when the supervisor's parent is no longer
	// this process, the daemon is gone and the group is killed.
	Parent int `json:"parent"`
	// Dir is the job's working directory ("": the supervisor's).
	Dir string `json:"dir,omitempty"`
	// UID, GID and Groups, when UID is set, are the credentials the job runs
	// with.
	UID    *uint32  `json:"uid,omitempty"`
	GID    uint32   `json:"gid,omitempty"`
	Groups []uint32 `json:"groups,omitempty"`
}

// Exit codes of the supervisor besides the job's own (those of the shell).
const (
	ExitMisuse        = 125 // the supervisor was misused
	ExitCannotExecute = 126 // the job's program could not be started
	ExitNotFound      = 127 // the job's program does not exist
)

// prefix starts the supervisor's own messages, which end up in the job's
// output tail.
const prefix = "anarchon-supervise: "
