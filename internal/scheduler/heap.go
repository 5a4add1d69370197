package scheduler

import (
	"time"

	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/schedule"
)

// entry is one job in the scheduler's heap, keyed by its next slot.
type entry struct {
	job   config.Job
	sched schedule.Schedule
	next  time.Time // zero: the schedule has no more slots
	index int
}

// due is when the claim of e's next slot is due: the job's claimAhead
// before the run's start (the slot, plus its jitter).
func (e *entry) due() time.Time { return startOf(e.job, e.next).Add(-e.job.ClaimAhead) }

// slotHeap orders entries by when their next claim is due, then by job name
// so that the order of jobs due together is stable.
type slotHeap []*entry

func (h slotHeap) Len() int { return len(h) }
func (h slotHeap) Less(i, j int) bool {
	if di, dj := h[i].due(), h[j].due(); !di.Equal(dj) {
		return di.Before(dj)
	}
	return h[i].job.Name < h[j].job.Name
}
func (h slotHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *slotHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *slotHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
