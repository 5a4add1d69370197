// Package runner runs one won attempt of a job (docs/spec.md#s4,
// docs/spec.md#s6-jobs). It forks the command, streams the command's output
// into the log, heartbeats the lease on lease backends, stops the command
// when the attempt is fenced, times out or the daemon stops, and records the
// result fenced by the attempt's token.
//
// # Process tree
//
// The daemon starts one job guard (Guard: the small anarchon-supervise
// binary, or the hidden `anarchond supervise` command as the fallback, with
// --guard; both run internal/supervise). The runner then starts each job
// itself as the leader of a new process group, with the parent-death signal
// SIGKILL, and tells the guard of the group through a pipe whose write end
// only the daemon holds. If the daemon dies, even by SIGKILL, the guard reads
// EOF and SIGKILLs every group still listed, grandchildren included. A job's
// start costs the fork of the job alone: no process of anarchon's starts
// with it.
//
// Without a guard (Runner.Guard nil: the daemon could not start one), the
// runner starts each job under a supervisor of its own (Runner.Supervisor),
// the leader of the job's group, with the parent-death signal SIGTERM: when
// the daemon dies it sees that its parent is gone and SIGKILLs the group.
//
// Either way, every stop by the daemon (timeout, fencing, shutdown) signals
// the whole group: SIGTERM, then SIGKILL after the job's killGrace. When the
// group's leader exits, whatever is left in the group (background processes
// the job did not wait for) is SIGKILLed before the result is recorded: no
// process of an attempt outlives its result. A process that leaves the group
// (setsid, setpgid) escapes all of this; the runner then stops waiting for
// its output after 5 s.
//
// # Decisions
//
//   - Exit codes follow the shell: a command killed by signal N exits 128+N.
//     A timed-out command therefore usually reports 143 (it died of the
//     SIGTERM) or 137 (it needed the SIGKILL), or its own code if it handled
//     the SIGTERM and exited; the status is timeout in every case.
//   - A command that cannot be started (unknown user, `user:` while the daemon
//     is not root, missing workdir, no supervisor) is recorded as failed with
//     exit code -1, the error as its output tail, and Report.Err set. A job
//     whose program is not found (in the PATH of the job's environment) exits
//     127, one whose program cannot be executed 126, as in a shell (and a
//     misused supervisor 125); those are recorded as ordinary failures with
//     that code, the message in the output tail.
//   - `user:`: when the daemon runs as root the job starts with the user's
//     uid, gid and supplementary groups (chdir to the workdir happens as
//     that user); HOME, USER and LOGNAME are set to the
//     user's before the job's env: map. When the daemon is not root, a user
//     other than the daemon's own is an error; the daemon's own user is fine.
//   - Self-fencing margin: Lease/5. With no successful renewal for
//     Lease - Lease/5 (24 s of the default 30 s lease) the runner stops the
//     command, and the SIGKILL is sent no later than the moment the lease
//     could end (the grace is min(killGrace, what is left of the lease)), so
//     the command is gone before a backup can take the run over. Lease time
//     is measured from when the claim or renewal was sent (Execution.ClaimedAt,
//     the start of each Renew call), never from when the answer came.
//   - The last lease check is around the fork (startGate): no fork with
//     less than the self-fencing margin of the lease left, and a job whose
//     exec completed after its lease ended is SIGKILLed at once. Both are
//     fenced, as a lost lease is: nothing is recorded.
//   - Renewals run every Heartbeat (Lease/3 if unset); a failed one is retried
//     after Heartbeat/4; a renewal that has not answered by the next beat is
//     awaited, and a second one is sent beside it (two at most in flight,
//     the oldest cancelled; the first success counts). A store outage is logged once when it starts
//     (warn) and once when it ends (info).
//   - Hard stop (ctx cancelled): lease backends: the command is stopped and the
//     lease released so a backup takes over at once; nothing is recorded.
//     Claim-only backends never re-run a slot, so the run is recorded as
//     interrupted (claim.StatusInterrupted) with the exit code observed, so
//     that status shows what happened to it.
//   - Recording: Finish is retried with backoff (200 ms doubling to 5 s) for
//     max(30 s, Lease) after the command exited, or until the daemon's hard
//     stop; the heartbeat goes on meanwhile, so the lease stays held while the
//     result is being written. Releasing on a hard stop is retried for 5 s.
package runner

import (
	"context"
	"errors"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/retry"
)

