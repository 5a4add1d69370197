package runner

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/anarchon/anarchon/internal/clock"
)

// fenceMargin is the part of a lease the runner never counts on: the
// heartbeat fences itself when no renewal succeeded for lease - margin, and
// a command is not forked with less than margin of its lease left.
func fenceMargin(lease time.Duration) time.Duration { return lease / 5 }

// startGate is the lease check around a job's fork: the last one before the
// command runs, made as late as the daemon can make it. On a starved
// machine the fork itself can take seconds (the claim answered late, the
// daemon's threads waiting for a CPU), so a check at the start of Run is
// not enough: just before the fork at least the fencing margin of the
// lease must be left, and once the exec has completed the lease must still
// be running, else the process group is SIGKILLed at once and the attempt
// counts as fenced. A zero leaseEnd (claim-only backends, no lease) lets
// every fork through.
type startGate struct {
	clk      clock.Clock
	leaseEnd time.Time // on clk; zero: no lease
	margin   time.Duration
	// beforeFork and afterFork, set by tests, run just before the last
	// check and just after the exec: a slow fork, simulated on a fake clock.
	beforeFork, afterFork func()
}

// fork starts cmd unless the lease is nearly over; late reports an exec
// that completed after the lease ended, its group already SIGKILLed. An
// error wrapping ErrLeaseLost means nothing was started.
func (g startGate) fork(cmd *exec.Cmd) (late bool, err error) {
	if g.beforeFork != nil {
		g.beforeFork()
	}
	if !g.leaseEnd.IsZero() {
		if left := g.leaseEnd.Sub(g.clk.Now()); left < g.margin {
			return false, fmt.Errorf("%w: %v of the lease left when the job was due to fork, under the fencing margin of %v",
				ErrLeaseLost, left.Round(time.Millisecond), g.margin)
		}
	}
	if err := cmd.Start(); err != nil {
		return false, err
	}
	if g.afterFork != nil {
		g.afterFork()
	}
	if g.leaseEnd.IsZero() || g.clk.Now().Before(g.leaseEnd) {
		return false, nil
	}
	// The job leads its own process group (jobAttr, supervisorAttr).
	_ = signalGroup(cmd.Process.Pid, syscall.SIGKILL)
	return true, nil
}
