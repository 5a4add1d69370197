package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

// hookFailures counts Hooks.HookFailed calls by "job/hook".
type hookFailures struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *hookFailures) observe(r *Runner) {
	f.n = map[string]int{}
	r.Hooks.HookFailed = func(job, hook string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.n[job+"/"+hook]++
	}
}

func (f *hookFailures) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[key]
}

// runHook runs h in the background; the channel yields the report.
func runHook(r *Runner, ctx context.Context, h HookRun) <-chan HookReport {
	done := make(chan HookReport, 1)
	go func() { done <- r.RunHook(ctx, h) }()
	return done
}

func awaitHook(t *testing.T, done <-chan HookReport) HookReport {
	t.Helper()
	select {
	case rep := <-done:
		return rep
	case <-time.After(30 * time.Second):
		t.Fatal("RunHook did not return within 30s")
		return HookReport{}
	}
}

// A hook runs as the job runs (its shell, workdir and env: map), with the
// run's ANARCHON_* variables and the outcome's, and the output tail in a
// file that is gone once the hook has ended. Its output is logged with the
// hook's name.
func TestHookEnvironmentAndOutputFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, logs := newRunner(t, &store{}, clock.Real{})
	var failed hookFailures
	failed.observe(r)
	job := shellJob("report", "exit 3")
	job.Workdir, job.Env = dir, map[string]string{"MINE": "mine"}
	job.HookTimeout = time.Minute
	h := HookRun{Kind: OnFailure, Execution: execution(job), Status: claim.StatusFailed, Ran: true,
		ExitCode: 3, Duration: 1500 * time.Millisecond, OutputTail: "line 1\nlast line\n",
		Command: `echo "$ANARCHON_HOOK $ANARCHON_JOB $ANARCHON_SLOT $ANARCHON_ATTEMPT $ANARCHON_TOKEN $ANARCHON_STATUS $ANARCHON_EXIT_CODE $ANARCHON_DURATION_MS $MINE $(pwd)" > env.txt
cat "$ANARCHON_OUTPUT_FILE" > out.txt; echo "$ANARCHON_OUTPUT_FILE" > path.txt; echo hook says hi`}
	rep := awaitHook(t, runHook(r, context.Background(), h))
	if rep.Failed() || rep.ExitCode != 0 {
		t.Fatalf("report = %+v", rep)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := "onFailure report 2027-03-28T01:00:00Z 2 " + string(testToken) + " failed 3 1500 mine " + dir + "\n"
	if got := read("env.txt"); got != want {
		t.Errorf("hook's environment:\n got %q\nwant %q", got, want)
	}
	if got := read("out.txt"); got != h.OutputTail {
		t.Errorf("output file held %q, want %q", got, h.OutputTail)
	}
	if _, err := os.Stat(strings.TrimSpace(read("path.txt"))); !os.IsNotExist(err) {
		t.Errorf("output file still there after the hook: %v", err)
	}
	lines := logs.FilterMessage("hook says hi").All()
	if len(lines) != 1 || lines[0].ContextMap()["hook"] != OnFailure || lines[0].ContextMap()["job"] != "report" {
		t.Errorf("hook's output logged as %+v", lines)
	}
	if failed.count("report/onFailure") != 0 {
		t.Error("a hook that succeeded was counted failed")
	}
}

// A missed slot's hook has no exit code, duration 0, an empty output file,
// and the reason.
func TestHookMissedSlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, _ := newRunner(t, &store{}, clock.Real{})
	job := shellJob("late", "true")
	job.Workdir = dir
	e := Execution{Job: job, Fence: claim.Fence{Job: job.Name, Slot: testSlot.UnixMilli()}, Slot: testSlot}
	h := HookRun{Kind: OnMissed, Execution: e, Status: claim.StatusMissed, Reason: "late",
		Command: `echo "$ANARCHON_HOOK $ANARCHON_SLOT_MS $ANARCHON_STATUS [$ANARCHON_EXIT_CODE] $ANARCHON_DURATION_MS $ANARCHON_REASON $(wc -c < "$ANARCHON_OUTPUT_FILE")" > env.txt`}
	if rep := awaitHook(t, runHook(r, context.Background(), h)); rep.Failed() {
		t.Fatalf("report = %+v", rep)
	}
	b, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := "onMissed " + strconv.FormatInt(testSlot.UnixMilli(), 10) + " missed [] 0 late 0\n"
	if string(b) != want {
		t.Errorf("hook's environment:\n got %q\nwant %q", b, want)
	}
}

