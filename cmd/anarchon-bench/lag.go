package main

// Start lag: from a slot's instant to its command's first instruction,
// with 3 daemons sharing one namespace, against a baseline forker that
// only forks the same command at the same instants (forker.go).
//
// Every job runs
//
//	bash -c 'printf "%s %s %s %s\n" "$ANARCHON_JOB" "$ANARCHON_SLOT_MS" "$EPOCHREALTIME" "$ANARCHON_INSTANCE" >>FILE'
//
// $EPOCHREALTIME is bash's own variable (gettimeofday when expanded: no
// second fork, as `date` would be), so the recorded instant is the first
// thing the command does, and the lag is that instant minus the slot. The
// daemons and the forker run the same argv with the same environment, and
// both fork it directly (the daemons' job guard, anarchon-supervise built
// beside anarchond, forks nothing); what the daemons add is the claim, the
// work-spread hold-back and their own bookkeeping.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anarchon/anarchon/internal/secret"
)

// lagResult is one backend at one load.
type lagResult struct {
	Backend              string
	Load                 int           // jobs per second
	Runs                 int           // runs measured (daemons)
	DaemonP50, DaemonP99 time.Duration // slot instant -> the job's first instruction, 3 daemons
	ForkerP50, ForkerP99 time.Duration // the same for the baseline forker at the same load
	Err                  string

	DaemonMax, ForkerMax time.Duration
	ForkerRuns           int            // runs measured (forker)
	Expected             int            // Load × the window's seconds: the runs each side should have
	Missing              int            // window slots the daemons had not run by the end of the drain
	Duplicates           int            // (job, slot) pairs the daemons ran more than once, anywhere
	ByInstance           map[string]int // the window's runs per daemon instance
	// The daemons' lag split by their own log lines (JSON, level info),
	// for the window's runs: slot -> the winning claim's answer ("claim",
	// outcome won: includes the work-spread hold-back and the claim's round
	// trip), and slot -> the job's process started ("job started", logged
	// once its exec succeeded: the job's own, or its supervisor's when the
	// daemon has no guard). The rest, up to DaemonP50/P99, is the shell
	// reaching its first instruction. Zero when not logged.
	ClaimedP50, ClaimedP99 time.Duration
	SpawnedP50, SpawnedP99 time.Duration
	// ClaimOutcomes counts the outcomes of the daemons' claims of the
	// window's slots (their "claim" log lines): a slot run once has one won
	// and the other daemons' running, done or lost; late (or overlap,
	// were lagOverlap skip) would explain a missing run.
	ClaimOutcomes map[string]int
	Took          time.Duration // the whole measurement of this load, set-up and clean-up included
}

// Parameters of the lag measurement.
var (
	lagDaemonCount = 3
	lagWarmup      = 3 * time.Second  // after the jobs appear, before the window
	lagDrain       = 30 * time.Second // after the window, at most, for its last runs
	lagLogLevel    = "info"           // the daemons' log level: the default
)

// lagSchedule: every job is due every second.
const lagSchedule = "* * * * * *"

// lagOverlap is the lag jobs' overlap policy. With the default, skip, a
// slot whose claim arrives while the job's previous run still holds its
// lease is skipped (outcome overlap): once lags near a second, exactly the
// slots that would have been late go unmeasured, and the lag's tail is
// cut off. With allow, every slot runs, as every slot of the forker does.
const lagOverlap = "allow"

// measureLag measures backend at each load (jobs per second, each a job
// due every second) for dur (whole seconds) after a warm-up: first
// lagDaemonCount daemons on a fresh namespace, then the forker alone;
// never both at once. The loads are measured one after the other, each on
// a namespace of its own; a load takes about 2×dur + 10 s (+ the drain
// when the daemons fall behind).
func measureLag(ctx context.Context, backend string, loads []int, dur time.Duration) []lagResult {
	out := make([]lagResult, 0, len(loads))
	bin, err := anarchondBinary(ctx)
	for _, load := range loads {
		switch {
		case err != nil:
			out = append(out, lagResult{Backend: backend, Load: load, Err: err.Error()})
		case ctx.Err() != nil:
			out = append(out, lagResult{Backend: backend, Load: load, Err: "interrupted"})
		default:
			out = append(out, lagAt(ctx, bin, backend, load, dur))
		}
	}
	return out
}

