package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

func TestShellAndArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		command string
		args    []string
		want    string
	}{
		{"shell", `echo "sum=$((1+2))"; echo "$0"`, nil, "sum=3\n/bin/sh\n"},
		{"args, no shell", "", []string{"/bin/echo", "a  b", "$HOME", ";", "exit 3"}, "a  b $HOME ; exit 3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &store{}
			r, _ := newRunner(t, s, clock.Real{})
			job := shellJob("argv", tc.command)
			job.Args = tc.args
			rep := run(t, r, context.Background(), execution(job), 30*time.Second)
			fins, _ := s.finished()
			if rep.Status != claim.StatusSucceeded || len(fins) != 1 || fins[0].OutputTail != tc.want {
				t.Fatalf("report %+v, finishes %+v; want output %q", rep, fins, tc.want)
			}
		})
	}
}

func TestWorkdir(t *testing.T) {
	t.Parallel()
	t.Run("used", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		s := &store{}
		r, _ := newRunner(t, s, clock.Real{})
		job := shellJob("wd", "pwd")
		job.Workdir = dir
		rep := run(t, r, context.Background(), execution(job), 30*time.Second)
		fins, _ := s.finished()
		if rep.Status != claim.StatusSucceeded || fins[0].OutputTail != dir+"\n" {
			t.Fatalf("report %+v, output %q; want %q", rep, fins[0].OutputTail, dir+"\n")
		}
	})
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		s := &store{}
		r, _ := newRunner(t, s, clock.Real{})
		job := shellJob("wd", "pwd")
		job.Workdir = filepath.Join(t.TempDir(), "nope")
		rep := run(t, r, context.Background(), execution(job), 30*time.Second)
		fins, _ := s.finished()
		if rep.Status != claim.StatusFailed || rep.ExitCode != -1 || !rep.Recorded ||
			rep.Err == nil || !strings.Contains(rep.Err.Error(), `job "wd": workdir`) {
			t.Fatalf("report = %+v", rep)
		}
		if fins[0].Status != claim.StatusFailed || fins[0].ExitCode != -1 ||
			!strings.Contains(fins[0].OutputTail, "no such file or directory") {
			t.Fatalf("recorded %+v", fins[0])
		}
	})
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		command string
		args    []string
		code    int
		status  claim.Status
		output  string
	}{
		{"zero", "true", nil, 0, claim.StatusSucceeded, ""},
		{"three", "exit 3", nil, 3, claim.StatusFailed, ""},
		{"killed by a signal", "kill -9 $$", nil, 137, claim.StatusFailed, ""},
		{"program not found", "", []string{"/nonexistent/program"}, 127, claim.StatusFailed, "/nonexistent/program"},
		{"program not on the PATH", "", []string{"anarchon-no-such-program"}, 127, claim.StatusFailed, "anarchon-no-such-program"},
		{"not executable", "", []string{"/etc/hostname"}, 126, claim.StatusFailed, "/etc/hostname"},
	} {
		for _, guarded := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/guard=%v", tc.name, guarded), func(t *testing.T) {
				t.Parallel()
				s := &store{}
				r, logs := newRunner(t, s, clock.Real{})
				if !guarded {
					r.Guard = nil // under the supervisor
				}
				job := shellJob("codes", tc.command)
				job.Args = tc.args
				rep := run(t, r, context.Background(), execution(job), 30*time.Second)
				if rep.Status != tc.status || rep.ExitCode != tc.code || !rep.Recorded || rep.Fenced || rep.Err != nil {
					t.Fatalf("report = %+v, want %s/%d", rep, tc.status, tc.code)
				}
				fins, _ := s.finished()
				f := fins[0]
				if f.Status != tc.status || f.ExitCode != tc.code || !strings.Contains(f.OutputTail, tc.output) {
					t.Fatalf("recorded %+v", f)
				}
				if f.StartedAt.IsZero() || f.FinishedAt.Before(f.StartedAt) {
					t.Fatalf("recorded times %v .. %v", f.StartedAt, f.FinishedAt)
				}
				if s.fences[0] != execution(job).Fence {
					t.Fatalf("recorded with fence %v", s.fences[0])
				}
				// Forked directly, a program that cannot start never had a
				// pid: the log says so instead of "job started". Under the
				// supervisor, the supervisor started.
				unstarted := guarded && tc.command == ""
				started := logs.FilterMessage("job started").All()
				failed := logs.FilterMessage("job's program could not be started").Len()
				if unstarted != (failed == 1) || unstarted != (len(started) == 0) {
					t.Fatalf("%d \"job started\" and %d \"could not be started\" lines, want the latter alone iff the program did not start (%v)",
						len(started), failed, unstarted)
				}
				for _, l := range started {
					if pid, ok := l.ContextMap()["pid"].(int64); !ok || pid <= 0 {
						t.Fatalf("job started with pid %v", l.ContextMap()["pid"])
					}
				}
			})
		}
	}
}

