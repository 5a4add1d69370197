package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
)

// Every job of the crontab has anarchon_job_paused, 0 until the scheduler
// reports it paused, and 0 again when it reports it resumed.
func TestJobPaused(t *testing.T) {
	m := New(clock.NewFake(time.Now()), "sqlite")
	m.Jobs([]config.Job{{Name: "nightly"}, {Name: "hourly"}})
	h := m.SchedulerHooks()
	h.Paused("nightly", true)
	_, body := status(t, m, "/metrics")
	for _, want := range []string{`anarchon_job_paused{job="nightly"} 1`, `anarchon_job_paused{job="hourly"} 0`} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}
	m.Jobs([]config.Job{{Name: "nightly"}}) // a reload keeps the value
	if _, body = status(t, m, "/metrics"); !strings.Contains(body, `anarchon_job_paused{job="nightly"} 1`) {
		t.Fatalf("after a reload the paused job is still paused:\n%s", body)
	}
	h.Paused("nightly", false)
	if _, body = status(t, m, "/metrics"); !strings.Contains(body, `anarchon_job_paused{job="nightly"} 0`) {
		t.Fatalf("after the resume:\n%s", body)
	}
}