// lagAt is one load: daemons, then the forker.
func lagAt(ctx context.Context, bin, backend string, load int, dur time.Duration) (res lagResult) {
	res = lagResult{Backend: backend, Load: load}
	t0 := time.Now()
	r := &lagRun{ctx: ctx, bin: bin, res: &res}
	defer settleMeasure(t0, &r.errs, &res.Took, &res.Err)
	r.secs = int(dur / time.Second)
	if load < 1 || r.secs < 1 {
		r.errs = append(r.errs, fmt.Errorf("load %d, duration %v: want at least 1 job and 1 s", load, dur))
		return res
	}
	res.Expected = load * r.secs
	bash, err := exec.LookPath("bash")
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("bash (for $EPOCHREALTIME): %w", err))
		return res
	}
	r.bash = bash
	dir, st, err := measureScratch(ctx, "lag", backend)
	if err != nil {
		r.errs = append(r.errs, err)
		return res
	}
	defer os.RemoveAll(dir)
	r.dir, r.st = dir, st

	if !r.daemons(t0, dur) {
		return res
	}
	if ctx.Err() != nil {
		r.errs = append(r.errs, errors.New("interrupted"))
		return res
	}
	r.forker(dur)
	return res
}

// lagRun is one load's measurement as its steps share it: the daemons'
// run, their records and logs, then the forker's run, each adding its
// figures to res and what went wrong to errs.
type lagRun struct {
	ctx   context.Context
	bin   string       // anarchond
	bash  string       // the probe's shell
	dir   string       // the scratch directory: the daemons' own, the records
	st    *daemonStore // the load's fresh namespace
	secs  int          // the window's whole seconds
	names []string     // the jobs' names, the daemons' and the forker's
	res   *lagResult
	errs  []error
}

// daemons runs lagDaemonCount daemons through the window, cleans the
// store of their runs and reads their figures. It reports whether the
// measurement can go on to the forker.
func (r *lagRun) daemons(t0 time.Time, dur time.Duration) bool {
	daemonRecs := filepath.Join(r.dir, "daemons.rec")
	jobs := numberedJobs("lag", r.res.Load, lagSchedule, lagProbeArgv(r.bash, daemonRecs))
	for i := range jobs {
		jobs[i].Overlap = lagOverlap
	}
	r.names = crontabJobNames(jobs)
	daemonLogf("lag %s, %d jobs/s: %d daemons for %v after a %v warm-up...", r.res.Backend, r.res.Load, lagDaemonCount, dur, lagWarmup)
	from, until, werr := lagDaemons(r.ctx, r.bin, r.dir, r.st, jobs, r.secs, daemonRecs)
	if werr != nil {
		r.errs = append(r.errs, werr)
	}
	if until.IsZero() {
		until = time.Now()
	}
	if from.IsZero() {
		from = t0
	}
	if err := cleanupStore(r.st, everySecond(r.names, from.Add(-2*time.Second), until.Add(time.Second))); err != nil {
		r.errs = append(r.errs, err)
	}
	if werr != nil {
		return true
	}
	return r.daemonFigures(daemonRecs, from)
}

// daemonFigures reads the daemons' records of the window that followed
// from: their lags, the runs missing and duplicated, then what their logs
// say. It reports whether the records could be read.
func (r *lagRun) daemonFigures(recFile string, from time.Time) bool {
	recs, bad, err := readLagRecords(recFile)
	if err != nil {
		r.errs = append(r.errs, err)
		return false
	}
	res := r.res
	ws := lagWindow(from)
	we := ws.Add(time.Duration(r.secs) * time.Second)
	s := lagStatsOf(recs, r.names, ws, we)
	res.Runs, res.Missing, res.Duplicates, res.ByInstance = len(s.lags), s.missing, s.dupCount, s.byInstance
	res.DaemonP50, res.DaemonP99, res.DaemonMax = quantileOf(s.lags, 0.50), quantileOf(s.lags, 0.99), quantileOf(s.lags, 1)
	if s.dupCount > 0 {
		r.errs = append(r.errs, fmt.Errorf("not exactly once: %d (job, slot) ran more than once (%s)", s.dupCount, strings.Join(s.dups, ", ")))
	}
	if s.missing > 0 {
		r.errs = append(r.errs, fmt.Errorf("not exactly once: %d of %d window slots had not run %v after the window", s.missing, res.Expected, lagDrain))
	}
	if bad > 0 {
		r.errs = append(r.errs, fmt.Errorf("daemons: %d malformed record lines", bad))
	}
	r.logFigures(ws, we)
	return true
}

// logFigures splits the daemons' lag of the window [ws, we) by their own
// log lines: slot to won claim, slot to job started, and the claims'
// outcomes.
func (r *lagRun) logFigures(ws, we time.Time) {
	var logs [][]byte
	for i := range lagDaemonCount {
		b, err := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("bench-%d", i), "daemon.log"))
		if err != nil {
			r.errs = append(r.errs, err)
		}
		logs = append(logs, b)
	}
	claimed, spawned, outcomes := daemonLogLags(logs, ws, we)
	res := r.res
	res.ClaimOutcomes = outcomes
	res.ClaimedP50, res.ClaimedP99 = quantileOf(claimed, 0.50), quantileOf(claimed, 0.99)
	res.SpawnedP50, res.SpawnedP99 = quantileOf(spawned, 0.50), quantileOf(spawned, 0.99)
}

