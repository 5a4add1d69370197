package scheduler

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// maxPreparing bounds the preparations in flight; one that finds them all
// busy is dropped (its claim works unprepared).
const maxPreparing = 64

// preparer sends the preparations of a claim.Preparer: one per job's next
// slot, PrepareLead before its claim. Only the Run loop touches it.
type preparer struct {
	p    claim.Preparer
	lead time.Duration
	due  prepHeap
	sem  chan struct{}
}

// newPreparer returns the preparer of b, or nil when b prepares nothing.
func newPreparer(b claim.Backend) *preparer {
	p, ok := b.(claim.Preparer)
	if !ok || p.PrepareLead() <= 0 {
		return nil
	}
	return &preparer{p: p, lead: p.PrepareLead(), sem: make(chan struct{}, maxPreparing)}
}

// add schedules the preparation of e's next slot.
func (p *preparer) add(e *entry) {
	if p == nil || e.next.IsZero() {
		return
	}
	heap.Push(&p.due, preparation{e: e, slot: e.next})
}

// reset schedules the preparations of the entries of h alone (after a
// reload).
func (p *preparer) reset(h *slotHeap) {
	if p == nil {
		return
	}
	p.due = p.due[:0]
	for _, e := range *h {
		p.add(e)
	}
}

// wake returns when the earliest preparation is due, zero when none is.
func (p *preparer) wake() time.Time {
	if p == nil || len(p.due) == 0 {
		return time.Time{}
	}
	return p.due[0].at(p.lead)
}

// sendDue starts the preparations due at now whose slot is still the
// job's next (not claimed yet, not replaced by a reload).
func (s *Scheduler) sendDue(ctx context.Context, wg *sync.WaitGroup, now time.Time) {
	p := s.prep
	if p == nil {
		return
	}
	for len(p.due) > 0 && !p.due[0].at(p.lead).After(now) {
		pr := heap.Pop(&p.due).(preparation)
		if !pr.e.next.Equal(pr.slot) || !pr.e.due().After(now) {
			continue // claimed or replaced already, or due now: no head start left
		}
		select {
		case p.sem <- struct{}{}:
		default:
			continue
		}
		job, slot := pr.e.job.Name, pr.slot.UnixMilli()
		wg.Go(func() {
			defer func() { <-p.sem }()
			ctx, cancel := context.WithTimeout(ctx, s.o.ClaimTimeout)
			defer cancel()
			if err := p.p.Prepare(ctx, job, slot); err != nil {
				// The claim reports an outage; this is only a lost head start.
				s.o.Log.Debug("preparation failed: the claim goes unprepared",
					zap.String("job", job), zap.Time("slot", pr.slot), zap.Error(err))
			}
		})
	}
}

// preparation is the Prepare call of (e's job, slot).
type preparation struct {
	e    *entry
	slot time.Time
}

// at is when the preparation is due: lead before its claim is (claimAhead
// before the run's jittered start).
func (pr preparation) at(lead time.Duration) time.Time {
	return startOf(pr.e.job, pr.slot).Add(-pr.e.job.ClaimAhead - lead)
}

// prepHeap orders preparations by when they are due.
type prepHeap []preparation

func (h prepHeap) Len() int { return len(h) }
func (h prepHeap) Less(i, j int) bool {
	if ai, aj := h[i].at(0), h[j].at(0); !ai.Equal(aj) {
		return ai.Before(aj)
	}
	return h[i].e.job.Name < h[j].e.job.Name
}
func (h prepHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *prepHeap) Push(x any)   { *h = append(*h, x.(preparation)) }
func (h *prepHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = preparation{}
	*h = old[:len(old)-1]
	return x
}
