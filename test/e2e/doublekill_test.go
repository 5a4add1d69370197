package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"
)

// killwithguard file: SIGKILL the daemon whose pid is file's last field
// and its job guard (its child started with --guard) at once, as the OOM
// killer or `pkill -9 -f anarchon` may.
func cmdKillWithGuard(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: killwithguard file")
	}
	f := strings.Fields(ts.ReadFile(args[0]))
	if len(f) == 0 {
		ts.Fatalf("%s is empty", args[0])
	}
	daemon, err := strconv.Atoi(f[len(f)-1])
	ts.Check(err)
	guard := guardOf(ts, daemon)
	if guard == 0 {
		ts.Fatalf("daemon %d has no job guard among its children", daemon)
	}
	// Stopped first, so that neither acts on the other's death: the guard
	// would kill the job's group on the daemon's, the daemon start a new
	// guard on the guard's.
	ts.Logf("SIGKILL to daemon %d and its job guard %d", daemon, guard)
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		ts.Check(syscall.Kill(guard, sig))
		ts.Check(syscall.Kill(daemon, sig))
	}
}

// guardOf returns the pid of daemon's job guard, 0 if it has none.
func guardOf(ts *testscript.TestScript, daemon int) int {
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	ts.Check(err)
	for _, p := range paths {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || !alive(pid) {
			continue
		}
		cmdline, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(cmdline), "\x00--guard") {
			continue
		}
		if ppid(ts, pid) == daemon {
			return pid
		}
	}
	return 0
}
