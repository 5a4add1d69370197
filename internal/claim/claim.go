// Package claim defines the one atomic decision per run (job, slot) that every
// store makes for anarchon, and the registry of the stores that can make it.
//
// A Backend decides claims. A lease backend (sqlite, postgres, redis lease)
// is also a Leaser: the winner holds the run under a lease that it renews,
// and every write after the claim is fenced by the winner's token.
package claim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Outcome is the answer to a claim.
type Outcome string

// The outcomes of docs/spec.md#s1.
const (
	Won     Outcome = "won"     // the caller runs the job (Result.Attempt)
	Lost    Outcome = "lost"    // another instance claimed it (claim-only backends)
	Running Outcome = "running" // another instance holds a live lease
	Done    Outcome = "done"    // finished, or interrupted with no attempts left
	Late    Outcome = "late"    // nobody claimed it and now - slot > maxLate
	Overlap Outcome = "overlap" // another run of the job holds a live lease and overlap is exclusive (skip, replace, queue)
	Unknown Outcome = "unknown" // the store gave no decision (RabbitMQ): skipped
)

// Status is the state of a run as the store keeps it.
type Status string

// Run states. Every state but Running is final.
const (
	StatusRunning     Status = "running"
	StatusSucceeded   Status = "succeeded"
	StatusFailed      Status = "failed"
	StatusTimeout     Status = "timeout"
	StatusInterrupted Status = "interrupted"
	// StatusReplaced: the attempt was stopped because the job's next slot
	// came while it ran (overlap: replace, docs/spec.md#s3-1-replace); the
	// runner records it with the stopped command's exit code.
	StatusReplaced Status = "replaced"
	// The outcomes of a slot that no attempt ran, recorded by a Recorder
	// (docs/spec.md#s6-outcomes): skipped (overlap: the job's previous run
	// held it; paused: docs/spec.md#s6-control; drift:
	// docs/spec.md#s6-cluster), missed (late, the store unreachable, every instance down,
	// the catch-up policy) and unknown (the store gave no decision).
	StatusSkipped Status = "skipped"
	StatusMissed  Status = "missed"
	StatusUnknown Status = "unknown"
)

// RunStatuses are the states of runs that an attempt claimed: what status
// shows by default.
var RunStatuses = []Status{StatusRunning, StatusSucceeded, StatusFailed, StatusTimeout, StatusInterrupted, StatusReplaced}

// NoteStatuses are the outcomes of slots that no attempt ran.
var NoteStatuses = []Status{StatusSkipped, StatusMissed, StatusUnknown}

// Noted reports whether s is the outcome of a slot no attempt ran.
func (s Status) Noted() bool {
	return s == StatusSkipped || s == StatusMissed || s == StatusUnknown
}

// Final reports whether s ends a run.
func (s Status) Final() bool { return s != StatusRunning && s != "" }

// OverlapPolicy says whether a job's runs may overlap.
type OverlapPolicy string

// Overlap policies (docs/spec.md#s3-1). Replace and queue are decided in
// the store exactly as skip (a slot that finds another live run of the job
// is answered overlap); they differ in what the instances do around that
// answer: under replace the running attempt stops its command at the
// job's next slot, and under queue a slot answered overlap waits for the
// running one until the job's next slot, past maxLate.
const (
	OverlapSkip    OverlapPolicy = "skip"
	OverlapAllow   OverlapPolicy = "allow"
	OverlapReplace OverlapPolicy = "replace"
	OverlapQueue   OverlapPolicy = "queue"
)

// Exclusive reports whether p keeps two runs of a job from running at
// once: the store answers overlap to a slot that finds another live run
// of the job (skip, replace, queue; not allow).
func (p OverlapPolicy) Exclusive() bool {
	return p == OverlapSkip || p == OverlapReplace || p == OverlapQueue
}

// Token is a random 128-bit value in hex, fresh for every claim attempt.
type Token string