// A hook that exits non-zero is logged at warn with its exit code and
// output tail, and counted.
func TestHookFailureLoggedAndCounted(t *testing.T) {
	t.Parallel()
	r, logs := newRunner(t, &store{}, clock.Real{})
	var failed hookFailures
	failed.observe(r)
	job := shellJob("flaky", "true")
	h := HookRun{Kind: OnSuccess, Execution: execution(job), Status: claim.StatusSucceeded, Ran: true,
		Command: `echo mail server down >&2; exit 4`}
	rep := awaitHook(t, runHook(r, context.Background(), h))
	if !rep.Failed() || rep.ExitCode != 4 || rep.TimedOut {
		t.Fatalf("report = %+v", rep)
	}
	entries := logs.FilterMessage("hook failed").All()
	if len(entries) != 1 {
		t.Fatalf("%d 'hook failed' entries, want 1", len(entries))
	}
	f := entries[0].ContextMap()
	if entries[0].Level != zapcore.WarnLevel || f["exit_code"] != int64(4) || f["output_tail"] != "mail server down\n" || f["hook"] != OnSuccess {
		t.Errorf("logged %v %v", entries[0].Level, f)
	}
	if n := failed.count("flaky/onSuccess"); n != 1 {
		t.Errorf("counted %d failures, want 1", n)
	}
	// A hook that cannot start (no such workdir) fails and is counted too.
	job.Workdir = filepath.Join(t.TempDir(), "gone")
	h.Execution = execution(job)
	if rep := awaitHook(t, runHook(r, context.Background(), h)); rep.Started || rep.ExitCode != -1 {
		t.Fatalf("report = %+v", rep)
	}
	if n := failed.count("flaky/onSuccess"); n != 2 {
		t.Errorf("counted %d failures, want 2", n)
	}
}

// A hook that runs longer than hookTimeoutMs is stopped (SIGTERM to its
// process group), logged and counted.
func TestHookTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	r, logs := newRunner(t, &store{}, clk)
	var failed hookFailures
	failed.observe(r)
	job := shellJob("slowhook", "true")
	job.Workdir, job.HookTimeout = dir, time.Minute
	h := HookRun{Kind: OnFailure, Execution: execution(job), Status: claim.StatusFailed, Ran: true, ExitCode: 1,
		Command: `echo $$ > sh.tmp && mv sh.tmp sh.pid; echo waiting; sleep 30`}
	done := runHook(r, context.Background(), h)
	sh := readPid(t, dir, "sh.pid")
	waitTimers(t, clk, 1) // the hook's timeout
	clk.Advance(job.HookTimeout)
	rep := awaitHook(t, done)
	if !rep.TimedOut || rep.ExitCode != 143 || !rep.Failed() {
		t.Fatalf("report = %+v", rep)
	}
	waitDead(t, sh)
	if e := logs.FilterMessage("hook failed").All(); len(e) != 1 || e[0].ContextMap()["output_tail"] != "waiting\n" {
		t.Errorf("logged %+v", e)
	}
	if n := failed.count("slowhook/onFailure"); n != 1 {
		t.Errorf("counted %d failures, want 1", n)
	}
}

// At the daemon's hard stop a running hook is stopped as a job is; after
// it, no hook starts.
func TestHookHardStop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, logs := newRunner(t, &store{}, clock.Real{})
	job := shellJob("stopped", "true")
	job.Workdir, job.HookTimeout = dir, time.Hour
	h := HookRun{Kind: OnSuccess, Execution: execution(job), Status: claim.StatusSucceeded, Ran: true,
		Command: `echo $$ > sh.tmp && mv sh.tmp sh.pid; sleep 30`}
	ctx, cancel := context.WithCancel(context.Background())
	done := runHook(r, ctx, h)
	sh := readPid(t, dir, "sh.pid")
	cancel()
	rep := awaitHook(t, done)
	if rep.ExitCode != 143 || rep.TimedOut || !errors.Is(rep.Err, ErrStopped) {
		t.Fatalf("report = %+v", rep)
	}
	waitDead(t, sh)
	if rep := awaitHook(t, runHook(r, ctx, h)); rep.Started {
		t.Fatalf("a hook started after the hard stop: %+v", rep)
	}
	if logs.FilterMessage("hook not run: the daemon is stopping").Len() != 1 {
		t.Error("the hook not run was not logged")
	}
}
