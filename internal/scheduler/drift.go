package scheduler

import (
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

// Crontab drift (docs/spec.md#s6-cluster). A job with onDrift: pause is
// not claimed while the live instances define it differently: each
// instance reads the same heartbeat records (Options.Drifting, the
// daemon's cluster.Beater), so each stops on its own, with no write. The
// slot is recorded skipped, reason drift, as a note; the job resumes when
// the definitions agree again.

// ReasonDrift is the note of a slot that fell while its job's definitions
// disagreed and the job has onDrift: pause.
const ReasonDrift = "drift"

// skipDrift reports whether job's slot is held by a drift, and then
// records it skipped (drift).
func (s *Scheduler) skipDrift(job config.Job, slot time.Time) bool {
	if job.OnDrift != config.OnDriftPause || s.o.Drifting == nil || !s.o.Drifting(job.Name) {
		return false
	}
	s.o.Log.Debug("slot skipped: the live instances define the job differently (onDrift: pause)",
		zap.String("job", job.Name), zap.Time("slot", slot))
	s.note(job.Name, slot, claim.StatusSkipped, ReasonDrift)
	return true
}
