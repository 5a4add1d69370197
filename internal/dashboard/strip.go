package dashboard

import (
	"slices"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/schedule"
)

const (
	// cellNone is a slot of the schedule the store holds no record of,
	// older than the job's maxLate: a gap, no run and no note.
	cellNone = "none"
	// cellPending is a slot without a record yet, within its jitter and
	// maxLate: its claim may still come.
	cellPending = "pending"
	// stripSteps bounds the slots a strip walks from its oldest record to
	// now; a strip that would walk more shows its records alone.
	stripSteps = 100000
)

// cell is one slot of a job's strip.
type cell struct {
	Slot   time.Time
	Status string // a run's or note's status, or cellNone, cellPending
	Reason string
}

// stripOf is the job's last n slots up to now, oldest first, each with the
// outcome the store holds: the slots of its schedule from its oldest
// record in recent (newest first) to now, and the recorded slots. A slot
// of the schedule with no record reads none (a gap) once maxLate is past.
func stripOf(j config.Job, recent []claim.Run, now time.Time, n int) []cell {
	if len(recent) == 0 {
		return nil
	}
	bySlot := make(map[int64]claim.Run, len(recent))
	oldest := recent[0].Slot
	for _, r := range recent {
		if _, dup := bySlot[r.Slot]; !dup {
			bySlot[r.Slot] = r
		}
		oldest = min(oldest, r.Slot)
	}
	slots := make([]int64, 0, len(bySlot))
	for s := range bySlot {
		slots = append(slots, s)
	}
	if sc, err := schedule.Parse(j.Schedule, j.Location); err == nil {
		due := schedule.Between(sc, time.UnixMilli(oldest), now, stripSteps+1)
		if len(due) <= stripSteps {
			for _, t := range due {
				if _, ok := bySlot[t.UnixMilli()]; !ok {
					slots = append(slots, t.UnixMilli())
				}
			}
		}
	}
	slices.Sort(slots)
	slots = slots[max(0, len(slots)-n):]
	out := make([]cell, len(slots))
	for i, s := range slots {
		c := cell{Slot: time.UnixMilli(s).UTC(), Status: cellNone}
		if r, ok := bySlot[s]; ok {
			c.Status, c.Reason = string(r.Status), r.Reason
		} else if now.Sub(c.Slot) <= j.Jitter+j.MaxLate {
			c.Status = cellPending
		}
		out[i] = c
	}
	return out
}
