package sqliteclaim

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// TestUpgradeFromVersion1: a file of schema version 1 (one run finished,
// written as version 1 writes runs) is migrated by the next start; its run
// is listed as before, with no reason, notes are recorded beside it, and
// the statements of version 1 (named columns) still work on the new table,
// as instances not yet upgraded send them.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v1.db")
	current := migrations
	migrations = current[:1]
	old, err := New(ctx, Options{Path: path})
	migrations = current
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	now := time.Now().UnixMilli()
	// upsertRunSQL is version 1's: its columns did not change.
	write := func(slot int64, st claim.Status) {
		t.Helper()
		var code any
		if st.Final() {
			code = 0
		}
		if _, err := old.db.ExecContext(ctx, upsertRunSQL, "up", slot, string(st), 1, "v1", string(claim.NewToken()),
			now, code, now+60_000, code, ""); err != nil {
			t.Fatalf("write a run as version 1: %v", err)
		}
	}
	write(now-3000, claim.StatusSucceeded)

	b, err := New(ctx, Options{Path: path})
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	defer b.Close()
	n := claim.Note{Job: "up", Slot: now - 2000, Status: claim.StatusSkipped,
		Reason: "overlap", HeldBy: now - 3000, Instance: "v2"}
	if ok, err := b.Record(ctx, n); err != nil || !ok {
		t.Fatalf("record after the upgrade: %v %v", ok, err)
	}
	write(now-1000, claim.StatusRunning) // version 1 claims beside the new one
	var st string
	v1Read := `SELECT r.status FROM (SELECT 1) LEFT JOIN runs r ON r.job = ? AND r.slot = ?`
	if err := old.db.QueryRowContext(ctx, v1Read, "up", n.Slot).Scan(&st); err != nil || st != "skipped" {
		t.Fatalf("version 1's read of a note: %q %v", st, err)
	}
	runs, err := b.ListRuns(ctx, claim.ListQuery{Job: "up"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].Status != claim.StatusRunning || runs[1].Status != claim.StatusSkipped ||
		runs[1].HeldBy != now-3000 || runs[2].Status != claim.StatusSucceeded || runs[2].Reason != "" {
		t.Fatalf("after the upgrade: want running, skipped (held by %d), succeeded; got %+v", now-3000, runs)
	}
}
