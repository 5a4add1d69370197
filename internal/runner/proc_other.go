//go:build !linux

package runner

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

var errUnsupported = errors.New("runner: running jobs needs Linux (parent-death signal)")

func platformCheck() error                           { return errUnsupported }
func supervisorAttr() *syscall.SysProcAttr           { return nil }
func signalGroup(pgid int, sig syscall.Signal) error { return errUnsupported }
func waitExited(pid int) error                       { return errUnsupported }
func exitCodeOf(ps *os.ProcessState) int             { return ps.ExitCode() }

// SuperviseMain is the body of `anarchond supervise`; it needs Linux.
func SuperviseMain(argv []string) int {
	fmt.Fprintln(os.Stderr, "anarchond supervise:", errUnsupported)
	return exitSupervisorError
}
