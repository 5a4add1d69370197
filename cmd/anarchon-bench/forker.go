package main

// The baseline of the start-lag measurement: a tiny forker that starts
// every due job's command at the slot instant, with no store, no claim, no
// supervisor and no logging, only the fork and exec. What the daemons add
// over it is what anarchon costs between a slot and its command.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"
)

// forkerInstance is what the forker puts in ANARCHON_INSTANCE.
const forkerInstance = "forker"

// runForker starts argv once per job at every whole second s with
// from <= s < to (from rounded up to a whole second), each with env plus
// the variables anarchond sets (ANARCHON_JOB, ANARCHON_SLOT,
// ANARCHON_SLOT_MS, ANARCHON_ATTEMPT, ANARCHON_TOKEN, ANARCHON_INSTANCE),
// stdin, stdout and stderr on /dev/null. It waits for the slot with a Go
// timer, as the daemon does, then forks the jobs one after the other
// (os/exec forks under syscall.ForkLock, so forks of one process are
// serial anyway); a slot whose forks outlast the second delays the next,
// as an overloaded daemon would. It returns the number of commands started
// once every one has exited.
func runForker(ctx context.Context, jobs, argv, env []string, from, to time.Time) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("forker: no command")
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer devNull.Close()
	var (
		wg      sync.WaitGroup
		started int
		errs    []error
	)
	first := from.Truncate(time.Second)
	if first.Before(from) {
		first = first.Add(time.Second)
	}
slots:
	for s := first; s.Before(to); s = s.Add(time.Second) {
		if err := sleepOrDone(ctx, time.Until(s)); err != nil {
			errs = append(errs, err)
			break
		}
		slotMs := strconv.FormatInt(s.UnixMilli(), 10)
		slot := s.UTC().Format(time.RFC3339)
		for _, job := range jobs {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = slices.Concat(env, []string{
				"ANARCHON_JOB=" + job, "ANARCHON_SLOT=" + slot, "ANARCHON_SLOT_MS=" + slotMs,
				"ANARCHON_ATTEMPT=1", "ANARCHON_TOKEN=forker-" + slotMs, "ANARCHON_INSTANCE=" + forkerInstance})
			cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, devNull, devNull
			if err := cmd.Start(); err != nil {
				errs = append(errs, fmt.Errorf("forker: start %s@%s: %w", job, slotMs, err))
				break slots
			}
			started++
			wg.Go(func() { _ = cmd.Wait() })
		}
	}
	wg.Wait()
	return started, errors.Join(errs...)
}
