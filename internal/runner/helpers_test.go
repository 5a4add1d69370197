package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/supervise"
)

// The test binary doubles as the supervisor (as anarchond does with its
// hidden supervise command) and as a stand-in daemon: these first arguments
// select the mode in TestMain.
const (
	superviseArg = "anarchon-test-supervise"
	daemonArg    = "anarchon-test-daemon"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case superviseArg:
			os.Exit(supervise.Main(os.Args[2:]))
		case daemonArg:
			os.Exit(helperDaemon(os.Args[2], os.Args[3:]))
		}
	}
	code := m.Run()
	if sharedGuard.g != nil {
		sharedGuard.g.Close()
	}
	if smallBuild.dir != "" {
		os.RemoveAll(smallBuild.dir)
	}
	os.Exit(code)
}

// smallBuild is cmd/anarchon-supervise, built once by smallSupervisor.
var smallBuild struct {
	once     sync.Once
	dir, bin string
	err      error
}

// smallSupervisor returns the path of the anarchon-supervise binary, built
// on first use into a temporary directory that TestMain removes.
func smallSupervisor(t testing.TB) string {
	t.Helper()
	smallBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "anarchon-runner-test-")
		if err != nil {
			smallBuild.err = err
			return
		}
		smallBuild.dir = dir
		bin := filepath.Join(dir, "anarchon-supervise")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/anarchon/anarchon/cmd/anarchon-supervise").CombinedOutput()
		if err != nil {
			smallBuild.err = fmt.Errorf("go build ./cmd/anarchon-supervise: %w: %s", err, out)
			return
		}
		smallBuild.bin = bin
	})
	if smallBuild.err != nil {
		t.Fatal(smallBuild.err)
	}
	return smallBuild.bin
}

// supervisors are the argv prefixes of the two supervisors the runner may be
// given, by name: this test binary standing for `anarchond supervise`, and
// anarchon-supervise.
func supervisors(t *testing.T) map[string][]string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]string{
		"anarchond supervise": {exe, superviseArg, "--"},
		"anarchon-supervise":  {smallSupervisor(t), "--"},
	}
}

// sharedGuard is the job guard of the package's tests: this test binary in
// the guard's mode, started on first use, closed by TestMain.
var sharedGuard struct {
	once sync.Once
	g    *Guard
	err  error
}

// testGuard returns the shared job guard.
func testGuard(t testing.TB) *Guard {
	t.Helper()
	sharedGuard.once.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			sharedGuard.err = err
			return
		}
		sharedGuard.g, sharedGuard.err = StartGuard([]string{exe, superviseArg, supervise.GuardFlag}, nil)
	})
	if sharedGuard.err != nil {
		t.Fatal(sharedGuard.err)
	}
	return sharedGuard.g
}

// guardArg, in place of a supervisor's argv prefix, has the stand-in daemon
// start its jobs directly, watched by a guard (this test binary).
const guardArg = "guard"

// orphanCommand is the job of the stand-in daemon: a shell with a background
// grandchild; it writes its parent's (the supervisor, or the daemon when a
// guard watches the job), the shell's and the sleep's pids.
const orphanCommand = `echo $PPID > sup.tmp && mv sup.tmp sup.pid
echo $$ > sh.tmp && mv sh.tmp sh.pid
sleep 30 &
echo $! > sleep.tmp && mv sleep.tmp sleep.pid
wait`

// helperDaemon runs orphanCommand in dir with a Runner whose supervisor is
// the argv prefix sup (or, when sup is guardArg, with a guard), like the
// daemon would, until the test SIGKILLs this process.
func helperDaemon(dir string, sup []string) int {
	r := &Runner{
		Backend: &store{}, Clock: clock.Real{}, Instance: "helper",
		Supervisor: sup, BaseEnv: os.Environ(),
	}
	if len(sup) == 1 && sup[0] == guardArg {
		exe, err := os.Executable()
		if err == nil {
			r.Guard, err = StartGuard([]string{exe, superviseArg, supervise.GuardFlag}, nil)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "helper daemon: %v\n", err)
			return 1
		}
	}
	job := config.Job{Name: "orphan", Command: orphanCommand, Shell: "/bin/sh", Workdir: dir,
		Timeout: time.Minute, KillGrace: time.Second, OutputTailBytes: 1024}
	rep := r.Run(context.Background(), execution(job))
	fmt.Fprintf(os.Stderr, "helper daemon: run ended: %+v\n", rep)
	return 0
}

// store is an in-memory claim-only backend: it records Finish calls.
type store struct {
	mu        sync.Mutex
	finishes  []claim.Finish
	fences    []claim.Fence
	calls     int     // Finish calls
	finishErr []error // answers of the first Finish calls
}

func (s *store) Claim(context.Context, claim.Request) (claim.Result, error) {
	return claim.Result{}, errors.New("store: Claim is not used by the runner")
}

func (s *store) Finish(_ context.Context, f claim.Fence, fin claim.Finish) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.finishErr) > 0 {
		err := s.finishErr[0]
		s.finishErr = s.finishErr[1:]
		if err != nil {
			return err
		}
	}
	s.finishes = append(s.finishes, fin)
	s.fences = append(s.fences, f)
	return nil
}

