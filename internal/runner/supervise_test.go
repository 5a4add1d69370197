package runner

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/supervise"
)

// THE test of docs/spec.md#s4-processes: a daemon killed with SIGKILL leaves
// no process of its job behind, grandchildren included: with the guard (the
// jobs started directly), and with either supervisor.
func TestDaemonKilledTakesDownTheJob(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	modes := supervisors(t)
	modes["guard"] = []string{guardArg}
	for name, prefix := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			daemon := exec.Command(exe, append([]string{daemonArg, dir}, prefix...)...)
			daemon.Env = append(os.Environ(), noRaceExitSleep)
			daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so the kill below cannot touch us
			if err := daemon.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- daemon.Wait() }()
			t.Cleanup(func() { _ = daemon.Process.Kill() })

			sup, sh, sleep := readPid(t, dir, "sup.pid"), readPid(t, dir, "sh.pid"), readPid(t, dir, "sleep.pid")
			for _, pid := range []int{sup, sh, sleep} {
				if !alive(pid) {
					t.Fatalf("pid %d is not running before the daemon is killed", pid)
				}
			}
			leader := sup // the supervisor leads the job's group
			if name == "guard" {
				leader = sh // the job itself does
				if sup != daemon.Process.Pid {
					t.Fatalf("the shell's parent is %d, want the daemon %d", sup, daemon.Process.Pid)
				}
			}
			if pgid, _ := syscall.Getpgid(sleep); pgid != leader {
				t.Fatalf("the sleep is in process group %d, want %d", pgid, leader)
			}
			if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			var ee *exec.ExitError
			if err := <-exited; !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("daemon ended with %v, want SIGKILL", err)
			}
			waitDead(t, sup, sh, sleep)
		})
	}
}

// A supervisor whose daemon died before it could watch for it kills its
// group instead of starting the job.
func TestSuperviseOrphanedAtStart(t *testing.T) {
	t.Parallel()
	for name, sup := range supervisors(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			spec, _ := json.Marshal(supervise.Spec{Parent: 1}) // not the test's pid: the "daemon" is gone
			cmd := exec.Command(sup[0], append(slices.Clone(sup[1:]), "/bin/sh", "-c", "touch ran")...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), noRaceExitSleep, supervise.Env+"="+string(spec))
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var ee *exec.ExitError
			if err := cmd.Run(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("supervisor ended with %v, want SIGKILL", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the job ran: %v", err)
			}
		})
	}
}

func TestSuperviseMisuse(t *testing.T) {
	t.Parallel()
	for name, sup := range supervisors(t) {
		for what, env := range map[string][]string{
			"no command": nil,
			"bad spec":   {supervise.Env + "=not json"},
		} {
			args := slices.Clone(sup[1:])
			if env != nil {
				args = append(args, "/bin/true")
			}
			cmd := exec.Command(sup[0], args...)
			cmd.Env = append(append(os.Environ(), noRaceExitSleep), env...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != supervise.ExitMisuse {
				t.Errorf("%s, %s: %v, want exit %d", name, what, err, supervise.ExitMisuse)
			}
		}
	}
}

// The runner runs jobs through anarchon-supervise as through the fallback:
// the job's exit code and the supervisor's own failures come back the same.
func TestSmallSupervisor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		command string
		args    []string
		code    int
	}{
		{"three", "exit 3", nil, 3},
		{"killed by a signal", "kill -9 $$", nil, 137},
		{"program not found", "", []string{"/nonexistent/program"}, supervise.ExitNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &store{}
			r, _ := newRunner(t, s, clock.Real{})
			r.Supervisor = []string{smallSupervisor(t), "--"}
			job := shellJob("small", tc.command)
			job.Args = tc.args
			rep := run(t, r, t.Context(), execution(job), 30*time.Second)
			if rep.ExitCode != tc.code || !rep.Recorded || rep.Err != nil {
				t.Fatalf("report = %+v, want exit %d", rep, tc.code)
			}
		})
	}
}
