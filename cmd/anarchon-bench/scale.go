package main

// Scale: what one daemon costs with a large crontab that is not due (its
// memory, its CPU, the store operations it makes while idle, which must
// not grow with the number of jobs), and whether its memory and
// goroutines stay flat while it runs 200 jobs every second.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// scaleResult is one backend's scale measurement.
type scaleResult struct {
	Backend                                string
	Jobs                                   int
	IdleRSSBytes                           int64   // after start-up settled, 10,000 jobs none due
	IdleCPUPercent                         float64 // of one core, over the idle window
	IdleStoreOpsPerMin                     float64 // -1 when the store cannot count them
	IdleStoreOpsPerMin100                  float64 // the same with 100 jobs: must be about equal (independent of job count)
	BusyRSSBytes                           int64   // while running 200 jobs per second: the largest sample
	BusyRSSStartBytes, BusyRSSEndBytes     int64   // first and last sample of the busy window, for flatness
	BusyGoroutinesStart, BusyGoroutinesEnd int     // from /metrics go_goroutines
	Err                                    string

	IdleReady         time.Duration // start to /readyz 200 with Jobs jobs
	IdleRSSEndBytes   int64         // at the end of the idle window
	IdleWindow        time.Duration // the idle window as measured (between the two readings)
	IdleRSSBytes100   int64         // the same figures with 100 jobs
	IdleCPUPercent100 float64
	StoreOpsScope     string // how IdleStoreOpsPerMin is counted ("" when the store cannot count)
	// When the daemon's own operations are counted (Redis: MONITOR), the
	// store's shared counter over the same windows, for comparison (else -1).
	IdleStoreOpsSharedPerMin, IdleStoreOpsSharedPerMin100 float64
	SharedOpsScope                                        string

	BusyJobs          int           // jobs due every second
	BusyWindow        time.Duration // between the first and the last sample
	BusyRSSMinBytes   int64
	BusyGoroutinesMax int
	BusyRunsPerSec    float64 // anarchon_runs_total over the window: BusyJobs when the daemon kept up
	BusyMissed        float64 // anarchon_missed_slots_total over the window
	BusyCPUPercent    float64 // the daemon's own CPU (not its supervisors' or jobs'), of one core
	BusySamples       []scaleSample
	// BusyNote is set when the daemon did not keep up with BusyJobs runs a
	// second: then growth of RSS and goroutines is its backlog of due
	// slots (one waiting goroutine per job and slot behind), not a leak,
	// and says nothing about flatness.
	BusyNote string
	Took     time.Duration
}

// scaleSample is one reading of the busy daemon.
type scaleSample struct {
	At         time.Duration // since the window's start
	RSSBytes   int64
	Goroutines int
	Runs       float64 // anarchon_runs_total
}

// Parameters of the scale measurement.
var (
	// After /readyz, before the idle window: the start's scan of runs left
	// running (one read per job, on lease backends: 1.3 s for 10,000 jobs
	// on PostgreSQL) is over, and PostgreSQL has counted its transactions
	// (an idle backend flushes its statistics up to 10 s later: with 10 s,
	// part of the scan's 10,000 reads fell into the window).
	scaleSettle       = 15 * time.Second
	scaleCompareJobs  = 100             // the second idle crontab
	scaleBusyJobs     = 200             // jobs due every second in the busy window
	scaleBusyWarmup   = 5 * time.Second // after the busy jobs appear, before the first sample
	scaleBusyInterval = 5 * time.Second // between samples
	scaleLogLevel     = "warn"
)

