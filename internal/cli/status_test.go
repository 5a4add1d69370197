package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/redisclaim"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
	"github.com/anarchon/anarchon/internal/testserver"
)

// statusOf runs status --json in dir and returns each run's status by slot.
func statusOf(t *testing.T, dir string) map[int64]string {
	t.Helper()
	code, out, stderr := run(t, dir, "status", "--config", "c.yaml", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := map[int64]string{}
	for line := range strings.Lines(out) {
		var r struct {
			SlotMs int64  `json:"slot_ms"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		got[r.SlotMs] = r.Status
	}
	return got
}

func claimed(t *testing.T, b claim.Backend, slot time.Time, lease time.Duration) claim.Request {
	t.Helper()
	req := claim.Request{Job: "a", Slot: slot.UnixMilli(), Token: claim.NewToken(), Instance: "i1",
		MaxLate: 24 * time.Hour, Lease: lease, MaxAttempts: 3, Overlap: claim.OverlapAllow, Now: slot}
	res, err := b.Claim(t.Context(), req)
	if err != nil || res.Outcome != claim.Won {
		t.Fatalf("claim: %v %v", res.Outcome, err)
	}
	return req
}

// On a lease store, a run whose lease was released (its daemon stopped
// before its slot) and not taken over shows as abandoned, by the store's
// clock; a run whose lease is live still shows running.
func TestStatusAbandonedLease(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+goodJobs, 0o644)
	b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: dir + "/s.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().Truncate(time.Second)
	released := claimed(t, b, now.Add(-time.Minute), time.Hour)
	if err := b.Release(t.Context(), released.Fence(1)); err != nil {
		t.Fatal(err)
	}
	live := claimed(t, b, now, time.Hour)
	got := statusOf(t, dir)
	if got[released.Slot] != "abandoned" || got[live.Slot] != "running" {
		t.Fatalf("statuses by slot %v: want %d abandoned, %d running", got, released.Slot, live.Slot)
	}
	code, out, _ := run(t, dir, "status", "--config", "c.yaml")
	if code != 0 || !strings.Contains(out, "  abandoned  ") {
		t.Fatalf("table (exit %d):\n%s", code, out)
	}
}

// On a claim-only store, a run still running long after its timeout, kill
// grace and recording window shows as abandoned.
func TestStatusAbandonedClaimOnly(t *testing.T) {
	srv := testserver.For("redis")
	srv.Require(t, "")
	url := srv.URL
	ns := "status-" + testserver.RandomID()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := redisclaim.DeleteNamespaceAt(ctx, url, ns); err != nil {
			t.Log(err)
		}
	})
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "namespace: "+ns+"\nbackend:\n  type: redis\n  redis: {strategy: stream-id}\n"+goodJobs, 0o644)
	b, err := redisclaim.NewClaimOnly(t.Context(), redisclaim.Options{URL: url, Namespace: ns, Strategy: "stream-id"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().Truncate(time.Second)
	old := claimed(t, b, now.Add(-3*time.Hour), 0)
	recent := claimed(t, b, now.Add(-time.Minute), 0)
	got := statusOf(t, dir)
	if got[old.Slot] != "abandoned" || got[recent.Slot] != "running" {
		t.Fatalf("statuses by slot %v: want %d abandoned, %d running", got, old.Slot, recent.Slot)
	}
}

// Slots no attempt ran are recorded in the store as notes: status shows
// the runs by default, and the notes with --all or --outcome, with their
// reason (and, for an overlap skip, the slot that held the job).
func TestStatusShowsNotesWhenAsked(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+goodJobs, 0o644)
	b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: dir + "/s.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().Truncate(time.Second)
	ran := claimed(t, b, now.Add(-3*time.Second), time.Hour)
	for _, n := range []claim.Note{
		{Job: "a", Slot: now.Add(-2 * time.Second).UnixMilli(), Status: claim.StatusSkipped, Reason: "overlap", HeldBy: ran.Slot, Instance: "i2", At: now},
		{Job: "a", Slot: now.Add(-time.Second).UnixMilli(), Status: claim.StatusMissed, Reason: "catch_up", Instance: "i2", At: now},
	} {
		if ok, err := b.Record(t.Context(), n); err != nil || !ok {
			t.Fatalf("record %+v: %v %v", n, ok, err)
		}
	}
	if got := statusOf(t, dir); len(got) != 1 || got[ran.Slot] != "running" {
		t.Fatalf("status by default: want the run only, got %v", got)
	}
	code, out, stderr := run(t, dir, "status", "--config", "c.yaml", "--all", "--json")
	if code != 0 {
		t.Fatalf("status --all: exit %d: %s", code, stderr)
	}
	want := []string{
		`"status":"missed"`, `"reason":"catch_up"`, `"held_by_slot_ms":null`,
		`"status":"skipped"`, `"reason":"overlap"`, fmt.Sprintf(`"held_by_slot_ms":%d`, ran.Slot),
		`"status":"running"`, `"reason":""`,
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("status --all --json lacks %s:\n%s", w, out)
		}
	}
	code, out, _ = run(t, dir, "status", "--config", "c.yaml", "--outcome", "skipped")
	if code != 0 || !strings.Contains(out, "skipped (overlap; held by "+ran.SlotTime().Format(time.RFC3339Nano)+")") ||
		strings.Contains(out, "missed") || strings.Contains(out, "running") {
		t.Errorf("status --outcome skipped: exit %d, want the skipped slot only, with its reason and holder:\n%s", code, out)
	}
	for _, args := range [][]string{{"--outcome", "skiped"}, {"--all", "--outcome", "missed"}} { //nolint:misspell // an unknown outcome on purpose
		code, _, stderr := run(t, dir, append([]string{"status", "--config", "c.yaml"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "--outcome") {
			t.Errorf("status %v: exit %d, want 2 with a message naming --outcome: %s", args, code, stderr)
		}
	}
}
