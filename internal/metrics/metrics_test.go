package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/clock"
)

func status(t *testing.T, m *Metrics, path string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	return w.Code, strings.TrimSpace(w.Body.String())
}

func TestHealthFollowsTheStore(t *testing.T) {
	clk := clock.NewFake(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	m := New(clk, "sqlite")
	if code, body := status(t, m, "/healthz"); code != 503 || body != "the store has not answered yet" {
		t.Fatalf("before any answer: %d %q", code, body)
	}
	m.StoreAnswered()
	if code, _ := status(t, m, "/healthz"); code != 200 {
		t.Fatalf("after an answer: %d", code)
	}
	clk.Advance(HealthWindow + time.Second)
	if code, body := status(t, m, "/healthz"); code != 503 || body != "the store last answered 1m1s ago" {
		t.Fatalf("after a minute of silence: %d %q", code, body)
	}
}

func TestReadyFollowsTheDaemon(t *testing.T) {
	m := New(clock.NewFake(time.Now()), "sqlite")
	if code, _ := status(t, m, "/readyz"); code != 503 {
		t.Fatalf("before start: %d", code)
	}
	m.SetReady(true)
	if code, _ := status(t, m, "/readyz"); code != 200 {
		t.Fatalf("scheduling: %d", code)
	}
	m.SetReady(false)
	if code, _ := status(t, m, "/readyz"); code != 503 {
		t.Fatalf("stopping: %d", code)
	}
}

func TestMissedSlotsByReason(t *testing.T) {
	m := New(clock.NewFake(time.Now()), "sqlite")
	h := m.SchedulerHooks()
	h.Missed("nightly", "catch_up", 4)
	h.Missed("nightly", "late", 2)
	h.Missed("nightly", "late", 1)
	_, body := status(t, m, "/metrics")
	for _, want := range []string{
		`anarchon_missed_slots_total{job="nightly",reason="catch_up"} 4`,
		`anarchon_missed_slots_total{job="nightly",reason="late"} 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
