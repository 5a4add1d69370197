// Package supervise keeps the processes of a daemon's jobs from outliving
// the daemon (docs/spec.md#s4-processes): a daemon killed even by SIGKILL
// takes each job's whole process group, grandchildren included, down with it.
// It holds the two programs that do it:
//
//   - the job guard (Guard, `--guard`): one process per daemon, told of each
//     job's process group by the daemon through a pipe; EOF on that pipe is
//     the daemon's death, and the guard kills every group still listed. The
//     daemon runs one, and starts its jobs directly;
//   - the supervisor (Main): one process per job, the leader of the job's
//     group with the parent-death signal; the daemon starts its jobs under
//     it when it has no guard.
//
// Both come in the small binary cmd/anarchon-supervise, which imports
// nothing but the standard library (a test keeps it so), and in the daemon's
// own binary (`anarchond supervise …`) when anarchon-supervise is not
// installed beside it.
//
// The runner (internal/runner) imports this package for the instructions it
// passes (Env, Spec) and the exit codes; this package imports nothing of the
// daemon's.
package supervise

import (
	"errors"
	"io/fs"
	"os/exec"
)

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

// GuardFlag is the argument that, alone, makes Main the daemon's job guard.
const GuardFlag = "--guard"

// Exit codes of the supervisor besides the job's own (those of the shell).
const (
	ExitMisuse        = 125 // the supervisor was misused
	ExitCannotExecute = 126 // the job's program could not be started
	ExitNotFound      = 127 // the job's program does not exist
)

// prefix starts the supervisor's own messages, which end up in the job's
// output tail.
const prefix = "anarchon-supervise: "

// StartFailureCode is the shell's exit code for a job whose program could
// not be started with err: ExitNotFound when it does not exist,
// ExitCannotExecute otherwise.
func StartFailureCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return ExitNotFound
	}
	return ExitCannotExecute
}
