package status

import "github.com/anarchon/anarchon/internal/claim"

// Run kinds (docs/spec.md#s6-trigger): a slot of the schedule, a run asked
// for by anarchond trigger, a retry.
const (
	KindScheduled = "scheduled"
	KindManual    = claim.TriggerManual
	KindRetry     = claim.TriggerRetry
)

// Annotate marks the runs that a trigger of the jobs' control records asked
// for: their Kind, RequestedBy and, for a retry, RetryOf, with Attempt
// counted on from the run retried (the retry's attempt, plus the store's
// takeovers of it).
func Annotate(runs []claim.Run, controls []claim.Control) []claim.Run {
	byJob := make(map[string]claim.Control, len(controls))
	for _, c := range controls {
		byJob[c.Job] = c
	}
	for i := range runs {
		r := &runs[i]
		t, ok := byJob[r.Job].TriggerOf(r.Slot)
		if !ok {
			continue
		}
		r.Kind, r.RequestedBy = t.Kind, t.By
		if t.Kind == claim.TriggerRetry {
			r.RetryOf = t.Of
			if r.Attempt > 0 {
				r.Attempt += t.Attempt - 1
			}
		}
	}
	return runs
}
