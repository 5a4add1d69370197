package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
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