// measureScale measures backend with one daemon on a fresh namespace:
// jobs jobs none of which is due, idle for idle after scaleSettle; the
// same with scaleCompareJobs jobs; then scaleBusyJobs jobs due every
// second (the command `true`) for busy, sampled every scaleBusyInterval.
func measureScale(ctx context.Context, backend string, jobs int, idle, busy time.Duration) (res scaleResult) {
	res = scaleResult{Backend: backend, Jobs: jobs, BusyJobs: scaleBusyJobs, IdleStoreOpsPerMin: -1, IdleStoreOpsPerMin100: -1,
		IdleStoreOpsSharedPerMin: -1, IdleStoreOpsSharedPerMin100: -1}
	var errs []error
	defer settleMeasure(time.Now(), &errs, &res.Took, &res.Err)
	if jobs < 1 || idle < time.Second || busy < 0 {
		errs = append(errs, fmt.Errorf("jobs %d, idle %v, busy %v: want at least 1 job and 1 s idle", jobs, idle, busy))
		return res
	}
	bin, err := anarchondBinary(ctx)
	if err != nil {
		errs = append(errs, err)
		return res
	}
	dir, st, err := measureScratch(ctx, "scale", backend)
	if err != nil {
		errs = append(errs, err)
		return res
	}
	defer os.RemoveAll(dir)
	var runs []runKey // for the cleanup
	defer func() {
		if err := cleanupStore(st, runs); err != nil {
			errs = append(errs, err)
		}
	}()
	var overhead int64
	switch {
	case st.watchOps != nil:
		res.StoreOpsScope, res.SharedOpsScope = st.watchScope, st.opsScope
	case st.countOps != nil:
		res.StoreOpsScope = st.opsScope
	}
	if st.countOps != nil {
		if overhead, err = st.opsOverhead(ctx); err != nil {
			errs = append(errs, fmt.Errorf("store counter: %w", err))
			return res
		}
	}

	daemonLogf("scale %s: %d idle jobs, %v settle + %v idle...", backend, jobs, scaleSettle, idle)
	big, err := scaleIdle(ctx, bin, dir, st, overhead, jobs, idle)
	if err != nil {
		errs = append(errs, fmt.Errorf("idle, %d jobs: %w", jobs, err))
		return res
	}
	res.IdleReady, res.IdleRSSBytes, res.IdleRSSEndBytes, res.IdleCPUPercent = big.ready, big.rss, big.rssEnd, big.cpu
	res.IdleStoreOpsPerMin, res.IdleStoreOpsSharedPerMin, res.IdleWindow = big.opsPerMin, big.sharedPerMin, big.window

	daemonLogf("scale %s: %d idle jobs, %v settle + %v idle...", backend, scaleCompareJobs, scaleSettle, idle)
	small, err := scaleIdle(ctx, bin, dir, st, overhead, scaleCompareJobs, idle)
	if err != nil {
		errs = append(errs, fmt.Errorf("idle, %d jobs: %w", scaleCompareJobs, err))
		return res
	}
	res.IdleRSSBytes100, res.IdleCPUPercent100 = small.rss, small.cpu
	res.IdleStoreOpsPerMin100, res.IdleStoreOpsSharedPerMin100 = small.opsPerMin, small.sharedPerMin

	if busy == 0 {
		return res
	}
	daemonLogf("scale %s: %d jobs every second for %v, sampled every %v...", backend, scaleBusyJobs, busy, scaleBusyInterval)
	b, err := scaleBusy(ctx, bin, dir, st, busy, &runs)
	if err != nil {
		errs = append(errs, fmt.Errorf("busy: %w", err))
	}
	res.BusySamples, res.BusyWindow, res.BusyRunsPerSec, res.BusyMissed, res.BusyCPUPercent =
		b.samples, b.window, b.runsPerSec, b.missed, b.cpu
	if b.runsPerSec < 0.95*float64(scaleBusyJobs) && len(b.samples) > 1 {
		res.BusyNote = fmt.Sprintf("behind: %.0f of %d runs/s; RSS and goroutine growth is the backlog, not a measure of flatness", b.runsPerSec, scaleBusyJobs)
	}
	if n := len(b.samples); n > 0 {
		first, last := b.samples[0], b.samples[n-1]
		res.BusyRSSStartBytes, res.BusyRSSEndBytes = first.RSSBytes, last.RSSBytes
		res.BusyGoroutinesStart, res.BusyGoroutinesEnd = first.Goroutines, last.Goroutines
		res.BusyRSSBytes, res.BusyRSSMinBytes = first.RSSBytes, first.RSSBytes
		for _, s := range b.samples {
			res.BusyRSSBytes = max(res.BusyRSSBytes, s.RSSBytes)
			res.BusyRSSMinBytes = min(res.BusyRSSMinBytes, s.RSSBytes)
			res.BusyGoroutinesMax = max(res.BusyGoroutinesMax, s.Goroutines)
		}
	}
	return res
}

// idleFigures is what one idle daemon measured.
type idleFigures struct {
	ready        time.Duration
	rss, rssEnd  int64
	cpu          float64 // % of one core
	opsPerMin    float64 // -1: cannot count
	sharedPerMin float64 // the shared counter when opsPerMin is the daemon's own; else -1
	window       time.Duration
}