// Hooks observe a runner.
type Hooks struct {
	// Started is called when the command has been forked.
	Started func(e Execution, at time.Time)
	// Renewed is called with every answered or failed lease renewal:
	// result is "ok", "failed" or "fenced"; res is the store's answer.
	Renewed func(result string, res claim.Result, err error)
	// StoreError is called with every failed call to the store after the
	// command started (op: renew, finish, release).
	StoreError func(op string, err error)
	// HookFailed is called when a job's hook (OnFailure, OnSuccess,
	// OnMissed) failed: it could not start, exited non-zero, or timed out.
	HookFailed func(job, hook string)
}

// Runner runs won attempts. One Runner serves every job of a daemon; Run is
// safe for concurrent use.
type Runner struct {
	// Backend records results (Finish). When it is also a claim.Leaser the
	// runner heartbeats the lease, fences itself, and releases on a hard stop.
	Backend claim.Backend
	// Clock times every wait of the runner (nil: clock.Real).
	Clock clock.Clock
	// Log receives the runner's own messages and the command's output
	// (nil: no logging).
	Log *zap.Logger
	// Instance is this daemon's instance id (ANARCHON_INSTANCE, logs).
	Instance string
	// Supervisor is the argv prefix that starts the supervising parent, e.g.
	// {"/usr/bin/anarchon-supervise", "--"} or, as the fallback,
	// {"/usr/bin/anarchond", "supervise", "--"}; the job's argv is appended.
	// The daemon picks it beside os.Executable() (cli.SupervisorCommand).
	Supervisor []string
	// Guard, when set, watches the jobs' process groups (StartGuard): the
	// runner then starts each job directly, without a supervisor.
	Guard *Guard
	// Records, when set, keeps a record of each running attempt's process
	// group in the daemon's state directory, so that the next daemon kills
	// what is left of it if this daemon and its guard die together.
	Records *Records
	// BaseEnv is the daemon's environment (os.Environ()). A job does not
	// start from it: it gets only the variables its inheritEnv names
	// (docs/spec.md#s6-jobs).
	BaseEnv []string
	// Hooks observe the runner (metrics); every field may be nil.
	Hooks Hooks

	// geteuid replaces os.Geteuid in tests of the root check.
	geteuid func() int
	// beforeFork and afterFork, in tests, run around each fork (startGate).
	beforeFork, afterFork func()
}

// Execution is one won attempt to run.
type Execution struct {
	Job   config.Job
	Fence claim.Fence
	// Slot is the run's slot in UTC; Fence.Slot (ms) is authoritative.
	Slot time.Time
	// LeaseUntil is the lease's end in store time, as the claim answered
	// (lease backends). It is logged only: store time is never compared with
	// the runner's clock.
	LeaseUntil time.Time
	// ClaimedAt is the runner clock's reading just before the winning claim
	// was first sent. The lease is counted from it, which is conservative: the
	// store started the lease after that. Zero: the time Run starts.
	ClaimedAt time.Time
	// Trigger is the trigger of a run asked for outside the schedule
	// (docs/spec.md#s6-trigger): a manual run or a retry; nil for a
	// slot of the schedule.
	Trigger *claim.Trigger
	// Replace, set for a job with overlap: replace, is the job's slot
	// clock: the command is stopped at the job's next slot that is to run
	// and the run recorded replaced. Nil: never.
	Replace Replacer
}

// Report is the outcome of Run.
type Report struct {
	// Status is the run's outcome: succeeded, failed, timeout or replaced; interrupted
	// for a hard stop on a claim-only backend; "" when the command was stopped
	// because the attempt was fenced, lost its lease or the daemon stopped on
	// a lease backend. A command that finished but whose result was fenced at
	// Finish keeps its status, with Fenced set.
	Status claim.Status
	// ExitCode is the command's exit code as observed (128+N when killed by
	// signal N), -1 when it did not start.
	ExitCode int
	// Fenced: another attempt owns the run (a renewal or Finish answered
	// claim.ErrFenced), or the runner fenced itself after losing the store
	// for the lease (Err is then ErrLeaseLost). Nothing was recorded.
	Fenced bool
	// Released: the lease was released after a hard stop.
	Released bool
	// Recorded: Finish stored the result.
	Recorded bool
	// Duration is how long the command ran.
	Duration time.Duration
	// OutputTail is the tail of the command's output, as recorded (set
	// when Status is).
	OutputTail string
	// Err says what went wrong, if anything did: the command could not start,
	// the attempt was fenced or stopped, or the result could not be recorded.
	Err error
}

// Errors in Report.Err that callers may branch on (with errors.Is); fencing
// by another attempt wraps claim.ErrFenced.
var (
	// ErrLeaseLost: the store was unreachable for so long that the lease may
	// have ended; the runner stopped the command and recorded nothing.
	ErrLeaseLost = errors.New("store unreachable for the lease; fenced myself")
	// ErrStopped: the daemon's hard stop (ctx cancelled) ended the command.
	ErrStopped = errors.New("stopped by the daemon's shutdown")
)

