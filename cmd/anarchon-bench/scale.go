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
	overhead, err := res.storeCounter(ctx, st)
	if err != nil {
		errs = append(errs, fmt.Errorf("store counter: %w", err))
		return res
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
	res.setBusy(b)
	return res
}

// storeCounter says in res how st counts the store's operations, and
// returns what one reading of its shared counter adds to it (0 when it
// has none).
func (res *scaleResult) storeCounter(ctx context.Context, st *daemonStore) (overhead int64, err error) {
	switch {
	case st.watchOps != nil:
		res.StoreOpsScope, res.SharedOpsScope = st.watchScope, st.opsScope
	case st.countOps != nil:
		res.StoreOpsScope = st.opsScope
	}
	if st.countOps == nil {
		return 0, nil
	}
	return st.opsOverhead(ctx)
}

// setBusy puts the busy daemon's figures in res: its rates, its first and
// last samples, their extremes, and a note when it did not keep up.
func (res *scaleResult) setBusy(b busyFigures) {
	res.BusySamples, res.BusyWindow, res.BusyRunsPerSec, res.BusyMissed, res.BusyCPUPercent =
		b.samples, b.window, b.runsPerSec, b.missed, b.cpu
	if b.runsPerSec < 0.95*float64(scaleBusyJobs) && len(b.samples) > 1 {
		res.BusyNote = fmt.Sprintf("behind: %.0f of %d runs/s; RSS and goroutine growth is the backlog, not a measure of flatness", b.runsPerSec, scaleBusyJobs)
	}
	n := len(b.samples)
	if n == 0 {
		return
	}
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
	err = f.measure(ctx, d, &idleCounter{st: st, overhead: overhead}, idle)
	return f, err
}

// measure reads the settled daemon d's RSS, CPU time and the store's
// operations (by c) at both ends of an idle window of idle.
func (f *idleFigures) measure(ctx context.Context, d *benchDaemon, c *idleCounter, idle time.Duration) (err error) {
	if f.rss, err = procRSS(d.pid()); err != nil {
		return err
	}
	if err := c.start(ctx, d.pid()); err != nil {
		return err
	}
	cpu0, err := procCPUTicks(d.pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := sleepOrDone(ctx, idle); err != nil {
		return err
	}
	cpu1, err := procCPUTicks(d.pid())
	if err != nil {
		return err
	}
	f.window = time.Since(t0)
	if err := c.finish(ctx, f); err != nil {
		return err
	}
	if f.rssEnd, err = procRSS(d.pid()); err != nil {
		return err
	}
	f.cpu = float64(cpu1-cpu0) / clockTicks / f.window.Seconds() * 100
	return nil
}

// idleCounter counts the store's operations over an idle window, as the
// store can: the daemon's own (watchOps), the store's shared counter
// (countOps), or both.
type idleCounter struct {
	st        *daemonStore
	overhead  int64 // what one reading of the shared counter adds to it
	ops0      int64 // the shared counter at the window's start
	stopWatch func() (int64, error)
}

// start reads the shared counter and starts watching process pid's own
// operations, where the store can.
func (c *idleCounter) start(ctx context.Context, pid int) (err error) {
	if c.st.countOps != nil {
		if c.ops0, err = c.st.countOps(ctx); err != nil {
			return fmt.Errorf("store counter: %w", err)
		}
	}
	if c.st.watchOps != nil {
		if c.stopWatch, err = c.st.watchOps(ctx, pid); err != nil {
			return fmt.Errorf("store counter: %w", err)
		}
	}
	return nil
}

// finish ends the window f.window long: the daemon's own operations per
// minute in f.opsPerMin when they are watched, the shared counter's (less
// its readings) in f.sharedPerMin beside them, else in f.opsPerMin.
func (c *idleCounter) finish(ctx context.Context, f *idleFigures) error {
	if c.stopWatch != nil {
		own, err := c.stopWatch()
		if err != nil {
			return fmt.Errorf("store counter: %w", err)
		}
		f.opsPerMin = float64(own) / f.window.Minutes()
	}
	if c.st.countOps == nil {
		return nil
	}
	ops1, err := c.st.countOps(ctx)
	if err != nil {
		return fmt.Errorf("store counter: %w", err)
	}
	shared := float64(max(ops1-c.ops0-c.overhead, 0)) / f.window.Minutes()
	if c.stopWatch != nil {
		f.sharedPerMin = shared
	} else {
		f.opsPerMin = shared
	}
	return nil
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
	err = f.measure(ctx, d, busy)
	return f, err
}

// measure samples the busy daemon d every scaleBusyInterval for busy, and
// works out its runs a second, its missed slots and its CPU over the
// window.
func (f *busyFigures) measure(ctx context.Context, d *benchDaemon, busy time.Duration) error {
	start := time.Now()
	missed0 := missedSlots(ctx, d)
	cpu0, err := procCPUTicks(d.pid())
	if err != nil {
		return err
	}
	for at := time.Duration(0); ; at += scaleBusyInterval {
		at = min(at, busy)
		if err := sleepOrDone(ctx, time.Until(start.Add(at))); err != nil {
			return err
		}
		s, err := busySample(ctx, d, start)
		if err != nil {
			return err
		}
		f.samples = append(f.samples, s)
		if at == busy {
			break
		}
	}
	cpu1, err := procCPUTicks(d.pid())
	if err != nil {
		return err
	}
	f.window = time.Since(start)
	f.missed = missedSlots(ctx, d) - missed0
	first, last := f.samples[0], f.samples[len(f.samples)-1]
	if w := last.At - first.At; w > 0 {
		f.runsPerSec = (last.Runs - first.Runs) / w.Seconds()
	}
	f.cpu = float64(cpu1-cpu0) / clockTicks / f.window.Seconds() * 100
	return nil
}

// busySample reads d's goroutines and runs from /metrics, and its RSS, at
// its time since start.
func busySample(ctx context.Context, d *benchDaemon, start time.Time) (scaleSample, error) {
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

// missedSlots is d's anarchon_missed_slots_total (0 when it cannot be
// read).
func missedSlots(ctx context.Context, d *benchDaemon) float64 {
	v, _ := d.metric(ctx, "anarchon_missed_slots_total")
	return v
}