func TestOutputTail(t *testing.T) {
	t.Parallel()
	s := &store{}
	r, _ := newRunner(t, s, clock.Real{})
	job := shellJob("tail", `printf 'first\n'; printf '0123456789abcdefghij\n'`)
	job.OutputTailBytes = 16
	rep := run(t, r, context.Background(), execution(job), 30*time.Second)
	fins, _ := s.finished()
	if rep.Status != claim.StatusSucceeded || fins[0].OutputTail != "56789abcdefghij\n" {
		t.Fatalf("report %+v, tail %q", rep, fins[0].OutputTail)
	}
}

func TestTailUTF8(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"aé", 2, "é"},
		{"aé", 1, ""},   // the cut rune is dropped
		{"x€y", 3, "y"}, // two continuation bytes dropped
		{"ab\xffc", 4, "ab?c"},
		{"abc", 0, ""},
	} {
		if got := truncateTail(tc.in, tc.n); got != tc.want {
			t.Errorf("truncateTail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestOutputLogged(t *testing.T) {
	t.Parallel()
	s := &store{}
	r, logs := newRunner(t, s, clock.Real{})
	job := shellJob("logged", `echo to stdout; echo to stderr >&2; printf 'no newline'`)
	rep := run(t, r, context.Background(), execution(job), 30*time.Second)
	if rep.Status != claim.StatusSucceeded {
		t.Fatalf("report = %+v", rep)
	}
	want := map[string]struct {
		level  zapcore.Level
		stream string
	}{
		"to stdout":  {zapcore.InfoLevel, "stdout"},
		"to stderr":  {zapcore.WarnLevel, "stderr"},
		"no newline": {zapcore.InfoLevel, "stdout"},
	}
	for msg, w := range want {
		entries := logs.FilterMessage(msg).All()
		if len(entries) != 1 {
			t.Fatalf("%d log entries %q, want 1", len(entries), msg)
		}
		e := entries[0]
		fields := e.ContextMap()
		if e.Level != w.level || fields["stream"] != w.stream || fields["job"] != "logged" ||
			fields["slot"] != "2027-03-28T01:00:00Z" || fields["attempt"] != int64(2) ||
			fields["instance"] != "test-1" || fields["token"] != "01234567" {
			t.Errorf("entry %q: level %v, fields %v", msg, e.Level, fields)
		}
	}
}

func TestLongLinesSplit(t *testing.T) {
	t.Parallel()
	s := &store{}
	r, logs := newRunner(t, s, clock.Real{})
	job := shellJob("long", `head -c 150000 /dev/zero | tr '\0' x; echo`)
	job.OutputTailBytes = 100
	rep := run(t, r, context.Background(), execution(job), 30*time.Second)
	if rep.Status != claim.StatusSucceeded {
		t.Fatalf("report = %+v", rep)
	}
	var sizes []int
	var partial []bool
	for _, e := range logs.FilterField(zapcore.Field{Key: "stream", Type: zapcore.StringType, String: "stdout"}).All() {
		sizes = append(sizes, len(e.Message))
		partial = append(partial, e.ContextMap()["partial"] == true)
	}
	if len(sizes) != 3 || sizes[0] != maxLineBytes || sizes[1] != maxLineBytes ||
		sizes[2] != 150000-2*maxLineBytes || !partial[0] || !partial[1] || partial[2] {
		t.Fatalf("logged pieces %v (partial %v)", sizes, partial)
	}
	fins, _ := s.finished()
	if fins[0].OutputTail != strings.Repeat("x", 99)+"\n" {
		t.Fatalf("tail %q", fins[0].OutputTail)
	}
}

// The timeout stops the whole process group: the shell and the sleep it
// waits for in the foreground. The job's timers run on a fake clock so that
// the timeout cannot fire before the job is up, however slow the machine.
func TestTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &store{}
	clk := clock.NewFake(t0)
	r, _ := newRunner(t, s, clk)
	job := shellJob("slow", `echo $$ > sh.tmp && mv sh.tmp sh.pid
sh -c 'echo $$ > sleep.tmp && mv sleep.tmp sleep.pid && exec sleep 30'; echo done`)
	job.Workdir = dir
	job.Timeout = 5 * time.Minute
	done := startRun(r, context.Background(), execution(job))
	sh, sleep := readPid(t, dir, "sh.pid"), readPid(t, dir, "sleep.pid")
	waitFor(t, "the sleep", func() bool {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sleep))
		return string(comm) == "sleep\n"
	})
	waitTimers(t, clk, 1) // the timeout
	clk.Advance(job.Timeout)
	rep := await(t, done, 15*time.Second)
	if rep.Status != claim.StatusTimeout || rep.ExitCode != 143 || !rep.Recorded {
		t.Fatalf("report = %+v", rep)
	}
	fins, _ := s.finished()
	if fins[0].Status != claim.StatusTimeout || fins[0].ExitCode != 143 || strings.Contains(fins[0].OutputTail, "done") {
		t.Fatalf("recorded %+v", fins[0])
	}
	waitDead(t, sh, sleep)
}

func TestTimeoutEscalatesToKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &store{}
	clk := clock.NewFake(t0)
	r, logs := newRunner(t, s, clk)
	// Ignoring TERM is inherited by the sleep: only SIGKILL ends them.
	job := shellJob("stubborn", `trap '' TERM; echo $$ > sh.tmp && mv sh.tmp sh.pid; sleep 30`)
	job.Workdir = dir
	done := startRun(r, context.Background(), execution(job))
	sh := readPid(t, dir, "sh.pid")
	waitTimers(t, clk, 1) // the timeout
	clk.Advance(job.Timeout)
	waitLogs(t, logs, "job timed out; stopping it", 1)
	waitTimers(t, clk, 1) // the kill grace
	if !alive(sh) {
		t.Fatal("SIGTERM ended a job that ignores it")
	}
	clk.Advance(job.KillGrace)
	rep := await(t, done, 15*time.Second)
	if rep.Status != claim.StatusTimeout || rep.ExitCode != 137 || !rep.Recorded {
		t.Fatalf("report = %+v", rep)
	}
	if logs.FilterMessage("job still running after SIGTERM; sending SIGKILL to its process group").Len() != 1 {
		t.Fatal("no SIGKILL logged")
	}
	waitDead(t, sh)
}

// The daemon's SIGTERM reaches the supervisor too; it must not kill the
// group then, so that the job's own handler runs.
func TestTimeoutLetsTheJobCleanUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &store{}
	clk := clock.NewFake(t0)
	r, _ := newRunner(t, s, clk)
	job := shellJob("tidy", `trap 'echo cleaning up; exit 0' TERM; echo $$ > sh.tmp && mv sh.tmp sh.pid; sleep 30 & wait`)
	job.Workdir = dir
	done := startRun(r, context.Background(), execution(job))
	readPid(t, dir, "sh.pid")
	waitTimers(t, clk, 1) // the timeout
	clk.Advance(job.Timeout)
	rep := await(t, done, 15*time.Second)
	fins, _ := s.finished()
	// The shell may report its background sleep's death ("Terminated")
	// after the handler's line, depending on which it notices first.
	if rep.Status != claim.StatusTimeout || rep.ExitCode != 0 || !strings.HasPrefix(fins[0].OutputTail, "cleaning up\n") {
		t.Fatalf("report %+v, recorded %+v", rep, fins)
	}
}