// NewToken returns a fresh random token.
func NewToken() Token {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return Token(hex.EncodeToString(b[:]))
}

// Short is the token prefix written to logs.
func (t Token) Short() string {
	if len(t) > 8 {
		return string(t[:8])
	}
	return string(t)
}

// Request is one claim of the run (Job, Slot).
type Request struct {
	Job         string
	Slot        int64 // ms since the Unix epoch, UTC
	Token       Token
	Instance    string
	MaxLate     time.Duration
	Lease       time.Duration // lease backends
	MaxAttempts int           // lease backends
	Overlap     OverlapPolicy // lease backends
	// Now is the instance's clock. Lease backends ignore it and decide with
	// the store's time; claim-only backends use it for their late check.
	Now time.Time
}

// SlotTime returns the slot as a time.Time in UTC.
func (r Request) SlotTime() time.Time { return time.UnixMilli(r.Slot).UTC() }

// Fence names the attempt that a write after a claim belongs to.
func (r Request) Fence(attempt int) Fence {
	return Fence{Job: r.Job, Slot: r.Slot, Token: r.Token, Attempt: attempt}
}

// Result is the answer to a claim.
type Result struct {
	Outcome Outcome
	Attempt int // with Won: the attempt the caller runs
	// StoreNow is the store's clock at the decision (lease backends; zero
	// where the store has no clock of its own).
	StoreNow time.Time
	// LeaseUntil is the lease's end in store time, with Won or Running.
	LeaseUntil time.Time
	// Holder is the instance that holds the run (Running), ran it to its
	// end (Done, not interrupted) or won it (Lost), where the store says
	// (lease backends; NATS, whose loser reads the stored claim); empty
	// otherwise. The work spread learns its peers from it.
	Holder string
}

// Fence is the proof of ownership every write after a claim carries.
type Fence struct {
	Job     string
	Slot    int64
	Token   Token
	Attempt int
}

func (f Fence) String() string { return fmt.Sprintf("%s@%d#%d", f.Job, f.Slot, f.Attempt) }

// Finish is the outcome of an execution, as recorded by Backend.Finish.
type Finish struct {
	// Status is succeeded, failed or timeout; or interrupted when a
	// claim-only backend's run was stopped by the daemon's shutdown (no
	// backup will ever run it).
	Status     Status
	ExitCode   int
	OutputTail string
	// StartedAt and FinishedAt are the runner's clock; lease backends keep
	// their own store-time stamps and use these only where they have none.
	StartedAt  time.Time
	FinishedAt time.Time
}

// Run is what a store remembers of one run, for status and for backups.
type Run struct {
	Job        string
	Slot       int64
	Status     Status
	Attempt    int
	Instance   string
	Token      Token
	StartedAt  time.Time
	FinishedAt time.Time // zero while running
	LeaseUntil time.Time // zero on claim-only backends
	ExitCode   *int      // nil while running or when interrupted
	OutputTail string
	// Reason says why a slot no attempt ran was not run (Status.Noted):
	// overlap, paused, drift, late, store_unreachable, store_refused, all_down,
	// catch_up, no_decision.
	Reason string
	// HeldBy is, for a slot skipped for overlap, the slot (ms) of the run
	// of the job that held it; 0 otherwise or when not known.
	HeldBy int64
	// Kind, RequestedBy and RetryOf say how a run asked for outside the
	// schedule came about (docs/spec.md#s6-trigger): TriggerManual or
	// TriggerRetry, who asked, and for a retry the slot it retries. No
	// store keeps them: status fills them in from the jobs' control
	// records; "" is a slot of the schedule.
	Kind        string
	RequestedBy string
	RetryOf     int64
}

// SlotTime returns the slot as a time.Time in UTC.
func (r Run) SlotTime() time.Time { return time.UnixMilli(r.Slot).UTC() }

