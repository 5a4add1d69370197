package runner

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/supervise"
)

// startGroup starts `sleep 30` as the leader of a new process group and
// returns its pid; the test's cleanup kills the group.
func startGroup(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() //nolint:errcheck // reaped so that alive() sees it gone
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	return pid
}

// A guard that dies is replaced, and the new one is told of every group
// still running: when the daemon's end of the pipe closes (here Close, as
// the kernel closes it for a daemon that dies), the groups still listed
// are killed and the ones removed are left alone.
func TestGuardReplacedKeepsTheGroups(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	g, err := StartGuard([]string{exe, superviseArg, supervise.GuardFlag}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	listed, removed := startGroup(t), startGroup(t)
	g.add(listed)
	g.add(removed)
	g.remove(removed)

	g.mu.Lock()
	first := g.cmd.Process
	g.mu.Unlock()
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	waitLogs(t, logs, "job guard running again", 1)
	if n := logs.FilterMessage("the job guard exited; starting another: until it runs, the jobs' processes would outlive a daemon that dies").Len(); n != 1 {
		t.Fatalf("the guard's exit logged %d times, want 1", n)
	}
	if !alive(listed) || !alive(removed) {
		t.Fatal("a group died with the guard")
	}

	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	waitDead(t, listed)
	if !alive(removed) {
		t.Fatal("the guard killed a group the daemon had removed")
	}
}
