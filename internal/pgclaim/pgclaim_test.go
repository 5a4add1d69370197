package pgclaim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/testserver"
)

// dsnEnv names the DSN of the test server (testServer).
var dsnEnv = testServer.URLEnv

// testDSN is the test server's DSN: dsnEnv's value, else this machine's
// (trust authentication for local TCP connections).
func testDSN() string { return testserver.For("postgres").URL }

// requireServer skips or fails t unless the test server answers.
func requireServer(t testing.TB) string {
	t.Helper()
	dsn := testDSN()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("%s: %v", dsnEnv, err)
	}
	addr := ""
	if !strings.HasPrefix(cfg.Host, "/") { // not a Unix socket directory
		addr = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	testserver.For("postgres").Require(t, addr)
	return dsn
}

// newSchema creates a schema of its own for t, dropped with everything in
// it when t ends, and returns its name.
func newSchema(t testing.TB) string {
	t.Helper()
	dsn := requireServer(t)
	var rnd [6]byte
	rand.Read(rnd[:])
	schema := "anarchon_test_" + hex.EncodeToString(rnd[:])
	exec(t, dsn, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() { exec(t, dsn, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return schema
}

// exec runs one statement on a connection of its own.
func exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// query runs one query of one column on a connection of its own and returns
// its values.
func query[T any](t testing.TB, sql string, args ...any) []T {
	t.Helper()
	return queryRows(t, pgx.RowTo[T], sql, args...)
}

// queryRows runs one query on a connection of its own and returns its rows.
func queryRows[T any](t testing.TB, scan pgx.RowToFunc[T], sql string, args ...any) []T {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testDSN())
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// open opens a backend on table, closed at the end of the test.
func open(t testing.TB, table string) *Backend {
	t.Helper()
	return openWith(t, Options{DSN: testDSN(), Table: table})
}

func openWith(t testing.TB, o Options) *Backend {
	t.Helper()
	b, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("open %s: %v", o.Table, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	claimtest.Exercise(t, claimtest.Harness{
		New: func(t *testing.T) claim.Backend {
			return open(t, newSchema(t)+".runs")
		},
		// A second pool on the same table: racing claimers then cross
		// connections and the row locks, not a client mutex, pick the winner.
		Open: func(t *testing.T, b claim.Backend) claim.Backend {
			return open(t, b.(*Backend).Table())
		},
		// No Transient: a claim race must never see an error.
		Controller: true,
		Registry:   true,
		// A role that may use the schema but not the tables in it.
		Permanent: func(t *testing.T) (claim.Backend, error) {
			schema := newSchema(t)
			open(t, schema+".runs")
			role, dsn := newRole(t)
			exec(t, testDSN(), "GRANT USAGE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO "+pgx.Identifier{role}.Sanitize())
			b, err := New(t.Context(), Options{DSN: dsn, Table: schema + ".runs"})
			if err == nil {
				t.Cleanup(func() { b.Close() })
			}
			return b, err
		},
	})
}

// raceTableEnv names the shared table of the process race in the children.
const raceTableEnv = "PGCLAIM_RACE_TABLE"

// TestProcessRace: 3 processes × 4 goroutines claim the same 100 slots on
// one fresh table (so the processes also race through the migration).
func TestProcessRace(t *testing.T) {
	table := newSchema(t) + ".race"
	claimtest.ProcessRace(t, claimtest.ProcessOptions{
		Processes:  3,
		Goroutines: 4,
		Slots:      100,
		Env:        []string{raceTableEnv + "=" + table},
		Open:       func(t *testing.T) claim.Backend { return open(t, table) },
	})
}

// TestHelperProcess is a race process of TestProcessRace; on its own it
// does nothing.
func TestHelperProcess(t *testing.T) {
	claimtest.HelperProcess(t, claimtest.HelperOptions{
		Open: func(ctx context.Context) (claim.Backend, error) {
			return New(ctx, Options{DSN: testDSN(), Table: os.Getenv(raceTableEnv)})
		},
	})
}

func TestMigrationConcurrent(t *testing.T) {
	schema := newSchema(t)
	table := schema + ".fresh"
	// Eight instances starting together on a fresh table.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			b, err := New(t.Context(), Options{DSN: testDSN(), Table: table})
			if err == nil {
				err = b.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("instances starting together on a fresh table must all migrate or find it migrated: %v", err)
	}
	open(t, table) // and once more, alone
	versions := query[int32](t, `SELECT version FROM `+pgx.Identifier{schema, "fresh_schema"}.Sanitize()+` ORDER BY version`)
	if len(versions) != len(migrations) || versions[0] != 1 {
		t.Fatalf("fresh_schema must hold each version once: got %v", versions)
	}
	tables := query[string](t, `SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
	if got := strings.Join(tables, " "); got != "fresh fresh_control fresh_history fresh_instances fresh_jobs fresh_schema" {
		t.Fatalf("tables of the schema: got %s", got)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	schema := newSchema(t)
	open(t, schema+".runs")
	exec(t, testDSN(), `INSERT INTO `+pgx.Identifier{schema, "runs_schema"}.Sanitize()+` (version) VALUES (99)`)
	_, err := New(t.Context(), Options{DSN: testDSN(), Table: schema + ".runs"})
	if err == nil || !strings.Contains(err.Error(), "schema version 99 is newer") {
		t.Fatalf("an older anarchond on a newer schema must refuse to start, got %v", err)
	}
}

// TestSchemaCreated: a schema-qualified table in a schema that does not
// exist yet creates the schema.
func TestSchemaCreated(t *testing.T) {
	schema := newSchema(t)
	inner := schema + "_inner"
	t.Cleanup(func() { exec(t, testDSN(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{inner}.Sanitize()+" CASCADE") })
	b := open(t, inner+".runs")
	if b.Table() != inner+".runs" {
		t.Fatalf("Table() = %q, want %q", b.Table(), inner+".runs")
	}
	claimOnce(t, b, "j", time.Now().UnixMilli())
}

// TestUnqualifiedTable: a table without a schema lands in the session's
// current_schema(), resolved once at New.
func TestUnqualifiedTable(t *testing.T) {
	schema := newSchema(t)
	dsn, err := url.Parse(testDSN())
	if err != nil {
		t.Skipf("%s is not a URL: %v", dsnEnv, err)
	}
	q := dsn.Query()
	q.Set("search_path", schema)
	dsn.RawQuery = q.Encode()
	b := openWith(t, Options{DSN: dsn.String(), Table: "Runs"})
	if want := schema + ".Runs"; b.Table() != want {
		t.Fatalf("Table() = %q, want %q", b.Table(), want)
	}
	claimOnce(t, b, "j", time.Now().UnixMilli())
	// The default table name, too.
	b2 := openWith(t, Options{DSN: dsn.String()})
	if want := schema + "." + DefaultTable; b2.Table() != want {
		t.Fatalf("Table() = %q, want %q", b2.Table(), want)
	}
}

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{DSN: "postgres://h/db", Table: "a.b.c"}, `"b.c" is not a name`},
		{Options{DSN: "postgres://h/db", Table: "1runs"}, `"1runs" is not a name`},
		{Options{DSN: "postgres://h/db", Table: "runs; DROP TABLE x"}, `is not a name`},
		{Options{DSN: "postgres://h/db", Table: strings.Repeat("r", 49)}, `is not a name`},
		{Options{DSN: " "}, "backend.postgres.dsn is empty"},
		{Options{DSN: "postgres://h/db", PasswordFile: "/nonexistent/pw"}, "/nonexistent/pw"},
		{Options{DSN: "postgres://h/db", SynchronousCommit: "fast"}, `backend.postgres.synchronousCommit "fast": must be one of on, off, local, remote_write, remote_apply`},
	} {
		_, err := New(t.Context(), tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): want an error containing %q, got %v", tc.o, tc.want, err)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), Options{DSN: "postgres://h/db", PasswordFile: empty}); err == nil ||
		!strings.Contains(err.Error(), "is empty") {
		t.Errorf("an empty password file must be refused, got %v", err)
	}
}

// TestPasswordNeverShown: New's errors and the log never show a password,
// from the DSN (URL or key=value, plain or percent-encoded) or from the
// password file, when the connection fails.
func TestPasswordNeverShown(t *testing.T) {
	// A port nobody listens on: the connection is refused at once.
	closed := closedPort(t)
	pwFile := filepath.Join(t.TempDir(), "pw")
	const fileSecret = "fileS3cret-Zq"
	if err := os.WriteFile(pwFile, []byte(fileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const special = "p@ss:w/rd%?&= Zq"
	for _, tc := range []struct {
		name, dsn, file string
		secrets         []string
		server          bool // the DSN names the test server (the server answers with an error)
	}{
		{"url", "postgres://postgres:urlS3cret-Zq@127.0.0.1:" + closed + "/test?sslmode=disable", "", []string{"urlS3cret-Zq"}, false},
		{"url special", "postgres://" + url.UserPassword("postgres", special).String() + "@127.0.0.1:" + closed + "/test?sslmode=disable", "",
			[]string{special, url.UserPassword("postgres", special).String(), url.PathEscape(special), url.QueryEscape(special)}, false},
		{"url special badly escaped", "postgres://postgres:" + url.PathEscape(special) + "@127.0.0.1:" + closed + "/test?sslmode=disable", "",
			[]string{special, url.PathEscape(special), url.QueryEscape(special)}, false},
		{"url query", "postgres://postgres@127.0.0.1:" + closed + "/test?sslmode=disable&password=qS3cret-Zq", "", []string{"qS3cret-Zq"}, false},
		{"key=value", "host=127.0.0.1 port=" + closed + " user=postgres password=kvS3cret-Zq dbname=test sslmode=disable", "", []string{"kvS3cret-Zq"}, false},
		{"key=value quoted", "host=127.0.0.1 port=" + closed + " user=postgres password='kv S3cret Zq' dbname=test sslmode=disable", "", []string{"kv S3cret Zq"}, false},
		{"password file", "postgres://postgres@127.0.0.1:" + closed + "/test?sslmode=disable", pwFile, []string{fileSecret}, false},
		{"password file over dsn", "postgres://postgres:dsnS3cret-Zq@127.0.0.1:" + closed + "/test?sslmode=disable", pwFile,
			[]string{fileSecret, "dsnS3cret-Zq"}, false},
		{"unparsable url", "postgres://postgres:badS3cret-Zq@127.0.0.1:notaport/test", "", []string{"badS3cret-Zq"}, false},
		{"unparsable key=value", "host=127.0.0.1 password=badKv-S3cret-Zq port=notaport", "", []string{"badKv-S3cret-Zq"}, false},
		{"unknown role", serverDSN(t, "nobody_zq", "roleS3cret-Zq", "test"), "", []string{"roleS3cret-Zq"}, true},
		{"unknown database", serverDSN(t, "", "dbS3cret-Zq", "nonexistent_zq"), pwFile, []string{"dbS3cret-Zq", fileSecret}, true},
		{"bad sslmode", "postgres://postgres:sslS3cret-Zq@127.0.0.1:" + closed + "/test?sslmode=bogus", "", []string{"sslS3cret-Zq"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.server {
				requireServer(t)
			}
			core, logs := observer.New(zap.DebugLevel)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			b, err := New(ctx, Options{DSN: tc.dsn, PasswordFile: tc.file, Table: "runs", Log: zap.New(core)})
			if err == nil {
				b.Close()
				t.Fatal("New must fail on a closed port / a bad DSN")
			}
			msg := err.Error()
			for _, s := range tc.secrets {
				if strings.Contains(msg, s) {
					t.Fatalf("the error shows the password %q: %s", s, msg)
				}
				for _, e := range logs.All() {
					if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, s) {
						t.Fatalf("the log shows the password %q: %s", s, line)
					}
				}
			}
			if !strings.Contains(msg, "127.0.0.1") && !tc.server {
				t.Errorf("the error should still say where it tried to connect: %s", msg)
			}
			t.Logf("error: %s", msg)
		})
	}
}

// serverDSN is the test server's DSN with user (unless empty), password and
// database replaced.
func serverDSN(t *testing.T, user, password, database string) string {
	u, err := url.Parse(testDSN())
	if err != nil {
		t.Skipf("%s is not a URL: %v", dsnEnv, err)
	}
	if user == "" {
		user = u.User.Username()
	}
	u.User = url.UserPassword(user, password)
	u.Path = "/" + database
	return u.String()
}

// closedPort returns a local TCP port that refuses connections.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	return port
}

// TestPasswordFileUsed: with a password file the backend connects (the
// test server trusts local connections, so the password is not checked).
func TestPasswordFileUsed(t *testing.T) {
	schema := newSchema(t)
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("whatever\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := openWith(t, Options{DSN: testDSN(), PasswordFile: pwFile, Table: schema + ".runs"})
	claimOnce(t, b, "pwfile", time.Now().UnixMilli())
}

// claimOnce claims job@slot, which must be won(1), and returns the request.
func claimOnce(t testing.TB, b *Backend, job string, slot int64) claim.Request {
	t.Helper()
	r := claim.Request{Job: job, Slot: slot, Token: claim.NewToken(), Instance: "i-" + claim.NewToken().Short(),
		MaxLate: 24 * time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapAllow}
	res, err := b.Claim(context.Background(), r)
	if err != nil || res.Outcome != claim.Won || res.Attempt != 1 {
		t.Fatalf("claim %s@%d: want won(1), got %+v %v", job, slot, res, err)
	}
	return r
}

// TestOutputTailCleaned: NUL bytes and invalid UTF-8, which PostgreSQL text
// refuses, are stored as "?".
func TestOutputTailCleaned(t *testing.T) {
	b := open(t, newSchema(t)+".runs")
	r := claimOnce(t, b, "nul", time.Now().UnixMilli())
	fin := claim.Finish{Status: claim.StatusFailed, ExitCode: 1, OutputTail: "a\x00b\xffc ✗\x00"}
	if err := b.Finish(t.Context(), r.Fence(1), fin); err != nil {
		t.Fatalf("finish with NUL bytes in the output: %v", err)
	}
	run, _, err := b.Read(t.Context(), r.Job, r.Slot)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a?b?c ✗?"; run.OutputTail != want {
		t.Fatalf("output tail: want %q, got %q", want, run.OutputTail)
	}
	if run.ExitCode == nil || *run.ExitCode != 1 || run.Status != claim.StatusFailed {
		t.Fatalf("the result must be recorded: %+v", run)
	}
}

// TestHistory checks the history rows of a run's life: claimed, released,
// takeover, finished; and interrupted when the attempts run out.
func TestHistory(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	b := open(t, schema+".runs")
	slot := time.Now().UnixMilli()
	req := func() claim.Request {
		return claim.Request{Job: "h", Slot: slot, Token: claim.NewToken(), Instance: "i-" + claim.NewToken().Short(),
			MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapSkip}
	}
	mustClaim := func(r claim.Request, want claim.Outcome, attempt int) {
		t.Helper()
		res, err := b.Claim(ctx, r)
		if err != nil || res.Outcome != want || res.Attempt != attempt {
			t.Fatalf("claim: want %s(%d), got %+v %v", want, attempt, res, err)
		}
	}
	a := req()
	mustClaim(a, claim.Won, 1)
	if err := b.Release(ctx, a.Fence(1)); err != nil {
		t.Fatal(err)
	}
	c := req()
	mustClaim(c, claim.Won, 2)
	if err := b.Finish(ctx, c.Fence(2), claim.Finish{Status: claim.StatusFailed, ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	// A second run whose attempts run out (maxAttempts 1, released).
	d := req()
	d.Slot, d.MaxAttempts = slot+1, 1
	mustClaim(d, claim.Won, 1)
	if err := b.Release(ctx, d.Fence(1)); err != nil {
		t.Fatal(err)
	}
	e := req()
	e.Slot, e.MaxAttempts = d.Slot, 1
	mustClaim(e, claim.Done, 1)

	type row struct {
		Slot    int64
		Attempt int32
		Token   string
		Event   string
	}
	rows := queryRows(t, pgx.RowToStructByPos[row], `SELECT slot, attempt, token, event FROM `+pgx.Identifier{schema, "runs_history"}.Sanitize()+
		` WHERE job = 'h' ORDER BY id`)
	who := map[string]string{string(a.Token): "a", string(c.Token): "c", string(d.Token): "d", string(e.Token): "e"}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s/%s/%d@+%d", r.Event, who[r.Token], r.Attempt, r.Slot-slot))
	}
	want := "claimed/a/1@+0 released/a/1@+0 takeover/c/2@+0 finished/c/2@+0 claimed/d/1@+1 released/d/1@+1 interrupted/d/1@+1"
	if strings.Join(got, " ") != want {
		t.Fatalf("history:\n want %s\n got  %s", want, strings.Join(got, " "))
	}
}

// queryCounter is a pgx tracer that counts the statements sent.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestStatementsPerCall: every claim is one call of the claim function
// (the cheap read is its first step); renew, finish and release are one
// statement each. (With pgx's statement
// cache, a statement is one round trip once its connection has prepared it.)
func TestStatementsPerCall(t *testing.T) {
	ctx := t.Context()
	qc := &queryCounter{}
	b := openWith(t, Options{DSN: testDSN(), Table: newSchema(t) + ".runs", tracer: qc})
	count := func(what string, want int64, f func() error) {
		t.Helper()
		before := qc.n.Load()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := qc.n.Load() - before; got != want {
			t.Fatalf("%s: want %d statement(s), got %d", what, want, got)
		}
	}
	var r claim.Request
	count("a first claim", 1, func() error { r = claimOnce(t, b, "rt", time.Now().UnixMilli()); return nil })
	count("a re-sent claim of a live run", 1, func() error {
		res, err := b.Claim(ctx, r)
		if err == nil && res.Outcome != claim.Won {
			err = fmt.Errorf("want won, got %s", res.Outcome)
		}
		return err
	})
	count("another instance's claim of a live run", 1, func() error {
		o := r
		o.Token = claim.NewToken()
		res, err := b.Claim(ctx, o)
		if err == nil && res.Outcome != claim.Running {
			err = fmt.Errorf("want running, got %s", res.Outcome)
		}
		return err
	})
	count("renew", 1, func() error { _, err := b.Renew(ctx, r.Fence(1), time.Minute); return err })
	count("release", 1, func() error { return b.Release(ctx, r.Fence(1)) })
	count("finish", 1, func() error {
		// Released, but still running under r's token: r may still finish.
		return b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded})
	})
}

// TestRepeatableReadDefault: a database whose default isolation is
// REPEATABLE READ must not turn claims queued on a job's lock into
// serialization failures (the backend sets READ COMMITTED on its sessions).
func TestRepeatableReadDefault(t *testing.T) {
	dsn, err := url.Parse(testDSN())
	if err != nil {
		t.Skipf("%s is not a URL: %v", dsnEnv, err)
	}
	q := dsn.Query()
	q.Set("default_transaction_isolation", "repeatable read")
	dsn.RawQuery = q.Encode()
	b := openWith(t, Options{DSN: dsn.String(), Table: newSchema(t) + ".runs"})
	base := time.Now().UnixMilli()
	var wg sync.WaitGroup
	var won [20]atomic.Int32
	errs := make([]error, 8)
	for g := range errs {
		wg.Go(func() {
			tok := claim.NewToken()
			for i := range won {
				res, err := b.Claim(t.Context(), claim.Request{Job: "rr", Slot: base + int64(i), Token: tok,
					Instance: fmt.Sprint("g", g), MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3,
					Overlap: claim.OverlapAllow})
				if err != nil {
					errs[g] = err
					return
				}
				if res.Outcome == claim.Won {
					won[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("claims under a REPEATABLE READ default: %v", err)
	}
	for i := range won {
		if n := won[i].Load(); n != 1 {
			t.Fatalf("slot %d: %d winners, want 1", i, n)
		}
	}
}

// TestPruneForgetsJobs: Prune deletes old finished runs with their
// history, and the lock rows that instances of schema version 1 kept in
// <table>_jobs for jobs with no runs left.
func TestPruneForgetsJobs(t *testing.T) {
	schema := newSchema(t)
	b := open(t, schema+".runs")
	jobs := pgx.Identifier{schema, "runs_jobs"}.Sanitize()
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	r := claimOnce(t, b, "gone", old)
	if err := b.Finish(t.Context(), r.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	claimOnce(t, b, "stays", time.Now().UnixMilli())
	query[string](t, `INSERT INTO `+jobs+` (job) VALUES ('gone'), ('stays') RETURNING job`)
	n, err := b.Prune(t.Context(), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("prune: want 1 run deleted, got %d %v", n, err)
	}
	if got := strings.Join(query[string](t, `SELECT job FROM `+jobs+` ORDER BY job`), " "); got != "stays" {
		t.Fatalf("job rows after the prune: want stays, got %q", got)
	}
	if got := query[int64](t, `SELECT count(*) FROM `+pgx.Identifier{schema, "runs_history"}.Sanitize()+` WHERE job = 'gone'`); got[0] != 0 {
		t.Fatalf("the pruned run's history must be gone, %d rows left", got[0])
	}
}

// TestContextCancelWhileWaiting: a claim queued behind another transaction
// holding the job's lock gives up when its context ends, and its error names
// the run.
func TestContextCancelWhileWaiting(t *testing.T) {
	schema := newSchema(t)
	b := open(t, schema+".runs")
	conn, err := pgx.Connect(t.Context(), testDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	// The job's lock, as the claim function takes it.
	if _, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock($1::regclass::oid::integer, hashtext('c'))`,
		pgx.Identifier{schema, "runs_jobs"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = b.Claim(ctx, claim.Request{Job: "c", Slot: time.Now().UnixMilli(), Token: claim.NewToken(),
		Instance: "x", MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 1})
	if err == nil {
		t.Fatal("a claim that cannot get the job's lock before its context ends must fail")
	}
	if !strings.Contains(err.Error(), "claim c@") {
		t.Fatalf("the error must name the run: %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the error must say the context ended: %v", err)
	}
}

// TestFunctionMatchesDecide: the claim function and claim.Decide are the
// same table. Every combination of a run's state (none, running live or
// expired under the caller's or another token at attempt 1 or 3, each
// final status, each note), another live run of the job or not, overlap skip or
// allow, a fresh or a late slot, and maxAttempts 1 or 3 is written to the
// table directly; the function's answer and the row it leaves must be what
// claim.Decide says, given the store time the function reports.
func TestFunctionMatchesDecide(t *testing.T) {
	ctx := t.Context()
	b := open(t, newSchema(t)+".runs")
	_, now, err := b.Read(ctx, "probe", 0)
	if !errors.Is(err, claim.ErrNotFound) {
		t.Fatal(err)
	}
	insert := b.names.expand(`INSERT INTO {{runs}} (job, slot, status, attempt, instance, token,
		started_at, finished_at, lease_until, exit_code, output_tail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, '')`)
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0 // a note's
		}
		return t.UnixMilli()
	}
	put := func(r claim.Run) {
		t.Helper()
		var fin *int64
		if !r.FinishedAt.IsZero() {
			v := r.FinishedAt.UnixMilli()
			fin = &v
		}
		if _, err := b.pool.Exec(ctx, insert, r.Job, r.Slot, string(r.Status), r.Attempt, r.Instance, string(r.Token),
			ms(r.StartedAt), fin, ms(r.LeaseUntil), r.ExitCode); err != nil {
			t.Fatal(err)
		}
	}
	type state struct {
		name    string
		status  claim.Status // "" for none
		live    bool
		mine    bool
		attempt int
	}
	states := []state{{name: "none"}}
	for _, live := range []bool{true, false} {
		for _, mine := range []bool{true, false} {
			for _, attempt := range []int{1, 3} {
				states = append(states, state{fmt.Sprintf("running live=%v mine=%v attempt=%d", live, mine, attempt),
					claim.StatusRunning, live, mine, attempt})
			}
		}
	}
	for _, st := range []claim.Status{claim.StatusSucceeded, claim.StatusFailed, claim.StatusTimeout, claim.StatusInterrupted} {
		states = append(states, state{name: string(st), status: st, attempt: 1})
	}
	for _, st := range claim.NoteStatuses {
		states = append(states, state{name: string(st), status: st})
	}
	n := 0
	for _, st := range states {
		for _, other := range []bool{false, true} {
			for _, ov := range []claim.OverlapPolicy{claim.OverlapSkip, claim.OverlapAllow} {
				for _, late := range []bool{false, true} {
					for _, maxAttempts := range []int{1, 3} {
						n++
						job := fmt.Sprintf("decide%03d", n)
						slot := now.Add(-time.Minute).UnixMilli()
						if late {
							slot = now.Add(-2 * time.Hour).UnixMilli()
						}
						req := claim.Request{Job: job, Slot: slot, Token: claim.NewToken(), Instance: "caller",
							MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: maxAttempts, Overlap: ov}
						var cur *claim.Run
						if st.status != "" {
							r := claim.Run{Job: job, Slot: slot, Status: st.status, Attempt: st.attempt, Instance: "holder",
								Token: claim.NewToken(), StartedAt: now.Add(-3 * time.Hour), LeaseUntil: now.Add(-time.Hour)}
							if st.mine {
								r.Token = req.Token
							}
							if st.live {
								r.LeaseUntil = now.Add(time.Hour)
							}
							if st.status.Final() {
								r.FinishedAt = now.Add(-time.Hour)
								if st.status != claim.StatusInterrupted && !st.status.Noted() {
									code := 0
									r.ExitCode = &code
								}
							}
							if st.status.Noted() {
								r.Token, r.StartedAt, r.LeaseUntil = "", time.Time{}, time.Time{}
							}
							put(r)
							cur = &r
						}
						if other {
							put(claim.Run{Job: job, Slot: slot + 60_000, Status: claim.StatusRunning, Attempt: 1,
								Instance: "other", Token: claim.NewToken(), StartedAt: now, LeaseUntil: now.Add(time.Hour)})
						}
						what := fmt.Sprintf("%s, other live=%v, overlap %s, late=%v, maxAttempts %d", st.name, other, ov, late, maxAttempts)
						res, err := b.claimLocked(ctx, req)
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						want := claim.Decide(cur, other, res.StoreNow, req)
						if res != want.Result {
							t.Errorf("%s:\n function %+v\n Decide   %+v", what, res, want.Result)
							continue
						}
						got, _, err := b.Read(ctx, job, slot)
						switch {
						case want.Write == nil && cur == nil:
							if !errors.Is(err, claim.ErrNotFound) {
								t.Errorf("%s: no write wanted, but the run exists: %+v %v", what, got, err)
							}
						case err != nil:
							t.Fatalf("%s: read: %v", what, err)
						default:
							w := cur
							if want.Write != nil {
								w = want.Write
							}
							if got.Status != w.Status || got.Attempt != w.Attempt || got.Token != w.Token ||
								got.Instance != w.Instance || !got.LeaseUntil.Equal(w.LeaseUntil) ||
								!got.FinishedAt.Equal(w.FinishedAt) || !got.StartedAt.Equal(w.StartedAt) {
								t.Errorf("%s:\n row    %+v\n Decide %+v", what, got, *w)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations agree", n)
}

// TestStartDoesNotWaitForAStuckMigration: an instance that holds the
// migration lock (stuck inside its migration transaction: paused, or its
// replies lost) does not hold the start of instances that find the schema
// current.
func TestStartDoesNotWaitForAStuckMigration(t *testing.T) {
	schema := newSchema(t)
	b := open(t, schema+".runs")
	conn, err := pgx.Connect(t.Context(), testDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), lockMigrationSQL, b.names.lockKey("migrate")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	other, err := New(ctx, Options{DSN: testDSN(), Table: schema + ".runs"})
	if err != nil {
		t.Fatalf("start while another session holds the migration lock: %v", err)
	}
	other.Close()
}