// Duration is FinishedAt - StartedAt, or 0 while running.
func (r Run) Duration() time.Duration {
	if r.FinishedAt.IsZero() || r.StartedAt.IsZero() {
		return 0
	}
	return r.FinishedAt.Sub(r.StartedAt)
}

// ListQuery selects runs for status: newest slots first.
type ListQuery struct {
	Job   string // empty: every job
	Limit int    // <= 0: a backend default of 50
	// Statuses, when not empty, selects the runs in one of these states;
	// the limit counts the selected runs only.
	Statuses []Status
}

// Wants reports whether q selects a run in state s.
func (q ListQuery) Wants(s Status) bool {
	if len(q.Statuses) == 0 {
		return true
	}
	for _, w := range q.Statuses {
		if w == s {
			return true
		}
	}
	return false
}

// Note is the recorded outcome of a slot that no attempt ran.
type Note struct {
	Job    string
	Slot   int64  // ms since the Unix epoch, UTC
	Status Status // StatusSkipped, StatusMissed or StatusUnknown
	Reason string // Run.Reason
	HeldBy int64  // Run.HeldBy
	// Instance is the instance that recorded it; At is when, by its clock
	// (lease backends may stamp their own time instead).
	Instance string
	At       time.Time
}

// Check refuses a note a store should not record.
func (n Note) Check() error {
	switch {
	case n.Job == "":
		return errors.New("note: empty job name")
	case !n.Status.Noted():
		return fmt.Errorf("note of %s@%d: status %q is not skipped, missed or unknown", n.Job, n.Slot, n.Status)
	case n.Reason == "":
		return fmt.Errorf("note of %s@%d: empty reason", n.Job, n.Slot)
	}
	return nil
}

// Run is the note as the run status shows: finished at At, no attempt.
func (n Note) Run() Run {
	return Run{
		Job: n.Job, Slot: n.Slot, Status: n.Status, Instance: n.Instance,
		FinishedAt: n.At, Reason: n.Reason, HeldBy: n.HeldBy,
	}
}

// Sentinel errors callers branch on.
var (
	// ErrFenced: the write's token is not the run's current token, or the run
	// is no longer running. The caller has lost the run.
	ErrFenced = errors.New("fenced: the run belongs to another attempt")
	// ErrNotFound: the store has no such run.
	ErrNotFound = errors.New("run not found")
	// ErrRunLost: a fenced write found that the store no longer holds the
	// writer's claim at all: the run's record is gone, or the slot was
	// claimed anew (a note, or a claim whose attempt is not later than the
	// writer's). The store lost the claim (a failover to a replica that
	// had not received it, a restore, a restart without persistence);
	// no backup took it over. errors.Is(ErrRunLost, ErrFenced) holds: the
	// caller has lost the run either way.
	ErrRunLost error = runLost{}
)

// runLost is ErrRunLost: a kind of ErrFenced with its own message.
type runLost struct{}

func (runLost) Error() string {
	return "fenced: the store has lost this attempt's claim (no record of it, or the slot claimed anew); no backup took it over"
}

// Is makes ErrRunLost an ErrFenced.
func (runLost) Is(target error) bool { return target == ErrFenced }

// Backend decides claims and records results.
type Backend interface {
	// Claim makes the atomic decision for req. An error means no answer
	// arrived (transport failure): the caller re-sends with the same token;
	// except a PermanentError, a refusal no re-send changes (a missing
	// privilege, a wrong password), which the caller reports and does not
	// re-send. Every method classifies its errors the same way.
	Claim(ctx context.Context, req Request) (Result, error)
	// Finish records the result of the attempt f. Lease backends fence it
	// and return ErrFenced when f is no longer the run's owner.
	Finish(ctx context.Context, f Fence, fin Finish) error
	// ListRuns returns recent runs, newest slot first.
	ListRuns(ctx context.Context, q ListQuery) ([]Run, error)
	// Close releases the store's connections.
	Close() error
}

