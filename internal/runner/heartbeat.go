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
//
// A renewal still unanswered at the next beat is not abandoned: a slow
// store (a busy disk, a lock wait) answers late but answers, and the
// renewal counts from when it was sent. A second renewal is sent beside it,
// on whatever connection the backend picks, in case the first one's request
// or reply was lost; with maxInFlight in flight, the oldest is cancelled.
// The first success counts.
//
// The fields below the configuration are run's state, used by run's
// goroutine only.
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

	renewed  time.Time   // when the last successful renewal (or the claim) was sent
	leaseEnd time.Time   // the earliest the lease may end, on clk
	guard    clock.Timer // fires margin before leaseEnd: the event of a lease about to end
	beat     clock.Timer // the next renewal, or the retry of a failed one
	results  chan renewResult
	inFlight []*renewal // oldest first, until each one's answer arrives
	nextID   int
	// downSince is when the current outage began (the first failed
	// renewal since the last success), zero while the store answers;
	// failures counts the outage's failed renewals.
	downSince time.Time
	failures  int
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

// renewal is one renewal in flight.
type renewal struct {
	id        int
	cancel    context.CancelFunc
	cancelled bool // given up on; its answer is still awaited
}

// renewResult is a renewal's answer: the store's result or error, when the
// renewal was sent, and which renewal it was.
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
func (h *heartbeat) run(ctx context.Context, anchor time.Time) {
	h.begin(anchor)
	defer h.end()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.guard.C():
			h.events <- hbEvent{renewed: h.renewed, leaseEnd: h.leaseEnd}
			return
		case <-h.beat.C():
			if ctx.Err() != nil {
				return
			}
			h.renew(ctx)
		case rr := <-h.results:
			if !h.answered(ctx, rr) {
				return
			}
		}
	}
}

// begin sets the lease counted from anchor and arms the guard and the
// first beat.
func (h *heartbeat) begin(anchor time.Time) {
	h.renewed = anchor
	h.leaseEnd = anchor.Add(h.lease)
	h.guard = clock.NewTimerAt(h.clk, h.leaseEnd.Add(-h.margin))
	h.beat = h.clk.NewTimer(h.interval)
	h.results = make(chan renewResult)
}

// end cancels the renewals still in flight and awaits their answers, so
// that none lands after run returns (it would take back a released lease),
// then stops the timers.
func (h *heartbeat) end() {
	for _, c := range h.inFlight {
		c.cancel()
	}
	for range h.inFlight {
		<-h.results
	}
	h.beat.Stop()
	h.guard.Stop()
}

// renew sends a renewal, at a beat. A renewal still unanswered counts as a
// failure; with maxInFlight of them unanswered, the oldest is cancelled.
func (h *heartbeat) renew(ctx context.Context) {
	if a := h.active(); len(a) > 0 {
		h.failed(errors.New("lease renewal got no answer within a heartbeat"))
		if len(a) == maxInFlight {
			a[0].cancel()
			a[0].cancelled = true
		}
	}
	callCtx, cancel := context.WithCancel(ctx)
	h.nextID++
	id, start := h.nextID, h.clk.Now()
	h.inFlight = append(h.inFlight, &renewal{id: id, cancel: cancel})
	leaser, fence, lease, results := h.leaser, h.fence, h.lease, h.results
	go func() {
		res, err := leaser.Renew(callCtx, fence, lease)
		results <- renewResult{res: res, err: err, start: start, id: id}
	}()
	h.beat.Reset(h.interval)
}

// active is the renewals in flight that were not given up on, oldest first.
func (h *heartbeat) active() []*renewal {
	var a []*renewal
	for _, c := range h.inFlight {
		if !c.cancelled {
			a = append(a, c)
		}
	}
	return a
}

// answered handles a renewal's answer; it reports whether the heartbeat
// goes on (not when ctx is done, nor once the fencing event is sent).
func (h *heartbeat) answered(ctx context.Context, rr renewResult) bool {
	if h.observe != nil && ctx.Err() == nil {
		h.observe(rr.res, rr.err)
	}
	h.inFlight = slices.DeleteFunc(h.inFlight, func(c *renewal) bool {
		if c.id == rr.id {
			c.cancel()
			return true
		}
		return false
	})
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(rr.err, claim.ErrFenced) {
		h.events <- hbEvent{err: rr.err, renewed: h.renewed, leaseEnd: h.leaseEnd}
		return false
	}
	if rr.err != nil {
		if len(h.inFlight) == 0 {
			h.beat.Reset(h.retry)
		}
		h.failed(rr.err)
		return true
	}
	h.extend(rr)
	return true
}

// extend counts the lease from a successful renewal's send, unless a newer
// renewal succeeded already: it moves the guard, and ends an outage.
func (h *heartbeat) extend(rr renewResult) {
	// The store set the lease at or after rr.start.
	end := rr.start.Add(h.lease)
	if left := rr.res.LeaseUntil.Sub(rr.res.StoreNow); !rr.res.LeaseUntil.IsZero() &&
		!rr.res.StoreNow.IsZero() && left < h.lease {
		end = rr.start.Add(left)
	}
	if rr.start.Before(h.renewed) {
		return // an older renewal answering after a newer one
	}
	h.renewed, h.leaseEnd = rr.start, end
	now := h.clk.Now()
	h.guard.Stop()
	h.guard = clock.NewTimerAt(h.clk, h.leaseEnd.Add(-h.margin))
	if len(h.inFlight) == 0 {
		h.beat.Reset(h.interval)
	}
	if !h.downSince.IsZero() {
		h.log.Info("store reachable again: lease renewed", zap.Duration("outage", now.Sub(h.downSince)),
			zap.Int("failures", h.failures))
		h.downSince, h.failures = time.Time{}, 0
	}
	h.log.Debug("lease renewed", zap.Time("lease_until", rr.res.LeaseUntil))
}

// failed counts a failed renewal. The first of an outage is logged: at
// error when the store refused the renewal for good, else at warn; every
// one at debug, except a refusal that starts an outage.
func (h *heartbeat) failed(err error) {
	h.failures++
	now := h.clk.Now()
	if h.downSince.IsZero() {
		h.downSince = now
		if claim.IsPermanent(err) {
			// Renewed again all the same: the lease ends with the
			// last renewal, and the guard stops the command then.
			h.log.Error("store refused the lease renewal", zap.Error(err),
				zap.Duration("lease_left", h.leaseEnd.Sub(now)))
			return
		}
		h.log.Warn("store unreachable: lease renewal failed; retrying", zap.Error(err),
			zap.Duration("lease_left", h.leaseEnd.Sub(now)))
	}
	h.log.Debug("lease renewal failed", zap.Error(err), zap.Int("failures", h.failures))
}
