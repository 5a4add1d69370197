package runner

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// THE test of SPEC §4: a daemon killed with SIGKILL leaves no process of its
// job behind, grandchildren included.
func TestDaemonKilledTakesDownTheJob(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	daemon := exec.Command(exe, daemonArg, dir)
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
	if pgid, _ := syscall.Getpgid(sleep); pgid != sup {
		t.Fatalf("the sleep is in process group %d, want the supervisor's %d", pgid, sup)
	}
	if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := <-exited; !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("daemon ended with %v, want SIGKILL", err)
	}
	waitDead(t, sup, sh, sleep)
}

// A supervisor whose daemon died before it could watch for it kills its
// group instead of starting the job.
func TestSuperviseOrphanedAtStart(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec, _ := json.Marshal(superviseSpec{Parent: 1}) // not the test's pid: the "daemon" is gone
	cmd := exec.Command(exe, superviseArg, "--", "/bin/sh", "-c", "touch ran")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), noRaceExitSleep, superviseEnv+"="+string(spec))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("supervisor ended with %v, want SIGKILL", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the job ran: %v", err)
	}
}

func TestSuperviseMisuse(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string][]string{
		"no command": nil,
		"bad spec":   {superviseEnv + "=not json"},
	} {
		args := []string{superviseArg, "--"}
		if env != nil {
			args = append(args, "/bin/true")
		}
		cmd := exec.Command(exe, args...)
		cmd.Env = append(append(os.Environ(), noRaceExitSleep), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitSupervisorError {
			t.Errorf("%s: %v, want exit %d", name, err, exitSupervisorError)
		}
	}
}
