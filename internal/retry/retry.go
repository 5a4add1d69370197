// Package retry re-sends a store operation after each transport error
// until it is answered.
package retry

import (
	"context"
	"errors"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

// Policy calls a store operation again after each transport error, with a
// doubling backoff, until it is answered. The runner records results and
// releases leases with it, the scheduler settles its stop and records
// notes with it.
type Policy struct {
	Clock clock.Clock
	// PerCall bounds each call: a request stuck on a connection whose
	// replies are lost must not use up the caller's window; the next call
	// gets a fresh connection. The backoff never exceeds it.
	PerCall time.Duration
	// Min and Max bound the backoff between calls.
	Min, Max time.Duration
	// GiveUp, when closed, ends the retries after the call in flight.
	GiveUp <-chan struct{}
	// OnFailure, if set, is called with each error that is retried and the
	// number of the call that failed (from 1).
	OnFailure func(call int, err error)
}

// Do calls op until it succeeds, fails for good (claim.ErrFenced,
// claim.ErrNotFound, a claim.PermanentError), ctx ends or GiveUp is closed; it returns how many calls it made and the
// last call's error. The caller bounds the whole by ctx.
func (r Policy) Do(ctx context.Context, op func(context.Context) error) (int, error) {
	backoff := r.Min
	for call := 1; ; call++ {
		cctx, cancel := clock.WithTimeout(ctx, r.Clock, r.PerCall)
		err := op(cctx)
		cancel()
		if err == nil || errors.Is(err, claim.ErrFenced) || errors.Is(err, claim.ErrNotFound) || claim.IsPermanent(err) {
			return call, err
		}
		if r.OnFailure != nil {
			r.OnFailure(call, err)
		}
		t := r.Clock.NewTimer(backoff)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return call, err
		case <-r.GiveUp:
			t.Stop()
			return call, err
		}
		backoff = min(2*backoff, r.Max, r.PerCall)
	}
}
