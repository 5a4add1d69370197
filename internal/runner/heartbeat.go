package runner

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

// hbEvent ends a heartbeat: the attempt was fenced (err wraps
// claim.ErrFenced), or the lease may run out with no renewal (err nil).
type hbEvent struct {
	err      error
	renewed  time.Time // when the last successful renewal (or the claim) was sent
	leaseEnd time.Time // the earliest the lease may end, on the runner's clock
}

// heartbeat keeps an attempt's lease (SPEC §4): it renews every interval,
// retries failed renewals sooner, and sends one hbEvent when the attempt is
// fenced or when no renewal has succeeded for lease - margin.
type heartbeat struct {
	leaser   claim.Leaser
	clk      clock.Clock
	log      *zap.Logger
	fence    claim.Fence
	lease    time.Duration
	interval time.Duration
	retry    time.Duration
	margin   time.Duration
	events   chan hbEvent // buffered: one event, then run returns
}

// newHeartbeat returns the heartbeat of fence's lease; interval <= 0 means
// lease/3.
func newHeartbeat(l claim.Leaser, clk clock.Clock, log *zap.Logger, fence claim.Fence, lease, interval time.Duration) *heartbeat {
	if interval <= 0 {
		interval = lease / 3
	}
	interval = max(interval, time.Millisecond)
	return &heartbeat{
		leaser: l, clk: clk, log: log, fence: fence, lease: lease,
		interval: interval,
		retry:    max(interval/4, time.Millisecond),
		margin:   lease / 5,
		events:   make(chan hbEvent, 1),
	}
}

type renewResult struct {
	res   claim.Result
	err   error
	start time.Time
}

// run heartbeats until ctx is done or it has sent its event. anchor is when
// the claim was sent: the lease is counted from there.
func (h *heartbeat) run(ctx context.Context, anchor time.Time) {
	renewed := anchor
	leaseEnd := anchor.Add(h.lease)
	guard := h.clk.NewTimer(leaseEnd.Add(-h.margin).Sub(h.clk.Now()))
	defer guard.Stop()
	// beat fires the next renewal; while a renewal is in flight it bounds it.
	beat := h.clk.NewTimer(h.interval)
	defer beat.Stop()
	var (
		results       chan renewResult // nil: no renewal in flight
		cancelCall    context.CancelFunc
		downSince     time.Time // zero while the store answers
		failures      int
		inFlightSince time.Time // when the renewal in flight was sent
	)
	// A renewal still in flight is cancelled and awaited, so that none lands
	// after run returns (it would take back a released lease).
	defer func() {
		if results != nil {
			cancelCall()
			<-results
		}
	}()
	failed := func(err error) {
		failures++
		now := h.clk.Now()
		if downSince.IsZero() {
			downSince = now
			h.log.Warn("store unreachable: lease renewal failed; retrying", zap.Error(err),
				zap.Duration("lease_left", leaseEnd.Sub(now)))
		}
		h.log.Debug("lease renewal failed", zap.Error(err), zap.Int("failures", failures))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-guard.C():
			h.events <- hbEvent{renewed: renewed, leaseEnd: leaseEnd}
			return
		case <-beat.C():
			if ctx.Err() != nil {
				return
			}
			if results != nil {
				// A slow store (a busy disk, a long lock wait) answers
				// late but answers: the renewal still counts from when it
				// was sent, so keep waiting for it. Only one silent for
				// half the lease is abandoned and sent again (its request
				// or reply may be lost); its goroutine ends when the
				// backend honours the cancellation.
				if h.clk.Now().Sub(inFlightSince) < h.lease/2 {
					beat.Reset(h.interval)
					continue
				}
				cancelCall()
				failed(errors.New("lease renewal got no answer within half the lease"))
			}
			callCtx, cancel := context.WithCancel(ctx)
			cancelCall = cancel
			ch := make(chan renewResult, 1)
			results = ch
			start := h.clk.Now()
			inFlightSince = start
			go func() {
				res, err := h.leaser.Renew(callCtx, h.fence, h.lease)
				ch <- renewResult{res: res, err: err, start: start}
			}()
			beat.Reset(h.interval)
		case rr := <-results:
			results = nil
			cancelCall()
			if ctx.Err() != nil {
				return
			}
			if errors.Is(rr.err, claim.ErrFenced) {
				h.events <- hbEvent{err: rr.err, renewed: renewed, leaseEnd: leaseEnd}
				return
			}
			if rr.err != nil {
				beat.Reset(h.retry)
				failed(rr.err)
				continue
			}
			// The store set the lease at or after rr.start.
			end := rr.start.Add(h.lease)
			if left := rr.res.LeaseUntil.Sub(rr.res.StoreNow); !rr.res.LeaseUntil.IsZero() &&
				!rr.res.StoreNow.IsZero() && left < h.lease {
				end = rr.start.Add(left)
			}
			renewed, leaseEnd = rr.start, end
			now := h.clk.Now()
			guard.Reset(leaseEnd.Add(-h.margin).Sub(now))
			beat.Reset(h.interval)
			if !downSince.IsZero() {
				h.log.Info("store reachable again: lease renewed", zap.Duration("outage", now.Sub(downSince)),
					zap.Int("failures", failures))
				downSince, failures = time.Time{}, 0
			}
			h.log.Debug("lease renewed", zap.Time("lease_until", rr.res.LeaseUntil))
		}
	}
}
