package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

var storeNow = time.Date(2027, 3, 28, 1, 0, 30, 0, time.UTC)

func leaseRun(job string, status claim.Status, leaseUntil time.Time) claim.Run {
	return claim.Run{Job: job, Slot: storeNow.Add(-time.Minute).UnixMilli(), Status: status, Attempt: 1,
		Instance: "i1", StartedAt: storeNow.Add(-time.Minute), LeaseUntil: leaseUntil}
}

// On a lease store a run is abandoned once its lease ended before the
// store's now, as the decision table takes it over then; without the
// store's clock no lease is judged.
func TestAbandonedLease(t *testing.T) {
	l := Liveness{StoreNow: storeNow}
	for _, tc := range []struct {
		name string
		run  claim.Run
		l    Liveness
		want claim.Status
	}{
		{"lease ended", leaseRun("a", claim.StatusRunning, storeNow.Add(-time.Millisecond)), l, Abandoned},
		{"lease ends now", leaseRun("a", claim.StatusRunning, storeNow), l, claim.StatusRunning},
		{"lease live", leaseRun("a", claim.StatusRunning, storeNow.Add(time.Second)), l, claim.StatusRunning},
		{"finished", leaseRun("a", claim.StatusSucceeded, storeNow.Add(-time.Hour)), l, claim.StatusSucceeded},
		{"interrupted", leaseRun("a", claim.StatusInterrupted, storeNow.Add(-time.Hour)), l, claim.StatusInterrupted},
		{"store clock unknown", leaseRun("a", claim.StatusRunning, storeNow.Add(-time.Hour)), Liveness{}, claim.StatusRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.l.Mark([]claim.Run{tc.run})
			if got[0].Status != tc.want {
				t.Fatalf("status %s, want %s", got[0].Status, tc.want)
			}
		})
	}
}

// On a claim-only store a run is abandoned once it has been running
// longer than a live runner could keep it running unrecorded: timeout,
// kill grace and the recording window.
func TestAbandonedClaimOnly(t *testing.T) {
	j := config.Job{Name: "a", Timeout: time.Hour, KillGrace: 10 * time.Second, Lease: 30 * time.Second}
	bound := ClaimOnlyBound(j)
	if want := time.Hour + 40*time.Second; bound != want {
		t.Fatalf("bound %v, want %v", bound, want)
	}
	l := Liveness{Now: storeNow, Bounds: BoundsOf([]config.Job{j})}
	run := func(job string, started time.Time) claim.Run {
		return claim.Run{Job: job, Slot: started.UnixMilli(), Status: claim.StatusRunning, Attempt: 1, StartedAt: started}
	}
	for _, tc := range []struct {
		name string
		run  claim.Run
		want claim.Status
	}{
		{"past the bound", run("a", storeNow.Add(-bound-time.Millisecond)), Abandoned},
		{"within the bound", run("a", storeNow.Add(-bound)), claim.StatusRunning},
		{"job not in the crontab", run("gone", storeNow.Add(-24*time.Hour)), claim.StatusRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := l.Mark([]claim.Run{tc.run})[0].Status; got != tc.want {
				t.Fatalf("status %s, want %s", got, tc.want)
			}
		})
	}
}

// Mark does not change the runs it is given, and the table and the JSON
// show an abandoned run as such.
func TestAbandonedShown(t *testing.T) {
	runs := []claim.Run{leaseRun("a", claim.StatusRunning, storeNow.Add(-time.Second))}
	marked := Liveness{StoreNow: storeNow}.Mark(runs)
	if runs[0].Status != claim.StatusRunning {
		t.Fatalf("Mark changed its input: %s", runs[0].Status)
	}
	var js, table bytes.Buffer
	if err := WriteJSON(&js, marked); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&table, marked); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"status":"abandoned"`) {
		t.Errorf("json: %s", js.String())
	}
	if lines := strings.Split(table.String(), "\n"); len(lines) < 2 || strings.Fields(lines[1])[2] != "abandoned" {
		t.Errorf("table:\n%s", table.String())
	}
}
