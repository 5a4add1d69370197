package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/scheduler"
)

// Each hook of a job has anarchon_hook_failures_total from 0; the runner's
// failed hooks count there.
func TestHookFailures(t *testing.T) {
	m := New(clock.NewFake(time.Now()), "sqlite")
	m.Jobs([]config.Job{{Name: "backup", OnFailure: "mail ops"}, {Name: "plain"}})
	m.RunnerHooks().HookFailed("backup", runner.OnFailure)
	_, body := status(t, m, "/metrics")
	if want := `anarchon_hook_failures_total{hook="onFailure",job="backup"} 1`; !strings.Contains(body, want) {
		t.Fatalf("/metrics lacks %q:\n%s", want, body)
	}
	if strings.Contains(body, `hook="onSuccess"`) || strings.Contains(body, `job="plain",hook`) {
		t.Fatalf("series of hooks the jobs do not have:\n%s", body)
	}
}

// A job with retries has anarchon_retries_total{result="not_written"} from
// 0; the scheduler's triggers and retries count by kind and result.
func TestTriggersAndRetries(t *testing.T) {
	m := New(clock.NewFake(time.Now()), "sqlite")
	m.Jobs([]config.Job{{Name: "flaky", Retry: config.Retry{Attempts: 2}}, {Name: "plain"}})
	_, body := status(t, m, "/metrics")
	if want := `anarchon_retries_total{job="flaky",result="not_written"} 0`; !strings.Contains(body, want) {
		t.Fatalf("/metrics lacks %q:\n%s", want, body)
	}
	if strings.Contains(body, `job="plain",result`) {
		t.Fatalf("a retries series of a job without retries:\n%s", body)
	}
	h := m.SchedulerHooks()
	h.Triggered("flaky", claim.TriggerManual)
	h.Retried("flaky", scheduler.RetryScheduled)
	h.Triggered("flaky", claim.TriggerRetry)
	h.Retried("flaky", scheduler.RetryNotWritten)
	_, body = status(t, m, "/metrics")
	for _, want := range []string{
		`anarchon_triggers_total{job="flaky",kind="manual"} 1`,
		`anarchon_triggers_total{job="flaky",kind="retry"} 1`,
		`anarchon_retries_total{job="flaky",result="scheduled"} 1`,
		`anarchon_retries_total{job="flaky",result="not_written"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
