package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// jobArg is the hidden first argument that turns the harness binary into
// a job: `chaos-job job <sleepMs> <exit> <journal> <fenceDir>`.
const jobArg = "job"

// jobMain is the body of one run of a job. It appends a start record to
// its instance's journal, registers its attempt in the run's fence
// register, sleeps, does its fenced write, appends the end record and
// exits with the job's exit code. A job stopped by a signal (its daemon
// died or was fenced) writes no end record. The record format is
// check.Record's.
func jobMain(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: chaos-job job <sleepMs> <exit> <journal> <fenceDir>")
		return 125
	}
	sleepMs, err1 := strconv.ParseInt(args[0], 10, 64)
	exit, err2 := strconv.Atoi(args[1])
	journal, fenceDir := args[2], args[3]
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-job:", err)
		return 125
	}
	r, err := runFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos-job:", err)
		return 125
	}
	r.start = time.Now().UnixMilli()
	if err := appendRecord(journal, r.record("-", "-", "-")); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-job:", err)
		return 125
	}
	register := filepath.Join(fenceDir, fmt.Sprintf("%s@%d", r.job, r.slot))
	if _, err := fenced(register, func(n int) int { return max(n, r.attempt) }); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-job:", err)
		return 125
	}
	time.Sleep(time.Duration(sleepMs) * time.Millisecond)
	accepted, err := fenced(register, func(n int) int { return n })
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos-job:", err)
		return 125
	}
	outcome := "rejected"
	if accepted == r.attempt {
		outcome = "ok"
	}
	end := strconv.FormatInt(time.Now().UnixMilli(), 10)
	if err := appendRecord(journal, r.record(end, strconv.Itoa(exit), outcome)); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-job:", err)
		return 125
	}
	fmt.Printf("%s slot %d attempt %d on %s: slept %d ms, fenced write %s, exit %d\n",
		r.job, r.slot, r.attempt, r.instance, sleepMs, outcome, exit)
	return exit
}

// jobRun is what the daemon told the job about its run.
type jobRun struct {
	job, token, instance string
	slot                 int64
	attempt              int
	start                int64
}

// runFromEnv reads the run from the ANARCHON_* variables of
// docs/spec.md#s6-jobs.
func runFromEnv() (jobRun, error) {
	r := jobRun{
		job:      os.Getenv("ANARCHON_JOB"),
		token:    os.Getenv("ANARCHON_TOKEN"),
		instance: os.Getenv("ANARCHON_INSTANCE"),
	}
	var err1, err2 error
	r.slot, err1 = strconv.ParseInt(os.Getenv("ANARCHON_SLOT_MS"), 10, 64)
	r.attempt, err2 = strconv.Atoi(os.Getenv("ANARCHON_ATTEMPT"))
	if err := errors.Join(err1, err2); err != nil {
		return r, fmt.Errorf("ANARCHON_SLOT_MS / ANARCHON_ATTEMPT: %w", err)
	}
	for name, v := range map[string]string{"ANARCHON_JOB": r.job, "ANARCHON_TOKEN": r.token, "ANARCHON_INSTANCE": r.instance} {
		if v == "" || strings.ContainsAny(v, " \t\n") {
			return r, fmt.Errorf("%s %q: want one word", name, v)
		}
	}
	return r, nil
}

// record formats one journal line: job slot_ms attempt token instance
// start_ms end_ms exit fence.
func (r jobRun) record(end, exit, fence string) string {
	return fmt.Sprintf("%s %d %d %s %s %d %s %s %s\n",
		r.job, r.slot, r.attempt, r.token, r.instance, r.start, end, exit, fence)
}

// appendRecord appends line to the journal with one write(2) on an
// O_APPEND file, so that the records of concurrent jobs never interleave.
func appendRecord(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	_, werr := f.Write([]byte(line))
	return errors.Join(werr, f.Close())
}

// fenced opens the register at path under an exclusive flock, replaces its
// number n with update(n) and returns the number it held before.
func fenced(path string, update func(int) int) (int, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("fence register: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("fence register %s: flock: %w", path, err)
	}
	// The deferred f.Close releases the lock.
	b, err := io.ReadAll(f)
	if err != nil {
		return 0, fmt.Errorf("fence register %s: %w", path, err)
	}
	n := 0
	if s := strings.TrimSpace(string(b)); s != "" {
		if n, err = strconv.Atoi(s); err != nil {
			return 0, fmt.Errorf("fence register %s: %q: %w", path, s, err)
		}
	}
	if next := update(n); next != n {
		if err := f.Truncate(0); err != nil {
			return 0, fmt.Errorf("fence register %s: %w", path, err)
		}
		if _, err := f.WriteAt([]byte(strconv.Itoa(next)+"\n"), 0); err != nil {
			return 0, fmt.Errorf("fence register %s: %w", path, err)
		}
	}
	return n, nil
}
