package runner

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/anarchon/anarchon/internal/supervise"
)

// platformCheck reports whether the runner works here (Linux: yes).
func platformCheck() error { return nil }

// supervisorAttr makes the supervisor the leader of a new process group and
// has the kernel send it SIGTERM when the daemon dies.
func supervisorAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// jobAttr makes a job started without a supervisor (a Guard watches its
// group) the leader of a new process group, with the parent-death signal
// SIGKILL (for the moment between its start and the guard's reading of its
// group), and the credentials of spec. The kernel sends the signal when the
// forking thread ends, not the process (go.dev/issue/27505): the Go runtime
// ends a thread only when a goroutine exits locked to it, which nothing in
// anarchond does.
func jobAttr(spec supervise.Spec) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if spec.UID != nil {
		a.Credential = &syscall.Credential{Uid: *spec.UID, Gid: spec.GID, Groups: spec.Groups}
	}
	return a
}

// signalGroup sends sig to the process group pgid.
func signalGroup(pgid int, sig syscall.Signal) error {
	return syscall.Kill(-pgid, sig)
}

// waitExited blocks until the child pid has exited, without reaping it.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("waitid %d: %w", pid, err)
			}
			return nil
		}
	}
}

// exitCodeOf is ps's exit code, 128+N for a process killed by signal N.
func exitCodeOf(ps *os.ProcessState) int {
	if ps == nil {
		return notStartedCode
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
