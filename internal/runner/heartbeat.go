package runner

import (
	"context"
	"errors"
	"slices"
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

// heartbeat keeps an attempt's lease (docs/spec.md#s4-heartbeat): it renews
// every interval, retries failed renewals sooner, and sends one hbEvent when
// the attempt is fenced or when no renewal has succeeded for lease - margin.
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
	// observe, if set, sees every renewal's answer (metrics).
	observe func(res claim.Result, err error)
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
		margin:   fenceMargin(lease),
		events:   make(chan hbEvent, 1),
	}
}

type renewResult struct {
	res   claim.Result
	err   error
	start time.Time
	id    int
}

// maxInFlight bounds the renewals awaited at once (besides those given up
// on, whose answers are still drained).
const maxInFlight = 2

// run heartbeats until ctx is done or it has sent its event. anchor is when
// the claim was sent: the lease is counted from there.
//
// A renewal still unanswered at the next beat is not abandoned: a slow
// store (a busy disk, a lock wait) answers late but answers, and the
// renewal counts from when it was sent. A second renewal is sent beside it,
// on whatever connection the backend picks, in case the first one's request
// or reply was lost; with maxInFlight in flight, the oldest is cancelled.
// The first success counts.
func (h *heartbeat) run(ctx context.Context, anchor time.Time) {
	renewed := anchor
	leaseEnd := anchor.Add(h.lease)
	guard := clock.NewTimerAt(h.clk, leaseEnd.Add(-h.margin))
	defer func() { guard.Stop() }()
	beat := h.clk.NewTimer(h.interval)
	defer beat.Stop()
	type call struct {
		id        int
		cancel    context.CancelFunc
		cancelled bool // given up on; its answer is still awaited
	}
	var (
		results   = make(chan renewResult)
		inFlight  []*call // oldest first, until each one's answer arrives
		nextID    int
		downSince time.Time // zero while the store answers
		failures  int
	)
	active := func() []*call {
		var a []*call
		for _, c := range inFlight {
			if !c.cancelled {
				a = append(a, c)
			}
		}
		return a
	}
	// Renewals still in flight are cancelled and awaited, so that none
	// lands after run returns (it would take back a released lease).
	defer func() {
		for _, c := range inFlight {
			c.cancel()
		}
		for range inFlight {
			<-results
		}
	}()
	failed := func(err error) {
		failures++
		now := h.clk.Now()
		if downSince.IsZero() {
			downSince = now
			if claim.IsPermanent(err) {
				// Renewed again all the same: the lease ends with the
				// last renewal, and the guard stops the command then.
				h.log.Error("store refused the lease renewal", zap.Error(err),
					zap.Duration("lease_left", leaseEnd.Sub(now)))
				return
			}
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
			if a := active(); len(a) > 0 {
				failed(errors.New("lease renewal got no answer within a heartbeat"))
				if len(a) == maxInFlight {
					a[0].cancel()
					a[0].cancelled = true
				}
			}
			callCtx, cancel := context.WithCancel(ctx)
			nextID++
			id, start := nextID, h.clk.Now()
			inFlight = append(inFlight, &call{id: id, cancel: cancel})
			go func() {
				res, err := h.leaser.Renew(callCtx, h.fence, h.lease)
				results <- renewResult{res: res, err: err, start: start, id: id}
			}()
			beat.Reset(h.interval)
		case rr := <-results:
			if h.observe != nil && ctx.Err() == nil {
				h.observe(rr.res, rr.err)
			}
			inFlight = slices.DeleteFunc(inFlight, func(c *call) bool {
				if c.id == rr.id {
					c.cancel()
					return true
				}
				return false
			})
			if ctx.Err() != nil {
				return
			}
			if errors.Is(rr.err, claim.ErrFenced) {
				h.events <- hbEvent{err: rr.err, renewed: renewed, leaseEnd: leaseEnd}
				return
			}
			if rr.err != nil {
				if len(inFlight) == 0 {
					beat.Reset(h.retry)
				}
				failed(rr.err)
				continue
			}
			// The store set the lease at or after rr.start.
			end := rr.start.Add(h.lease)
			if left := rr.res.LeaseUntil.Sub(rr.res.StoreNow); !rr.res.LeaseUntil.IsZero() &&
				!rr.res.StoreNow.IsZero() && left < h.lease {
				end = rr.start.Add(left)
			}
			if rr.start.Before(renewed) {
				continue // an older renewal answering after a newer one
			}
			renewed, leaseEnd = rr.start, end
			now := h.clk.Now()
			guard.Stop()
			guard = clock.NewTimerAt(h.clk, leaseEnd.Add(-h.margin))
			if len(inFlight) == 0 {
				beat.Reset(h.interval)
			}
			if !downSince.IsZero() {
				h.log.Info("store reachable again: lease renewed", zap.Duration("outage", now.Sub(downSince)),
					zap.Int("failures", failures))
				downSince, failures = time.Time{}, 0
			}
			h.log.Debug("lease renewed", zap.Time("lease_until", rr.res.LeaseUntil))
		}
	}
}