const (
	maxLineBytes   = 64 << 10         // longer output lines are logged in pieces
	drainTimeout   = 5 * time.Second  // wait for output held open by escaped processes
	recordWindow   = 30 * time.Second // least time Finish is retried for
	releaseWindow  = 5 * time.Second  // time Release is retried for on a hard stop
	backoffMin     = 200 * time.Millisecond
	backoffMax     = 5 * time.Second
	notStartedCode = -1
)

// Run executes e and blocks until the command has exited and its result is
// recorded, or the attempt was fenced, or (after ctx is cancelled: the hard
// stop at the end of the daemon's shutdown grace) the command is stopped and
// the lease released.
func (r *Runner) Run(ctx context.Context, e Execution) Report {
	a := r.newAttempt(ctx, e)
	if rep, ok := a.prepare(); !ok {
		return rep
	}
	if rep, ok := a.fork(); !ok {
		return rep
	}
	a.startHeartbeat()
	defer a.stopHeartbeat()
	a.supervise()
	return a.settle()
}

// observeRenewal passes a renewal's outcome to the hooks.
func (r *Runner) observeRenewal(res claim.Result, err error) {
	result := "ok"
	switch {
	case errors.Is(err, claim.ErrFenced):
		result = "fenced"
	case err != nil:
		result = "failed"
		if r.Hooks.StoreError != nil {
			r.Hooks.StoreError("renew", err)
		}
	}
	if r.Hooks.Renewed != nil {
		r.Hooks.Renewed(result, res, err)
	}
}

// statusOf is the status of a command that exited with code.
func statusOf(code int) claim.Status {
	if code != 0 {
		return claim.StatusFailed
	}
	return claim.StatusSucceeded
}

// killedBy reports whether an exit code is a death by one of sigs (the
// supervisor reports a job killed by signal n as 128+n, as shells do).
func killedBy(code int, sigs ...syscall.Signal) bool {
	for _, sig := range sigs {
		if code == 128+int(sig) {
			return true
		}
	}
	return false
}

// retryStore calls op until it succeeds or fails for good (claim.ErrFenced,
// claim.ErrNotFound, a claim.PermanentError), retrying other errors with backoff on clk for window,
// or until giveUp is closed. onFirstFailure is called once, at the first
// retried error. The calls run under ctx without its cancellation: retryStore is
// used after the daemon's hard stop too. Between calls it never waits
// longer than one call may take: the lease keeps running while the result
// waits to be recorded.
func retryStore(ctx context.Context, clk clock.Clock, window, perCall time.Duration, giveUp <-chan struct{}, op func(context.Context) error, onFirstFailure func(error)) (int, error) {
	wctx, cancel := clock.WithTimeout(context.WithoutCancel(ctx), clk, window)
	defer cancel()
	return retry.Policy{
		Clock: clk, PerCall: perCall, Min: backoffMin, Max: backoffMax, GiveUp: giveUp,
		OnFailure: func(call int, err error) {
			if call == 1 {
				onFirstFailure(err)
			}
		},
	}.Do(wctx, op)
}

// callTimeout bounds one call to the store after the command: two
// heartbeats, at least two seconds (a new connection over a slow network
// takes several round trips).
func callTimeout(j config.Job) time.Duration { return max(2*j.Heartbeat, 2*time.Second) }

// fields are the zap fields every message about the attempt carries.
func (r *Runner) fields(e Execution) []zap.Field {
	slot, _ := slotOf(e)
	return []zap.Field{
		zap.String("job", jobName(e)),
		zap.String("slot", slotString(slot)),
		zap.Int("attempt", e.Fence.Attempt),
		zap.String("instance", r.Instance),
		zap.String("token", e.Fence.Token.Short()),
	}
}

// slotOf returns the run's slot in UTC and in ms since the epoch.
func slotOf(e Execution) (time.Time, int64) {
	ms := e.Fence.Slot
	if ms == 0 && !e.Slot.IsZero() {
		ms = e.Slot.UnixMilli()
	}
	return time.UnixMilli(ms).UTC(), ms
}

// slotString formats a slot in RFC 3339, UTC, with milliseconds only when
// the slot has them: 2027-03-28T01:00:00Z, 2027-03-28T01:00:00.250Z.
func slotString(t time.Time) string {
	if t.Nanosecond() != 0 {
		return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return t.UTC().Format(time.RFC3339)
}

// jobName is the job's name: the crontab's, or else the fence's.
func jobName(e Execution) string {
	if e.Job.Name != "" {
		return e.Job.Name
	}
	return e.Fence.Job
}
