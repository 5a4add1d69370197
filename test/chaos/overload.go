package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/anarchon/anarchon/test/chaos/check"
)

// The overload fault: CPU starvation of the daemons by busy loops while a
// burst of runs falls due at one instant.
const (
	// spinArg is the hidden first argument that turns the harness binary
	// into a busy loop: `chaos-job spin <ms>`.
	spinArg = "spin"
	// burstEvery: the burst jobs share one schedule, every 10 s (on whole
	// 10 s of their instance's clock), on slots where the other jobs'
	// schedules fall too.
	burstEvery    = 10 * time.Second
	burstSchedule = "*/10 * * * * *"
	burstSleepMs  = 50
	// overloadLead: the loops start this long before a burst slot, so that
	// the slot's claims (sent up to RabbitMQ's 500 ms head start ahead)
	// and the runners' start of the jobs are starved too.
	overloadLead = 600 * time.Millisecond
	// overloadMin, overloadMax bound how long the loops run after the slot.
	overloadMin, overloadMax = time.Second, 3 * time.Second
)

// spinMain is the body of one busy loop: it spins on the CPU for ms
// milliseconds, then exits, so that a loop is bounded in time even if the
// harness that started it could not kill it.
func spinMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: chaos-job spin <ms>")
		return 125
	}
	ms, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || ms <= 0 || ms > 60_000 {
		fmt.Fprintf(os.Stderr, "chaos-job spin: %q: want 1..60000 ms\n", args[0])
		return 125
	}
	deadline := time.Now().Add(time.Duration(ms) * time.Millisecond)
	for n := 0; ; n++ {
		if n%4096 == 0 && !time.Now().Before(deadline) {
			return 0
		}
	}
}

// overload runs the busy loops of the overload fault. At most one overload
// is planned or running at a time.
type overload struct {
	bin   string // chaos-job
	loops int    // busy loops per overload: four per CPU
	procs []*exec.Cmd
	// planned: an overload is scheduled or running.
	planned bool
}

func newOverload(bin string) *overload {
	return &overload{bin: bin, loops: 4 * runtime.NumCPU()}
}

// start starts the busy loops for d (each also ends itself after d and a
// second more). Each has its own process group and dies with the harness.
func (o *overload) start(d time.Duration) error {
	ms := strconv.FormatInt((d + time.Second).Milliseconds(), 10)
	for range o.loops {
		cmd := exec.Command(o.bin, spinArg, ms)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return errors.Join(fmt.Errorf("start a busy loop: %w", err), o.stop())
		}
		o.procs = append(o.procs, cmd)
	}
	return nil
}

// stop kills every busy loop and waits for it. It is safe to call at any
// time, also when none runs.
func (o *overload) stop() error {
	var errs []error
	for _, cmd := range o.procs {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("kill busy loop %d: %w", cmd.Process.Pid, err))
		}
		_ = cmd.Wait() // killed: its status says so
	}
	o.procs = nil
	return errors.Join(errs...)
}

// nextBurst returns the first burst slot (a whole multiple of burstEvery)
// at least after from.
func nextBurst(from time.Time) time.Time {
	return from.Truncate(burstEvery).Add(burstEvery)
}

// planOverload schedules an overload around the first burst slot whose
// lead begins more than after from now: busy loops from overloadLead
// before the slot to 1–3 s after it. It does nothing while another
// overload is planned or running.
func (c *chaos) planOverload(after time.Duration) {
	if c.ov.planned {
		return
	}
	slot := nextBurst(time.Now().Add(after + overloadLead))
	d := overloadLead + c.between(overloadMin, overloadMax)
	c.ov.planned = true
	c.schedule(time.Until(slot.Add(-overloadLead)), func() error { return c.startOverload(slot, d) })
}

// startOverload starts the planned overload for d, unless the faults have
// ended, and schedules its end.
func (c *chaos) startOverload(slot time.Time, d time.Duration) error {
	if c.quiescing {
		c.ov.planned = false
		return nil
	}
	c.log.add(check.FaultOverload, -1, 0, fmt.Sprintf("%d busy loops for %dms, burst slot %s",
		c.ov.loops, d.Milliseconds(), slot.UTC().Format("15:04:05")))
	if err := c.ov.start(d); err != nil {
		return err
	}
	c.schedule(d, c.endOverload)
	return nil
}

// endOverload kills the busy loops.
func (c *chaos) endOverload() error {
	if !c.ov.planned || len(c.ov.procs) == 0 {
		return nil
	}
	c.log.add(check.FaultOverloadEnd, -1, 0, "")
	c.ov.planned = false
	return c.ov.stop()
}