func (s *store) ListRuns(context.Context, claim.ListQuery) ([]claim.Run, error) { return nil, nil }
func (s *store) Close() error                                                   { return nil }

func (s *store) finished() ([]claim.Finish, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]claim.Finish(nil), s.finishes...), s.calls
}

// leaseStore is an in-memory lease backend whose renewals answer what the
// test tells them to.
type leaseStore struct {
	store
	// renew answers the n-th renewal (from 1); nil: success.
	renew func(n int) (claim.Result, error)
	// stuck, if set, makes the n-th renewal wait for its context (a
	// request or reply lost on the way) when it returns true.
	stuck    func(n int) bool
	renews   int
	releases []claim.Fence
}

var _ claim.Leaser = (*leaseStore)(nil)

func (l *leaseStore) Renew(ctx context.Context, f claim.Fence, _ time.Duration) (claim.Result, error) {
	l.mu.Lock()
	l.renews++
	n, answer, stuck := l.renews, l.renew, l.stuck
	l.mu.Unlock()
	if stuck != nil && stuck(n) {
		<-ctx.Done()
		return claim.Result{}, ctx.Err()
	}
	if answer == nil {
		return claim.Result{Outcome: claim.Won, Attempt: f.Attempt}, nil
	}
	return answer(n)
}

func (l *leaseStore) Release(_ context.Context, f claim.Fence) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releases = append(l.releases, f)
	return nil
}

func (l *leaseStore) Read(context.Context, string, int64) (claim.Run, time.Time, error) {
	return claim.Run{}, time.Time{}, claim.ErrNotFound
}

func (l *leaseStore) counts() (renews, releases, finishes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renews, len(l.releases), l.calls
}

var errTransport = errors.New("dial tcp 127.0.0.1:6379: connection refused")

var (
	testSlot  = time.Date(2027, 3, 28, 1, 0, 0, 0, time.UTC)
	testToken = claim.Token("0123456789abcdef0123456789abcdef")
)

// execution is attempt 2 of job at testSlot.
func execution(job config.Job) Execution {
	return Execution{
		Job:   job,
		Fence: claim.Fence{Job: job.Name, Slot: testSlot.UnixMilli(), Token: testToken, Attempt: 2},
		Slot:  testSlot,
	}
}

// shellJob is a job running command with /bin/sh and generous limits.
func shellJob(name, command string) config.Job {
	return config.Job{
		Name: name, Command: command, Shell: "/bin/sh",
		Lease: 30 * time.Second, Heartbeat: 10 * time.Second,
		Timeout: time.Minute, KillGrace: 5 * time.Second, OutputTailBytes: 64 << 10,
		// A supervisor (this binary) runs with the job's environment.
		InheritEnv: []string{"GORACE"},
	}
}

// noRaceExitSleep spares each supervisor (this binary, built with -race) the
// race runtime's 1 s sleep at exit.
const noRaceExitSleep = "GORACE=atexit_sleep_ms=0"

// newRunner returns a Runner that starts its jobs directly, watched by the
// shared guard (as the daemon does), whose supervisor (used when Guard is
// set to nil) is this test binary, and whose log is observed at debug
// level.
func newRunner(t testing.TB, b claim.Backend, clk clock.Clock) (*Runner, *observer.ObservedLogs) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	return &Runner{
		Backend: b, Clock: clk, Log: zap.New(core), Instance: "test-1",
		Supervisor: []string{exe, superviseArg, "--"}, Guard: testGuard(t),
		BaseEnv: []string{"PATH=" + os.Getenv("PATH"), "BASE_ONLY=base", "SHARED=base",
			noRaceExitSleep},
	}, logs
}

// run runs e and fails the test if Run takes longer than limit.
func run(t *testing.T, r *Runner, ctx context.Context, e Execution, limit time.Duration) Report {
	t.Helper()
	done := startRun(r, ctx, e)
	return await(t, done, limit)
}

// startRun runs e in the background; the channel yields the report.
func startRun(r *Runner, ctx context.Context, e Execution) <-chan Report {
	done := make(chan Report, 1)
	go func() { done <- r.Run(ctx, e) }()
	return done
}

// await waits for a report for at most limit.
func await(t *testing.T, done <-chan Report, limit time.Duration) Report {
	t.Helper()
	select {
	case rep := <-done:
		return rep
	case <-time.After(limit):
		t.Fatalf("Run did not return within %v", limit)
		return Report{}
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readPid waits for the pid file dir/name (written with a rename, so never
// partial) and returns its pid.
func readPid(t *testing.T, dir, name string) int {
	t.Helper()
	var pid int
	waitFor(t, name, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// alive reports whether pid is a live process (a zombie is not: orphans
// reparented to a init that does not reap stay zombies).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}

// waitDead waits until none of pids is alive.
func waitDead(t *testing.T, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		waitFor(t, fmt.Sprintf("pid %d to be gone", pid), func() bool { return !alive(pid) })
	}
}

// waitLogs waits until logs hold at least n entries with message msg.
func waitLogs(t *testing.T, logs *observer.ObservedLogs, msg string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d log entries %q", n, msg), func() bool {
		return logs.FilterMessage(msg).Len() >= n
	})
}

// waitTimers waits until clk has n timers armed: the runner waits on them.
func waitTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.WaitTimers(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers: %v", n, err)
	}
}