// forker runs the baseline forker alone, at the same load, through a
// window of its own, and reads its figures.
func (r *lagRun) forker(dur time.Duration) {
	res := r.res
	daemonLogf("lag %s, %d jobs/s: the forker for %v after a %v warm-up...", res.Backend, res.Load, dur, lagWarmup)
	forkerRecs := filepath.Join(r.dir, "forker.rec")
	fstart := time.Now()
	ws := lagWindow(fstart)
	we := ws.Add(time.Duration(r.secs) * time.Second)
	if _, err := runForker(r.ctx, r.names, lagProbeArgv(r.bash, forkerRecs), daemonEnv(), fstart, we); err != nil {
		r.errs = append(r.errs, err)
		return
	}
	recs, bad, err := readLagRecords(forkerRecs)
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	s := lagStatsOf(recs, r.names, ws, we)
	res.ForkerRuns = len(s.lags)
	res.ForkerP50, res.ForkerP99, res.ForkerMax = quantileOf(s.lags, 0.50), quantileOf(s.lags, 0.99), quantileOf(s.lags, 1)
	if s.missing > 0 || s.dupCount > 0 || bad > 0 {
		r.errs = append(r.errs, fmt.Errorf("forker: %d slots missing, %d duplicated, %d malformed lines", s.missing, s.dupCount, bad))
	}
}

// lagWindow is the first slot of the measured window of a run whose jobs
// appeared at from: the first whole second after the warm-up.
func lagWindow(from time.Time) time.Time {
	return from.Add(lagWarmup).Truncate(time.Second).Add(time.Second)
}

// lagDaemons runs the daemons: started with no jobs, then, once all are
// ready, given the jobs by a reload (so that no slot of the last maxLate
// is caught up at start: the jobs' first slots are the ones after the
// reload), kept running through the window and until its runs are all
// recorded (at most lagDrain), and stopped. from is when the last daemon
// had the jobs; until is when the last had stopped.
func lagDaemons(ctx context.Context, bin, dir string, st *daemonStore, jobs []crontabJob, secs int, recFile string) (from, until time.Time, err error) {
	var ds []*benchDaemon
	defer func() {
		if len(ds) > 0 {
			err = errors.Join(err, stopAll(ds))
			until = time.Now()
		}
	}()
	for i := range lagDaemonCount {
		name := fmt.Sprintf("bench-%d", i)
		d, err := startDaemon(bin, dir, name, func(addr string) crontabFile {
			return benchCrontab(name, lagLogLevel, addr, st, nil)
		})
		if err != nil {
			return from, until, err
		}
		ds = append(ds, d)
	}
	for _, d := range ds {
		if err := d.waitReady(ctx); err != nil {
			return from, until, err
		}
	}
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { errs[i] = d.reload(ctx, benchCrontab(d.name, lagLogLevel, d.addr, st, jobs)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return from, until, err
	}
	from = time.Now()
	ws := lagWindow(from)
	we := ws.Add(time.Duration(secs) * time.Second)
	if err := sleepOrDone(ctx, time.Until(we)); err != nil {
		return from, until, err
	}
	// The window's last runs: wait until each is recorded, or lagDrain.
	names := crontabJobNames(jobs)
	deadline := time.Now().Add(lagDrain)
	for time.Now().Before(deadline) {
		if err := sleepOrDone(ctx, 250*time.Millisecond); err != nil {
			return from, until, err
		}
		recs, _, err := readLagRecords(recFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return from, until, err
		}
		if lagStatsOf(recs, names, ws, we).missing == 0 {
			break
		}
	}
	return from, until, nil
}

// lagProbeArgv is the jobs' command: bash records the job, the slot, its
// first instant and the instance, one line appended to file (one write(2)
// with O_APPEND: lines of concurrent jobs do not interleave).
func lagProbeArgv(bash, file string) []string {
	return []string{bash, "-c", `printf '%s %s %s %s\n' "$ANARCHON_JOB" "$ANARCHON_SLOT_MS" "$EPOCHREALTIME" "$ANARCHON_INSTANCE" >>` + shellQuote(file)}
}

// shellQuote quotes s for sh/bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// lagRecord is one line of the probe: a run's first instant.
type lagRecord struct {
	job      string
	slot     int64 // ms since the epoch
	at       time.Time
	instance string
}

// readLagRecords reads a probe file.
func readLagRecords(path string) ([]lagRecord, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	recs, bad := parseLagRecords(b)
	return recs, bad, nil
}

// parseLagRecords parses the probe's lines "job slot_ms epochrealtime
// instance"; bad counts the lines that are not. A last line without its
// newline is still being written: it is neither parsed nor counted.
func parseLagRecords(b []byte) (recs []lagRecord, bad int) {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			bad++
			continue
		}
		slot, err1 := strconv.ParseInt(f[1], 10, 64)
		at, err2 := parseEpochRealtime(f[2])
		if err1 != nil || err2 != nil {
			bad++
			continue
		}
		recs = append(recs, lagRecord{job: f[0], slot: slot, at: at, instance: f[3]})
	}
	return recs, bad
}

