package metrics

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
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

// A refusal no retry changes makes /healthz unhealthy with its message,
// and is counted by operation, until the store answers that operation.
func TestHealthShowsARefusal(t *testing.T) {
	clk := clock.NewFake(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	m := New(clk, "postgres")
	h := m.SchedulerHooks()
	h.StoreOK("claim")
	refusal := claim.Permanent("postgres", errors.New("permission denied for table runs"), "role a lacks a privilege", "GRANT ...")
	h.StoreError("claim", refusal)
	h.StoreError("claim", errors.New("connection reset by peer"))
	h.StoreOK("read") // reads answered: the claims are still refused
	code, body := status(t, m, "/healthz")
	if code != 503 || !strings.Contains(body, "the store refused claim: postgres refused: role a lacks a privilege") ||
		!strings.Contains(body, "fix: GRANT ...") {
		t.Fatalf("while claims are refused: %d %q", code, body)
	}
	_, metrics := status(t, m, "/metrics")
	for _, want := range []string{
		`anarchon_backend_refusals_total{op="claim"} 1`,
		`anarchon_backend_errors_total{op="claim"} 2`,
		`anarchon_backend_refusals_total{op="finish"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	h.StoreOK("claim")
	if code, body := status(t, m, "/healthz"); code != 200 {
		t.Fatalf("once a claim is answered again: %d %q", code, body)
	}
}
