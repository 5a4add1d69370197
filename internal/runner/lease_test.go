package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
)

// The heartbeat tests run a real process (the command) on a fake clock (the
// lease logic). Lease 30 s, heartbeat 10 s: renewals at 10 s, 20 s, ...;
// failed renewals retried after 2.5 s; self-fence after 24 s without one.

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// leaseRun starts a lease job that writes its pid and then waits, on a fake
// clock, and returns once the runner waits on its three timers (timeout,
// lease guard, heartbeat).
type leaseRun struct {
	t    *testing.T
	clk  *clock.Fake
	ls   *leaseStore
	logs *observer.ObservedLogs
	dir  string
	pid  int
	done <-chan Report
}

func startLeaseRun(t *testing.T, ls *leaseStore, ctx context.Context, command string) *leaseRun {
	t.Helper()
	clk := clock.NewFake(t0)
	r, logs := newRunner(t, ls, clk)
	dir := t.TempDir()
	job := shellJob("leased", `echo $$ > pid.tmp && mv pid.tmp pid; `+command)
	job.Workdir = dir
	job.Timeout = time.Hour
	job.KillGrace = 10 * time.Second
	e := execution(job)
	e.ClaimedAt = clk.Now()
	lr := &leaseRun{t: t, clk: clk, ls: ls, logs: logs, dir: dir}
	lr.done = startRun(r, ctx, e)
	lr.pid = readPid(t, dir, "pid")
	lr.waitTimers()
	return lr
}

func (lr *leaseRun) waitTimers() {
	lr.t.Helper()
	waitTimers(lr.t, lr.clk, 3)
}

// at sets the fake clock to t0 + d.
func (lr *leaseRun) at(d time.Duration) { lr.clk.Set(t0.Add(d)) }

// running fails the test if Run has returned.
func (lr *leaseRun) running() {
	lr.t.Helper()
	select {
	case rep := <-lr.done:
		lr.t.Fatalf("Run returned early: %+v", rep)
	default:
	}
	if !alive(lr.pid) {
		lr.t.Fatal("the command is gone")
	}
}

func TestFencedRenewalStopsCommand(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{renew: func(int) (claim.Result, error) {
		return claim.Result{}, claim.ErrFenced
	}}
	lr := startLeaseRun(t, ls, context.Background(), "exec sleep 30")
	lr.at(10 * time.Second)
	rep := await(t, lr.done, 10*time.Second)
	if !rep.Fenced || rep.Recorded || rep.Released || rep.Status != "" || !errors.Is(rep.Err, claim.ErrFenced) {
		t.Fatalf("report = %+v", rep)
	}
	if renews, releases, finishes := ls.counts(); renews != 1 || releases != 0 || finishes != 0 {
		t.Fatalf("%d renewals, %d releases, %d finishes", renews, releases, finishes)
	}
	if lr.logs.FilterMessage("fenced: another instance took over; surrendering the run").Len() != 1 {
		t.Fatal("fencing not logged")
	}
	waitDead(t, lr.pid)
}

func TestSelfFenceWhenStoreUnreachable(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{renew: func(int) (claim.Result, error) { return claim.Result{}, errTransport }}
	lr := startLeaseRun(t, ls, context.Background(), "exec sleep 30")
	// Renewal at 10 s, then retries every 2.5 s.
	for i, ms := range []time.Duration{10000, 12500, 15000, 17500, 20000, 22500} {
		lr.at(ms * time.Millisecond)
		waitLogs(t, lr.logs, "lease renewal failed", i+1)
	}
	lr.at(24*time.Second - time.Millisecond)
	lr.running()
	if n := lr.logs.FilterMessage("store unreachable: lease renewal failed; retrying").Len(); n != 1 {
		t.Fatalf("outage logged %d times, want once", n)
	}
	lr.at(24 * time.Second) // lease 30 s - margin 6 s
	rep := await(t, lr.done, 10*time.Second)
	if !rep.Fenced || rep.Recorded || rep.Released || rep.Status != "" || !errors.Is(rep.Err, ErrLeaseLost) {
		t.Fatalf("report = %+v", rep)
	}
	if renews, releases, finishes := ls.counts(); renews != 6 || releases != 0 || finishes != 0 {
		t.Fatalf("%d renewals, %d releases, %d finishes", renews, releases, finishes)
	}
	entries := lr.logs.FilterMessageSnippet("fenced by my own clock").All()
	if len(entries) != 1 {
		t.Fatal("self-fencing not logged")
	}
	f := entries[0].ContextMap()
	if f["since_renewal"] != 24*time.Second || f["kill_grace"] != 6*time.Second {
		t.Fatalf("self-fence fields %v", f)
	}
	waitDead(t, lr.pid)
}

