//go:build !linux

package runner

import (
	"errors"
	"os"
	"syscall"

	"github.com/anarchon/anarchon/internal/supervise"
)

var errUnsupported = errors.New("runner: running jobs needs Linux (parent-death signal)")

func platformCheck() error                           { return errUnsupported }
func supervisorAttr() *syscall.SysProcAttr           { return nil }
func jobAttr(supervise.Spec) *syscall.SysProcAttr    { return nil }
func signalGroup(pgid int, sig syscall.Signal) error { return errUnsupported }
func waitExited(pid int) error                       { return errUnsupported }
func exitCodeOf(ps *os.ProcessState) int             { return ps.ExitCode() }

func startTime(int) (uint64, error)                 { return 0, errUnsupported }
func bootID() (string, error)                       { return "", errUnsupported }
func killGroupLeftovers(int, uint64) ([]int, error) { return nil, errUnsupported }