// Batcher is a backend that decides many claims in one round trip to its
// store: claims of slots that fall due at the same instant go together.
// Each request of a batch is decided exactly as Claim would decide it
// alone, in the order given (a later request sees what an earlier one
// wrote), with every per-run guarantee of Claim.
type Batcher interface {
	Backend
	// ClaimBatch decides reqs and returns their results in the same
	// order. An error means that no answer arrived for any of them: the
	// caller re-sends each with its same token (docs/spec.md#s3-3). A request
	// the backend refuses as malformed fails the whole batch before anything
	// is sent.
	ClaimBatch(ctx context.Context, reqs []Request) ([]Result, error)
}

// Preparer is a backend whose claims cost less when the store is readied
// for a run before its slot (RabbitMQ declares the run's gate queue). The
// scheduler calls Prepare once per instance and slot, PrepareLead before
// the slot's claim is due, and never waits for it: a claim decides the
// same with or without it, and the same when the preparation failed or
// was undone (the gate expired or was deleted).
type Preparer interface {
	Backend
	// PrepareLead is how long before a slot's claim its preparation is
	// sent.
	PrepareLead() time.Duration
	// Prepare readies the store for the claims of (job, slot). It is
	// idempotent; several instances prepare the same run.
	Prepare(ctx context.Context, job string, slot int64) error
}

// Leaser is a backend whose winners hold leases.
type Leaser interface {
	Backend
	// Renew extends f's lease to store now + lease. ErrFenced when another
	// token owns the run or it is no longer running.
	Renew(ctx context.Context, f Fence, lease time.Duration) (Result, error)
	// Release ends f's lease now, so that a backup may take over at once.
	Release(ctx context.Context, f Fence) error
	// Read is the cheap read of a run, with no lock or transaction; it
	// returns ErrNotFound when the store has none. The time returned is the
	// store's clock at the read.
	Read(ctx context.Context, job string, slot int64) (Run, time.Time, error)
}

// Recorder is a backend that records the slots no attempt ran, so that
// every slot of a job ends in one outcome status can show
// (docs/spec.md#s6-outcomes).
type Recorder interface {
	Backend
	// Record stores n as the run (n.Job, n.Slot) unless the store already
	// has one: a claim or an earlier note of the slot wins, and Record
	// reports false. A recorded note is final: a later claim of the slot
	// is answered done (lease backends) or lost (claim-only backends), and
	// ListRuns returns it like a run, finished, with no attempt. Several
	// instances record the same note; one write stands.
	Record(ctx context.Context, n Note) (bool, error)
}

// Pruner is a backend that forgets finished runs older than a given age.
type Pruner interface {
	// Prune deletes runs whose slot is older than store now - olderThan and
	// that are finished or whose lease ended before that; it returns how
	// many it deleted.
	Prune(ctx context.Context, olderThan time.Duration) (int64, error)
}

// CountPruner is a backend that keeps at most a number of each job's
// newest slots (keepRuns, docs/spec.md#s6-keep-runs).
type CountPruner interface {
	// PruneKeep deletes job's runs and notes that are not among its keep
	// newest slots, whose slot is older than store now - olderThan, and
	// that are not running (a running run is never deleted, whatever its
	// lease), with their history; it returns how many it deleted. keep
	// must be at least 1, and olderThan must exceed the job's maxLate: a
	// pruned slot that is not yet late would be won again.
	PruneKeep(ctx context.Context, job string, keep int, olderThan time.Duration) (int64, error)
}

// CheckKeep refuses the arguments of a PruneKeep no store should act on.
func CheckKeep(job string, keep int, olderThan time.Duration) error {
	switch {
	case job == "":
		return errors.New("prune keep: empty job name")
	case keep < 1:
		return fmt.Errorf("prune keep %s: keep %d is less than 1", job, keep)
	case olderThan < 0:
		return fmt.Errorf("prune keep %s: negative age %v", job, olderThan)
	}
	return nil
}