func TestRenewalOutageRecovers(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{renew: func(n int) (claim.Result, error) {
		if n <= 2 {
			return claim.Result{}, errTransport
		}
		return claim.Result{Outcome: claim.Won, Attempt: 2}, nil
	}}
	lr := startLeaseRun(t, ls, context.Background(), "while [ ! -e stop ]; do sleep 0.01; done")
	lr.at(10 * time.Second)
	waitLogs(t, lr.logs, "lease renewal failed", 1)
	lr.at(12500 * time.Millisecond)
	waitLogs(t, lr.logs, "lease renewal failed", 2)
	lr.at(15 * time.Second)
	waitLogs(t, lr.logs, "lease renewed", 1)
	lr.at(25 * time.Second)
	waitLogs(t, lr.logs, "lease renewed", 2)
	lr.at(30 * time.Second) // past the first lease's self-fence point (24 s)
	lr.running()
	if err := os.WriteFile(filepath.Join(lr.dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := await(t, lr.done, 10*time.Second)
	if rep.Fenced || !rep.Recorded || rep.Status != claim.StatusSucceeded || rep.Err != nil {
		t.Fatalf("report = %+v", rep)
	}
	if n := lr.logs.FilterMessage("store unreachable: lease renewal failed; retrying").Len(); n != 1 {
		t.Fatalf("outage logged %d times, want once", n)
	}
	rec := lr.logs.FilterMessage("store reachable again: lease renewed").All()
	if len(rec) != 1 || rec[0].ContextMap()["outage"] != 5*time.Second {
		t.Fatalf("recovery logged %v", rec)
	}
}

// The store may answer with less lease than asked for; the runner counts
// what it says is left.
func TestRenewalHonoursStoreLease(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{renew: func(n int) (claim.Result, error) {
		if n > 1 {
			return claim.Result{}, errTransport
		}
		now := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) // store time: unrelated to ours
		return claim.Result{Outcome: claim.Won, Attempt: 2, StoreNow: now, LeaseUntil: now.Add(10 * time.Second)}, nil
	}}
	lr := startLeaseRun(t, ls, context.Background(), "exec sleep 30")
	lr.at(10 * time.Second)
	waitLogs(t, lr.logs, "lease renewed", 1)
	lr.running()
	lr.at(14 * time.Second) // renewed at 10 s for 10 s, minus the 6 s margin
	rep := await(t, lr.done, 10*time.Second)
	if !errors.Is(rep.Err, ErrLeaseLost) {
		t.Fatalf("report = %+v", rep)
	}
	waitDead(t, lr.pid)
}

func TestHardStopReleasesLease(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{}
	ctx, cancel := context.WithCancel(context.Background())
	lr := startLeaseRun(t, ls, ctx, "exec sleep 30")
	cancel()
	rep := await(t, lr.done, 10*time.Second)
	if !rep.Released || rep.Recorded || rep.Fenced || rep.Status != "" || !errors.Is(rep.Err, ErrStopped) || rep.ExitCode != 143 {
		t.Fatalf("report = %+v", rep)
	}
	if _, releases, finishes := ls.counts(); releases != 1 || finishes != 0 || ls.releases[0] != execution(config.Job{Name: "leased"}).Fence {
		t.Fatalf("%d releases (%v), %d finishes", releases, ls.releases, finishes)
	}
	waitDead(t, lr.pid)
}

// A claim-only backend has no lease: nothing to renew.
func TestClaimOnlyDoesNotHeartbeat(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	s := &store{}
	r, _ := newRunner(t, s, clk)
	dir := t.TempDir()
	job := shellJob("plain", `echo $$ > pid.tmp && mv pid.tmp pid; while [ ! -e stop ]; do sleep 0.01; done`)
	job.Workdir = dir
	done := startRun(r, context.Background(), execution(job))
	readPid(t, dir, "pid")
	waitTimers(t, clk, 1) // the job's timeout
	clk.Advance(59 * time.Second)
	if n := clk.Timers(); n != 1 {
		t.Fatalf("%d timers armed, want the timeout only", n)
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := await(t, done, 10*time.Second); rep.Status != claim.StatusSucceeded || !rep.Recorded {
		t.Fatalf("report = %+v", rep)
	}
}

// Cancelled before it started: the command never runs, the lease is
// released.
func TestHardStopBeforeStart(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{}
	r, _ := newRunner(t, ls, clock.NewFake(t0))
	dir := t.TempDir()
	job := shellJob("never", "touch ran")
	job.Workdir = dir
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep := run(t, r, ctx, execution(job), 10*time.Second)
	if !rep.Released || rep.Recorded || rep.ExitCode != -1 || !errors.Is(rep.Err, ErrStopped) {
		t.Fatalf("report = %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran: %v", err)
	}
}

// A renewal whose answer never comes (its reply lost) does not cost the
// lease: at the next beat a second renewal goes out beside it, and its
// success keeps the command running past the first lease's guard.
func TestStuckRenewalGetsACompanion(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{stuck: func(n int) bool { return n == 1 }}
	lr := startLeaseRun(t, ls, context.Background(), "exec sleep 30")
	lr.at(10 * time.Second) // renewal 1: stuck
	waitTimers(t, lr.clk, 3)
	lr.at(20 * time.Second) // renewal 2, beside it: answered
	waitLogs(t, lr.logs, "lease renewed", 1)
	lr.at(25 * time.Second) // past the claim's guard (24 s)
	waitTimers(t, lr.clk, 3)
	lr.running()
	if n := lr.logs.FilterMessageSnippet("fenced").Len(); n != 0 {
		t.Fatalf("%d fencing log entries, want none", n)
	}
}

// A claim answered long after it was sent proves only a lease counted from
// the send: the runner renews before starting the command, and does not
// start it when the run is no longer its own.
func TestLateClaimAnswerRenewsFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		renew   func(int) (claim.Result, error)
		started bool
	}{
		{"renewed", func(int) (claim.Result, error) {
			return claim.Result{Outcome: claim.Won, Attempt: 1, StoreNow: t0, LeaseUntil: t0.Add(30 * time.Second)}, nil
		}, true},
		{"fenced", func(int) (claim.Result, error) { return claim.Result{}, claim.ErrFenced }, false},
		{"unreachable", func(int) (claim.Result, error) { return claim.Result{}, errTransport }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ls := &leaseStore{renew: tc.renew}
			clk := clock.NewFake(t0)
			r, logs := newRunner(t, ls, clk)
			dir := t.TempDir()
			job := shellJob("late", "echo ran > out")
			job.Workdir = dir
			e := execution(job)
			e.ClaimedAt = t0.Add(-20 * time.Second) // lease 30 s: 10 s left at most
			rep := await(t, startRun(r, context.Background(), e), 10*time.Second)
			if renews, _, _ := ls.counts(); renews < 1 {
				t.Fatal("no renewal before the command started")
			}
			_, err := os.Stat(filepath.Join(dir, "out"))
			if started := err == nil; started != tc.started {
				t.Fatalf("command started: %v, want %v (report %+v)", started, tc.started, rep)
			}
			if !tc.started && !rep.Fenced {
				t.Fatalf("report %+v, want fenced", rep)
			}
			// The start names the lease it runs under: the renewed one.
			started := logs.FilterMessage("job started").All()
			if len(started) != map[bool]int{true: 1}[tc.started] {
				t.Fatalf("%d job started lines, want %v", len(started), tc.started)
			}
			for _, l := range started {
				if got := l.ContextMap()["lease_until"]; !got.(time.Time).Equal(t0.Add(30 * time.Second)) {
					t.Fatalf("job started under lease_until %v, want the renewal's %v", got, t0.Add(30*time.Second))
				}
			}
		})
	}
}