// parseEpochRealtime parses bash's $EPOCHREALTIME: seconds, the locale's
// decimal point ('.' or ','), microseconds.
func parseEpochRealtime(s string) (time.Time, error) {
	sec, frac, ok := strings.Cut(s, ".")
	if !ok {
		sec, frac, ok = strings.Cut(s, ",")
	}
	if !ok || frac == "" || len(frac) > 9 {
		return time.Time{}, fmt.Errorf("EPOCHREALTIME %q: want seconds.fraction", s)
	}
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("EPOCHREALTIME %q: %w", s, err)
	}
	ns, err := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	if err != nil || frac[0] == '-' || frac[0] == '+' {
		return time.Time{}, fmt.Errorf("EPOCHREALTIME %q: bad fraction", s)
	}
	return time.Unix(n, ns), nil
}

// lagStats is what the records of one run say.
type lagStats struct {
	lags       []time.Duration // the window's runs: first instant - slot
	byInstance map[string]int  // the window's runs per instance
	missing    int             // (job, slot) of the window with no record
	dupCount   int             // (job, slot) with more than one record, anywhere
	dups       []string        // the first few of them
}

// lagStatsOf sums up recs: the lags of the runs whose slot is in [ws, we)
// (slots are whole seconds), the window slots of jobs with no run, and
// every (job, slot) run more than once.
func lagStatsOf(recs []lagRecord, jobs []string, ws, we time.Time) lagStats {
	s := lagStats{byInstance: map[string]int{}}
	count := map[runKey]int{}
	from, to := ws.UnixMilli(), we.UnixMilli()
	for _, r := range recs {
		k := runKey{r.job, r.slot}
		count[k]++
		if r.slot >= from && r.slot < to {
			s.lags = append(s.lags, r.at.Sub(time.UnixMilli(r.slot)))
			s.byInstance[r.instance]++
		}
	}
	for slot := from; slot < to; slot += 1000 {
		for _, j := range jobs {
			if count[runKey{j, slot}] == 0 {
				s.missing++
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(count), func(a, b runKey) int {
		return cmp.Or(strings.Compare(a.job, b.job), cmp.Compare(a.slot, b.slot))
	}) {
		if n := count[k]; n > 1 {
			s.dupCount++
			if len(s.dups) < 5 {
				s.dups = append(s.dups, fmt.Sprintf("%s@%d ×%d", k.job, k.slot, n))
			}
		}
	}
	return s
}

// quantileOf is the p-quantile of d, nearest rank below as table.go's
// percentile (d[int(p*(n-1))] of the sorted values), without sorting d
// itself; 0 for no values.
func quantileOf(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// oneLineErr is err on one line, passwords hidden.
func oneLineErr(err error) string {
	return strings.Join(strings.Fields(secret.Redact(err.Error())), " ")
}

// daemonLogLags reads the daemons' JSON logs: for each run of a slot in
// [ws, we), the instant of its won claim's line ("claim", outcome won)
// and of its "job started" line, minus the slot, and the count of each
// claim outcome. Lines that are not JSON (a warning before the logger
// started) are skipped.
func daemonLogLags(logs [][]byte, ws, we time.Time) (claimed, spawned []time.Duration, outcomes map[string]int) {
	outcomes = map[string]int{}
	type entry struct {
		TS      string `json:"ts"`
		Msg     string `json:"msg"`
		Slot    string `json:"slot"`
		Outcome string `json:"outcome"`
	}
	for _, b := range logs {
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			if len(line) == 0 || line[0] != '{' {
				continue
			}
			var e entry
			if json.Unmarshal(line, &e) != nil {
				continue
			}
			if e.Msg != "claim" && e.Msg != "job started" {
				continue
			}
			won := e.Msg == "claim" && e.Outcome == "won"
			slot, err1 := time.Parse(time.RFC3339Nano, e.Slot)
			ts, err2 := time.Parse(time.RFC3339Nano, e.TS)
			if err1 != nil || err2 != nil || slot.Before(ws) || !slot.Before(we) {
				continue
			}
			switch {
			case e.Msg == "job started":
				spawned = append(spawned, ts.Sub(slot))
			case won:
				claimed = append(claimed, ts.Sub(slot))
				fallthrough
			default:
				outcomes[e.Outcome]++
			}
		}
	}
	return claimed, spawned, outcomes
}
