package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as a busy loop, as chaos-job does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == spinArg {
		os.Exit(spinMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// self is the test binary, which runs as a busy loop with spinArg.
func self(t *testing.T) string {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// alive reports whether pid names a process that has not been reaped.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func TestOverloadStopKillsEveryLoop(t *testing.T) {
	o := &overload{bin: self(t), loops: 3}
	// A minute: the loops must end by the kill, not by their own deadline.
	if err := o.start(time.Minute); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, cmd := range o.procs {
		pids = append(pids, cmd.Process.Pid)
	}
	if len(pids) != 3 {
		t.Fatalf("%d loops started, want 3", len(pids))
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("loop %d is not running before the stop", pid)
		}
	}
	if err := o.stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("loop %d still exists after the stop", pid)
		}
	}
	if len(o.procs) != 0 {
		t.Errorf("%d loops still listed after the stop", len(o.procs))
	}
	if err := o.stop(); err != nil {
		t.Errorf("a second stop: %v", err)
	}
}

func TestSpinEndsByItself(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := exec.CommandContext(ctx, self(t), spinArg, "50").Run()
	if ctx.Err() != nil {
		t.Fatalf("a 50 ms busy loop still ran after 30 s")
	}
	if err != nil {
		t.Fatalf("busy loop: %v", err)
	}
}

func TestSpinRefusesBadDurations(t *testing.T) {
	for _, arg := range []string{"0", "-5", "x", "60001"} {
		err := exec.Command(self(t), spinArg, arg).Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 125 {
			t.Errorf("spin %s: %v, want exit status 125", arg, err)
		}
	}
}

func TestNextBurst(t *testing.T) {
	base := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ from, want time.Duration }{
		{0, 10 * time.Second},
		{3 * time.Second, 10 * time.Second},
		{9999 * time.Millisecond, 10 * time.Second},
		{10 * time.Second, 20 * time.Second},
	} {
		if got := nextBurst(base.Add(tc.from)); !got.Equal(base.Add(tc.want)) {
			t.Errorf("nextBurst(+%v) = %v, want +%v", tc.from, got.Sub(base), tc.want)
		}
	}
}
