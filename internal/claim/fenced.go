package claim

import (
	"context"
	"errors"
	"time"
)

// Reader is the cheap read of a run, as Leaser.Read.
type Reader func(ctx context.Context, job string, slot int64) (Run, time.Time, error)

// Fenced says why the store refused a fenced write of f (its token no
// longer owns a running run), from a read of the run made after the
// refusal: ErrRunLost when the store no longer holds f's claim at all (no
// run, a note, or a run claimed anew by an attempt no later than f's; a
// takeover always has a later attempt), ErrFenced when another attempt
// took the run over or the run has ended. A read that fails leaves
// ErrFenced. Lease backends call it on the refusal's path only, so a
// write that succeeds costs no read.
func Fenced(ctx context.Context, read Reader, f Fence) error {
	r, _, err := read(ctx, f.Job, f.Slot)
	switch {
	case errors.Is(err, ErrNotFound):
		return ErrRunLost
	case err != nil:
		return ErrFenced
	}
	return FencedBy(f, &r)
}

// FencedBy is Fenced for a run already read: r is what the store holds of
// (f.Job, f.Slot), nil for nothing.
func FencedBy(f Fence, r *Run) error {
	switch {
	case r == nil, r.Status.Noted():
		// A note is only ever written where the slot had no run.
		return ErrRunLost
	case r.Token != f.Token && r.Attempt <= f.Attempt:
		return ErrRunLost
	}
	return ErrFenced
}

// Recorded reports whether r, the run a Finish of f found not running,
// already holds that Finish's result (status, exit code, output tail as
// the store keeps it) from f's own token: an earlier copy of the same
// Finish was stored and its answer lost (a connection cut, a failover
// after the commit reached the standby). The re-sent Finish has then
// succeeded, and is not fenced.
func Recorded(f Fence, fin Finish, r *Run) bool {
	if r == nil || r.Token != f.Token || r.Status != fin.Status || r.OutputTail != fin.OutputTail {
		return false
	}
	if fin.Status == StatusInterrupted {
		return true // no exit code to compare
	}
	return r.ExitCode != nil && *r.ExitCode == fin.ExitCode
}
