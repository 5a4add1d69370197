package status

import (
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

// Abandoned is the status shown for a run that the store holds as running
// but that no live runner holds: no store writes it; status computes it
// when it reads the runs (Liveness.Mark).
const Abandoned claim.Status = "abandoned"

// Liveness says which runs the store holds as running have no live runner.
//
// On a lease store a run is abandoned once its lease has ended by the
// store's clock (lease_until < the store's now, the instant from which
// any claim takes it over): its runner died, or released it at a stop,
// and no instance has taken it over yet.
//
// A claim-only store keeps no lease and no clock a run can be judged by:
// there a run is abandoned once it has been running, by the reader's
// clock, for longer than a live runner can keep a run of its job
// running and unrecorded (ClaimOnlyBound). The bound is minutes, so the
// reader's clock need only roughly agree with the runners'.
type Liveness struct {
	// StoreNow is the store's clock at the read (lease stores); zero when
	// unknown: no lease is judged.
	StoreNow time.Time
	// Now is the reader's clock (claim-only stores); zero: no claim-only
	// run is judged.
	Now time.Time
	// Bounds are ClaimOnlyBound by job name; a run of a job not in it is
	// never judged abandoned on a claim-only store.
	Bounds map[string]time.Duration
}

// ClaimOnlyBound is how long a run of j on a claim-only store may be
// running with a live runner: its timeout, its kill grace, and the
// runner's window for recording the result (max(30 s, lease)). A runner
// that is alive has recorded the run's end by then (or given up trying).
func ClaimOnlyBound(j config.Job) time.Duration {
	return j.Timeout + j.KillGrace + max(30*time.Second, j.Lease)
}

// BoundsOf are the ClaimOnlyBound of each job.
func BoundsOf(jobs []config.Job) map[string]time.Duration {
	b := make(map[string]time.Duration, len(jobs))
	for _, j := range jobs {
		b[j.Name] = ClaimOnlyBound(j)
	}
	return b
}

// Abandoned reports whether r is running with no live runner.
func (l Liveness) Abandoned(r claim.Run) bool {
	if r.Status != claim.StatusRunning {
		return false
	}
	if !r.LeaseUntil.IsZero() {
		return !l.StoreNow.IsZero() && r.LeaseUntil.Before(l.StoreNow)
	}
	bound, ok := l.Bounds[config.JobOfKey(r.Job)] // a perInstance run's key names its job
	return ok && !l.Now.IsZero() && !r.StartedAt.IsZero() && l.Now.Sub(r.StartedAt) > bound
}

// Mark returns runs with every abandoned run's status set to Abandoned;
// runs itself is not changed.
func (l Liveness) Mark(runs []claim.Run) []claim.Run {
	out := make([]claim.Run, len(runs))
	for i, r := range runs {
		if l.Abandoned(r) {
			r.Status = Abandoned
		}
		out[i] = r
	}
	return out
}