// scaleIdle starts one daemon with n jobs none of which falls due (before
// the window, during it, or among the slots caught up at start), waits
// scaleSettle after /readyz, then reads its RSS, CPU time and the store's
// counter at both ends of an idle window, and stops it.
func scaleIdle(ctx context.Context, bin, dir string, st *daemonStore, overhead int64, n int, idle time.Duration) (f idleFigures, err error) {
	f.opsPerMin, f.sharedPerMin = -1, -1
	sched, err := idleSchedule(time.Now(), daemonReadyTimeout+scaleSettle+idle, 5*time.Minute)
	if err != nil {
		return f, err
	}
	jobs := numberedJobs("idle", n, sched, []string{"true"})
	start := time.Now()
	d, err := startDaemon(bin, dir, fmt.Sprintf("idle-%d", n), func(addr string) crontabFile {
		return benchCrontab("bench-idle", scaleLogLevel, addr, st, jobs)
	})
	if err != nil {
		return f, err
	}
	defer func() { err = errors.Join(err, d.stop()) }()
	if err := d.waitReady(ctx); err != nil {
		return f, err
	}
	f.ready = time.Since(start)
	if err := sleepOrDone(ctx, scaleSettle); err != nil {
		return f, err
	}
	if f.rss, err = procRSS(d.pid()); err != nil {
		return f, err
	}
	var ops0, ops1 int64
	if st.countOps != nil {
		if ops0, err = st.countOps(ctx); err != nil {
			return f, fmt.Errorf("store counter: %w", err)
		}
	}
	var stopWatch func() (int64, error)
	if st.watchOps != nil {
		if stopWatch, err = st.watchOps(ctx, d.pid()); err != nil {
			return f, fmt.Errorf("store counter: %w", err)
		}
	}
	cpu0, err := procCPUTicks(d.pid())
	if err != nil {
		return f, err
	}
	t0 := time.Now()
	if err := sleepOrDone(ctx, idle); err != nil {
		return f, err
	}
	cpu1, err := procCPUTicks(d.pid())
	if err != nil {
		return f, err
	}
	f.window = time.Since(t0)
	if stopWatch != nil {
		own, err := stopWatch()
		if err != nil {
			return f, fmt.Errorf("store counter: %w", err)
		}
		f.opsPerMin = float64(own) / f.window.Minutes()
	}
	if st.countOps != nil {
		if ops1, err = st.countOps(ctx); err != nil {
			return f, fmt.Errorf("store counter: %w", err)
		}
		shared := float64(max(ops1-ops0-overhead, 0)) / f.window.Minutes()
		if stopWatch != nil {
			f.sharedPerMin = shared
		} else {
			f.opsPerMin = shared
		}
	}
	if f.rssEnd, err = procRSS(d.pid()); err != nil {
		return f, err
	}
	f.cpu = float64(cpu1-cpu0) / clockTicks / f.window.Seconds() * 100
	return f, nil
}

// busyFigures is what the busy daemon measured.
type busyFigures struct {
	samples    []scaleSample
	window     time.Duration
	runsPerSec float64
	missed     float64
	cpu        float64
}

// scaleBusy starts one daemon with no jobs, gives it scaleBusyJobs jobs
// due every second by a reload (no catch-up of the last maxLate, as at
// start), waits scaleBusyWarmup, then samples its RSS, goroutines and runs
// every scaleBusyInterval for busy, and stops it. runs gets the runs that
// may have been claimed, for the cleanup.
func scaleBusy(ctx context.Context, bin, dir string, st *daemonStore, busy time.Duration, runs *[]runKey) (f busyFigures, err error) {
	jobs := numberedJobs("busy", scaleBusyJobs, lagSchedule, []string{"true"})
	d, err := startDaemon(bin, dir, "busy", func(addr string) crontabFile {
		return benchCrontab("bench-busy", scaleLogLevel, addr, st, nil)
	})
	if err != nil {
		return f, err
	}
	from := time.Now()
	defer func() {
		err = errors.Join(err, d.stop())
		*runs = append(*runs, everySecond(crontabJobNames(jobs), from.Add(-2*time.Second), time.Now().Add(time.Second))...)
	}()
	if err := d.waitReady(ctx); err != nil {
		return f, err
	}
	if err := d.reload(ctx, benchCrontab("bench-busy", scaleLogLevel, d.addr, st, jobs)); err != nil {
		return f, err
	}
	if err := sleepOrDone(ctx, scaleBusyWarmup); err != nil {
		return f, err
	}
	sample := func(start time.Time) (scaleSample, error) {
		text, err := d.metrics(ctx)
		if err != nil {
			return scaleSample{}, err
		}
		s := scaleSample{At: time.Since(start)}
		g, ok := metricSum(text, "go_goroutines")
		if !ok {
			return s, errors.New("/metrics: no go_goroutines")
		}
		s.Goroutines = int(g)
		s.Runs, _ = metricSum(text, "anarchon_runs_total")
		s.RSSBytes, err = procRSS(d.pid())
		return s, err
	}
	missed := func() float64 { v, _ := d.metric(ctx, "anarchon_missed_slots_total"); return v }
	start := time.Now()
	missed0 := missed()
	cpu0, err := procCPUTicks(d.pid())
	if err != nil {
		return f, err
	}
	for at := time.Duration(0); ; at += scaleBusyInterval {
		at = min(at, busy)
		if err := sleepOrDone(ctx, time.Until(start.Add(at))); err != nil {
			return f, err
		}
		s, err := sample(start)
		if err != nil {
			return f, err
		}
		f.samples = append(f.samples, s)
		if at == busy {
			break
		}
	}
	cpu1, err := procCPUTicks(d.pid())
	if err != nil {
		return f, err
	}
	f.window = time.Since(start)
	f.missed = missed() - missed0
	first, last := f.samples[0], f.samples[len(f.samples)-1]
	if w := last.At - first.At; w > 0 {
		f.runsPerSec = (last.Runs - first.Runs) / w.Seconds()
	}
	f.cpu = float64(cpu1-cpu0) / clockTicks / f.window.Seconds() * 100
	return f, nil
}