// Background processes left in the group when the command exits are killed,
// and their hold on the output pipe does not delay the result.
func TestLeftoverProcessesKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &store{}
	r, _ := newRunner(t, s, clock.Real{})
	job := shellJob("leaver", `sleep 30 & echo $! > sleep.tmp && mv sleep.tmp sleep.pid; echo bye`)
	job.Workdir = dir
	began := time.Now()
	rep := run(t, r, context.Background(), execution(job), 15*time.Second)
	if took := time.Since(began); took >= drainTimeout {
		t.Fatalf("Run took %v: it waited for the leftover's output", took)
	}
	fins, _ := s.finished()
	if rep.Status != claim.StatusSucceeded || fins[0].OutputTail != "bye\n" {
		t.Fatalf("report %+v, recorded %+v", rep, fins)
	}
	waitDead(t, readPid(t, dir, "sleep.pid"))
}

func TestFinishFenced(t *testing.T) {
	t.Parallel()
	s := &store{finishErr: []error{claim.ErrFenced}}
	r, logs := newRunner(t, s, clock.Real{})
	rep := run(t, r, context.Background(), execution(shellJob("late", "true")), 30*time.Second)
	if !rep.Fenced || rep.Recorded || rep.Status != claim.StatusSucceeded || !errors.Is(rep.Err, claim.ErrFenced) {
		t.Fatalf("report = %+v", rep)
	}
	if logs.FilterMessage("result not recorded: the run is no longer this attempt's (a backup took it over, or marked it interrupted after its lease ran out)").FilterLevelExact(zapcore.WarnLevel).Len() != 1 {
		t.Fatal("fenced Finish not logged at warn")
	}
}

func TestFinishRetriesTransportErrors(t *testing.T) {
	t.Parallel()
	s := &store{finishErr: []error{errTransport, errTransport}}
	r, logs := newRunner(t, s, clock.Real{})
	rep := run(t, r, context.Background(), execution(shellJob("flaky", "exit 4")), 30*time.Second)
	fins, calls := s.finished()
	if !rep.Recorded || rep.Err != nil || calls != 3 || len(fins) != 1 || fins[0].ExitCode != 4 {
		t.Fatalf("report %+v, %d calls, recorded %+v", rep, calls, fins)
	}
	if logs.FilterMessage("recording the result failed; retrying").Len() != 1 {
		t.Fatal("the retried failure is not logged exactly once")
	}
}

func TestRunAsUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	s := &store{}
	r, _ := newRunner(t, s, clock.Real{})
	rep := run(t, r, context.Background(),
		execution(shellJob("asuser", `id -u; id -g; echo "home=$HOME user=$USER"`)), 30*time.Second)
	if rep.Status != claim.StatusSucceeded {
		t.Fatalf("report = %+v", rep)
	}
	// Without user: the daemon's own.
	fins, _ := s.finished()
	if !strings.HasPrefix(fins[0].OutputTail, "0\n0\n") {
		t.Fatalf("as root: %q", fins[0].OutputTail)
	}

	job := shellJob("asuser", `id -u; id -g; echo "home=$HOME user=$USER"`)
	job.User = "nobody"
	job.Env = map[string]string{"USER": "from-env"} // the job's env: wins
	rep = run(t, r, context.Background(), execution(job), 30*time.Second)
	fins, _ = s.finished()
	home, _ := passwdEntry(t, "nobody")
	if want := "65534\n65534\nhome=" + home + " user=from-env\n"; rep.Status != claim.StatusSucceeded || fins[1].OutputTail != want {
		t.Fatalf("report %+v, output %q, want %q", rep, fins[1].OutputTail, want)
	}

	// group: replaces the user's primary group (by name or by gid).
	for _, g := range []string{"daemon", "1"} {
		job = shellJob("asgroup", `id -u; id -g`)
		job.User, job.Group = "nobody", g
		rep = run(t, r, context.Background(), execution(job), 30*time.Second)
		fins, _ = s.finished()
		if got := fins[len(fins)-1].OutputTail; rep.Status != claim.StatusSucceeded || got != "65534\n1\n" {
			t.Fatalf("group %s: report %+v, output %q", g, rep, got)
		}
	}
	job = shellJob("asgroup", "true")
	job.User, job.Group = "nobody", "no-such-group-anywhere"
	if rep = run(t, r, context.Background(), execution(job), 30*time.Second); rep.Err == nil ||
		!strings.Contains(rep.Err.Error(), `job "asgroup": group "no-such-group-anywhere": `) {
		t.Fatalf("unknown group: %+v", rep)
	}
}

func TestUserChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, user string
		euid       int
		err        string // "": runs
	}{
		{"another user needs root", "nobody", 1000, `job "asuser": user "nobody" requires the daemon to run as root`},
		{"the daemon's own user", "nobody", 65534, ""},
		{"unknown user", "no-such-user-anarchon", 0, `job "asuser": user "no-such-user-anarchon": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &store{}
			r, logs := newRunner(t, s, clock.Real{})
			r.geteuid = func() int { return tc.euid }
			job := shellJob("asuser", "true")
			job.User = tc.user
			rep := run(t, r, context.Background(), execution(job), 30*time.Second)
			fins, _ := s.finished()
			if tc.err == "" {
				if rep.Status != claim.StatusSucceeded || rep.Err != nil {
					t.Fatalf("report = %+v", rep)
				}
				return
			}
			if rep.Err == nil || !strings.HasPrefix(rep.Err.Error(), tc.err) ||
				rep.Status != claim.StatusFailed || rep.ExitCode != -1 || !rep.Recorded {
				t.Fatalf("report = %+v, want error %q", rep, tc.err)
			}
			if fins[0].Status != claim.StatusFailed || fins[0].ExitCode != -1 || !strings.HasPrefix(fins[0].OutputTail, tc.err) {
				t.Fatalf("recorded %+v", fins[0])
			}
			if logs.FilterMessage("job could not be started").Len() != 1 {
				t.Fatal("start failure not logged")
			}
		})
	}
}

// Without a guard, a runner needs a supervisor.
func TestNoSupervisor(t *testing.T) {
	t.Parallel()
	s := &store{}
	r, _ := newRunner(t, s, clock.Real{})
	r.Supervisor, r.Guard = nil, nil
	rep := run(t, r, context.Background(), execution(shellJob("x", "true")), 30*time.Second)
	if rep.Status != claim.StatusFailed || rep.ExitCode != -1 || rep.Err == nil ||
		!strings.Contains(rep.Err.Error(), "no supervisor") {
		t.Fatalf("report = %+v", rep)
	}
}

// On a claim-only backend a hard stop records the run as interrupted: no
// backup will ever run it.
func TestHardStopClaimOnlyRecordsInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &store{}
	r, _ := newRunner(t, s, clock.Real{})
	job := shellJob("stopped", `echo $$ > sh.tmp && mv sh.tmp sh.pid; exec sleep 30`)
	job.Workdir = dir
	ctx, cancel := context.WithCancel(context.Background())
	done := startRun(r, ctx, execution(job))
	pid := readPid(t, dir, "sh.pid")
	cancel()
	rep := await(t, done, 15*time.Second)
	fins, _ := s.finished()
	if rep.Status != claim.StatusInterrupted || !rep.Recorded || rep.Released || !errors.Is(rep.Err, ErrStopped) ||
		rep.ExitCode != 143 || len(fins) != 1 || fins[0].Status != claim.StatusInterrupted || fins[0].ExitCode != 143 {
		t.Fatalf("report %+v, recorded %+v", rep, fins)
	}
	waitDead(t, pid)
}
