package sqliteclaim_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
)

// open opens a backend on path, closed at the end of the test.
func open(t *testing.T, path string) *sqliteclaim.Backend {
	t.Helper()
	b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: path})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

func TestConformance(t *testing.T) {
	claimtest.Exercise(t, claimtest.Harness{
		New: func(t *testing.T) claim.Backend {
			return open(t, filepath.Join(t.TempDir(), "anarchon.db"))
		},
		Open: func(t *testing.T, b claim.Backend) claim.Backend {
			return open(t, b.(*sqliteclaim.Backend).Path())
		},
		// No Transient: with BEGIN IMMEDIATE and a 5s busy timeout a claim
		// race must never see "database is locked".
		Controller: true,
		Registry:   true,
	})
}

// raceDBEnv names the shared file of the process race in the children.
const raceDBEnv = "SQLITECLAIM_RACE_DB"

// TestProcessRace: 3 processes × 4 goroutines claim the same 100 slots on
// one fresh file (so the processes also race through the first migration).
func TestProcessRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.db")
	claimtest.ProcessRace(t, claimtest.ProcessOptions{
		Processes:  3,
		Goroutines: 4,
		Slots:      100,
		Env:        []string{raceDBEnv + "=" + path},
		Open:       func(t *testing.T) claim.Backend { return open(t, path) },
	})
}

// TestHelperProcess is a race process of TestProcessRace; on its own it
// does nothing.
func TestHelperProcess(t *testing.T) {
	claimtest.HelperProcess(t, claimtest.HelperOptions{
		Open: func(ctx context.Context) (claim.Backend, error) {
			return sqliteclaim.New(ctx, sqliteclaim.Options{Path: os.Getenv(raceDBEnv)})
		},
	})
}

func TestMigrationIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	// Eight instances starting together on a fresh file.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: path})
			if err == nil {
				err = b.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("instances starting together on a fresh file must all migrate or find it migrated: %v", err)
	}
	open(t, path) // and once more, alone
	db := rawDB(t, path)
	rows, err := db.Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	if fmt.Sprint(versions) != "[1 2 3 4 5]" {
		t.Fatalf("schema_migrations must hold each version once: got %v", versions)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "future.db")
	open(t, path)
	db := rawDB(t, path)
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	_, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: path})
	if err == nil || !strings.Contains(err.Error(), "schema version 99 is newer") {
		t.Fatalf("an older anarchond on a newer schema must refuse to start, got %v", err)
	}
}

func TestReopenKeepsRuns(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "keep.db")
	b, err := sqliteclaim.New(ctx, sqliteclaim.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	r := claim.Request{Job: "keep", Slot: time.Now().UnixMilli(), Token: claim.NewToken(), Instance: "a",
		MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapSkip}
	if res, err := b.Claim(ctx, r); err != nil || res.Outcome != claim.Won {
		t.Fatalf("claim: %v %v", res, err)
	}
	fin := claim.Finish{Status: claim.StatusSucceeded, OutputTail: "kept\n"}
	if err := b.Finish(ctx, r.Fence(1), fin); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := open(t, path)
	run, _, err := b2.Read(ctx, r.Job, r.Slot)
	if err != nil {
		t.Fatalf("read after re-open: %v", err)
	}
	if run.Status != claim.StatusSucceeded || run.Token != r.Token || run.OutputTail != "kept\n" {
		t.Fatalf("a re-opened file must keep the run: got %+v", run)
	}
	if res, err := b2.Claim(ctx, claim.Request{Job: r.Job, Slot: r.Slot, Token: claim.NewToken(), Instance: "b",
		MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3}); err != nil || res.Outcome != claim.Done {
		t.Fatalf("a claim after re-open must see the finished run: %v %v", res, err)
	}
}

func TestBadPath(t *testing.T) {
	for _, tc := range []struct {
		path, want string
	}{
		{"/nonexistent/x.db", `open sqlite database "/nonexistent/x.db": unable to open database file: no such file or directory`},
		{"", "backend.sqlite.path is empty"},
		{":memory:", `need the path of a file on a local disk`},
	} {
		_, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: tc.path})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q): want an error containing %q, got %v", tc.path, tc.want, err)
		}
	}
	// A directory where the file should be.
	dir := t.TempDir()
	if _, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: dir}); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("New on a directory: want an error naming %s, got %v", dir, err)
	}
}

func TestPathWithURICharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd name?#%.db")
	open(t, path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file must be created under its exact name: %v", err)
	}
}

// TestHistory checks the history rows of a run's life: claimed, takeover,
// released, finished, and interrupted.
func TestHistory(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "h.db")
	b := open(t, path)
	slot := time.Now().UnixMilli()
	req := func() claim.Request {
		return claim.Request{Job: "h", Slot: slot, Token: claim.NewToken(), Instance: "i-" + claim.NewToken().Short(),
			MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapSkip}
	}
	a := req()
	mustWin := func(r claim.Request, attempt int) {
		t.Helper()
		res, err := b.Claim(ctx, r)
		if err != nil || res.Outcome != claim.Won || res.Attempt != attempt {
			t.Fatalf("claim: want won(%d), got %+v %v", attempt, res, err)
		}
	}
	mustWin(a, 1)
	if err := b.Release(ctx, a.Fence(1)); err != nil {
		t.Fatal(err)
	}
	c := req()
	mustWin(c, 2)
	if err := b.Finish(ctx, c.Fence(2), claim.Finish{Status: claim.StatusFailed, ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	rows, err := rawDB(t, path).Query(`SELECT attempt, token, event FROM run_history WHERE job = 'h' AND slot = ? ORDER BY id`, slot)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var attempt int
		var tok, ev string
		if err := rows.Scan(&attempt, &tok, &ev); err != nil {
			t.Fatal(err)
		}
		who := "a"
		if tok == string(c.Token) {
			who = "c"
		}
		got = append(got, ev+"/"+who+"/"+string(rune('0'+attempt)))
	}
	want := "claimed/a/1 released/a/1 takeover/c/2 finished/c/2"
	if strings.Join(got, " ") != want {
		t.Fatalf("history: want %s, got %s", want, strings.Join(got, " "))
	}
}

// TestBusyTimeout: a claim that cannot get the write lock within the busy
// timeout fails with an error that IsBusy recognises (transient: the daemon
// re-sends with the same token) and that names the run. Note that SQLite's
// busy wait is bounded by the busy timeout, not by ctx: mattn's interrupt
// does not cut it short.
func TestBusyTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: path, BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	conn, err := rawDB(t, path).Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil { // hold the write lock
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)
	_, err = b.Claim(t.Context(), claim.Request{Job: "c", Slot: time.Now().UnixMilli(), Token: claim.NewToken(),
		Instance: "x", MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 1})
	if !sqliteclaim.IsBusy(err) {
		t.Fatalf("a claim that cannot get the write lock within the busy timeout: want a busy error, got %v", err)
	}
	if !strings.Contains(err.Error(), "claim c@") {
		t.Fatalf("the error must name the run: %v", err)
	}
}

// rawDB opens path with database/sql directly, for inspecting the schema.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestInstancesStartTogether: daemons that start at the same moment on a
// new database file (several instances of one host started together) all
// open it: the switch to WAL and the migration wait for each other. Each
// instance is a process of its own (this test binary run again), as
// daemons are.
func TestInstancesStartTogether(t *testing.T) {
	if path := os.Getenv("ANARCHON_TEST_SQLITE_OPEN"); path != "" {
		b, err := sqliteclaim.New(context.Background(), sqliteclaim.Options{Path: path})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		b.Close()
		os.Exit(0)
	}
	for round := range 5 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("together-%d.db", round))
		cmds := make([]*exec.Cmd, 6)
		outs := make([]*strings.Builder, len(cmds))
		for i := range cmds {
			cmds[i] = exec.Command(os.Args[0], "-test.run=^TestInstancesStartTogether$")
			cmds[i].Env = append(os.Environ(), "ANARCHON_TEST_SQLITE_OPEN="+path)
			outs[i] = &strings.Builder{}
			cmds[i].Stderr = outs[i]
		}
		for _, c := range cmds {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("round %d: instance %d of %d starting together: %v: %s", round, i, len(cmds), err, outs[i])
			}
		}
	}
}