// TestLapsedLeaseNotRevived: a claim answered after its whole lease had run
// out (a re-sent claim answered with its first copy's lease) does not start
// the command and does not renew: the store may already have let a backup
// or the job's next slot in.
func TestLapsedLeaseNotRevived(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{}
	clk := clock.NewFake(t0)
	r, _ := newRunner(t, ls, clk)
	dir := t.TempDir()
	job := shellJob("lapsed", "echo ran > out")
	job.Workdir = dir
	e := execution(job)
	e.ClaimedAt = t0.Add(-31 * time.Second) // lease 30 s: over
	rep := await(t, startRun(r, context.Background(), e), 10*time.Second)
	if renews, _, _ := ls.counts(); renews != 0 {
		t.Fatalf("%d renewals of a lapsed lease, want none", renews)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Fatal("the command started on a lapsed lease")
	}
	if !rep.Fenced || !errors.Is(rep.Err, ErrLeaseLost) {
		t.Fatalf("report %+v, want fenced with ErrLeaseLost", rep)
	}
}

// TestForkGatedByTheLease: the runner's last lease check is made around the
// fork itself, where a starved machine loses seconds. A fork due with less
// than the fencing margin of the lease left does not happen; an exec that
// completes after the lease ended is killed at once. Either way the attempt
// is fenced and nothing is recorded or renewed: a backup may hold the run.
func TestForkGatedByTheLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		before, after     time.Duration // the fake clock's advance around the fork
		forked            bool
		wantExitByKilling bool
	}{
		// Lease 30 s, margin 6 s: 5 s left is under the margin.
		{name: "margin", before: 25 * time.Second},
		{name: "exec-late", after: 31 * time.Second, forked: true, wantExitByKilling: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ls := &leaseStore{}
			clk := clock.NewFake(t0)
			r, logs := newRunner(t, ls, clk)
			r.beforeFork = func() { clk.Advance(tc.before) }
			r.afterFork = func() { clk.Advance(tc.after) }
			dir := t.TempDir()
			job := shellJob("gated", "echo $$ > started; sleep 2; echo ran > out")
			job.Workdir = dir
			e := execution(job)
			e.ClaimedAt = t0
			rep := await(t, startRun(r, context.Background(), e), 10*time.Second)
			if !rep.Fenced || !errors.Is(rep.Err, ErrLeaseLost) || rep.Recorded {
				t.Fatalf("report %+v, want fenced with ErrLeaseLost, not recorded", rep)
			}
			if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
				t.Fatal("the command ran to its end past its lease")
			}
			if tc.wantExitByKilling && rep.ExitCode != 128+int(syscall.SIGKILL) {
				t.Fatalf("exit code %d, want %d (SIGKILL)", rep.ExitCode, 128+int(syscall.SIGKILL))
			}
			if !tc.forked {
				if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
					t.Fatal("the command was forked with its lease nearly over")
				}
			}
			if renews, _, finishes := ls.counts(); renews != 0 || finishes != 0 {
				t.Fatalf("%d renewals and %d results recorded, want none", renews, finishes)
			}
			if logs.FilterMessageSnippet("job started").Len() != 0 {
				t.Fatal(`"job started" logged for a gated fork`)
			}
		})
	}
}
