package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anarchon/anarchon/internal/faultproxy"
	"github.com/anarchon/anarchon/test/chaos/check"
)

// runConfig is one backend's chaos run.
type runConfig struct {
	backend   string
	dir       string // the run directory (created)
	bins      binaries
	duration  time.Duration
	instances int
	jobs      int
	burst     int // jobs sharing the burst schedule, beside jobs
	seed      int64
	keep      bool // leave the store's namespace in place
	private   bool // private Redis / NATS servers
	// storeRestart: nil means the default (private servers only).
	storeRestart *bool
}

// runResult is what one run found.
type runResult struct {
	row tableRow
	ok  bool // no violation
}

// harnessError is a failure of the harness or its environment (a store
// that does not answer, a binary that does not build): exit status 2.
type harnessError struct{ err error }

func (h harnessError) Error() string { return h.err.Error() }
func (h harnessError) Unwrap() error { return h.err }

// runBackend runs one backend: it starts the store and the instances,
// injects faults for the duration, drains, stops everything, collects
// status.jsonl and run.json and calls the checker.
func runBackend(ctx context.Context, rc runConfig) (res runResult, err error) {
	defer func() {
		if err != nil && !errors.As(err, new(harnessError)) {
			err = harnessError{err}
		}
	}()
	b := &backendRun{rc: rc}
	if err := b.openStore(ctx); err != nil {
		return res, err
	}
	defer b.cleanupStore()
	defer b.closeProxies()
	if err := b.makeInstances(); err != nil {
		return res, err
	}
	// Whatever happens, no daemon outlives the run.
	defer b.killAll()

	if err := b.openChaos(); err != nil {
		return res, err
	}
	defer b.flog.close()
	// Whatever happens (an error, ^C), no busy loop outlives the run.
	defer b.stopOverload()

	if err := b.start(ctx); err != nil {
		return res, err
	}
	if err := b.faultAndDrain(ctx); err != nil {
		return res, err
	}
	return b.collect(ctx)
}

// backendRun is what the steps of one backend's run share: the store, the
// jobs, the instances with their fault proxies, the fault log, the chaos
// schedule and the run.json it fills in.
type backendRun struct {
	rc      runConfig
	st      *store
	jobs    []check.JobInfo
	exits   chan int // instances that exited on their own
	insts   []*instance
	proxies []*faultproxy.Proxy // in the order they were started
	flog    *faultLog
	c       *chaos
	info    check.RunInfo
}

// openStore creates the run directory and opens the backend's store.
func (b *backendRun) openStore(ctx context.Context) error {
	rc := b.rc
	if err := os.MkdirAll(filepath.Join(rc.dir, "fence"), 0o755); err != nil {
		return err
	}
	progress(rc.backend, "run directory %s, seed %d (repeat the schedule with -seed %d)", rc.dir, rc.seed, rc.seed)
	st, err := openStore(ctx, rc.backend, rc.dir, rc.private)
	if err != nil {
		return fmt.Errorf("%s: %w", rc.backend, err)
	}
	st.setRestart(rc.storeRestart)
	b.st = st
	return nil
}

// cleanupStore removes the run's place from the store (unless -keep) and
// stops the private server; a failure is only reported.
func (b *backendRun) cleanupStore() {
	if cerr := b.st.cleanup(b.rc.keep); cerr != nil {
		progress(b.rc.backend, "cleanup: %v", cerr)
	}
}

// makeInstances writes the crontab of every instance and, for a network
// store, starts the fault proxy it reaches the store through. Nothing is
// started yet.
func (b *backendRun) makeInstances() error {
	rc, st := b.rc, b.st
	b.jobs = withoutLeases(append(makeJobs(rc.jobs), burstJobs(rc.burst)...), st.lease)
	env := daemonEnv()
	b.exits = make(chan int, 64)
	insts := make([]*instance, rc.instances)
	for i := range insts {
		in := newInstance(i, rc.dir, rc.bins.anarchond, env, b.exits)
		hostport := ""
		if st.network() {
			p, err := faultproxy.Start("127.0.0.1:0", st.addr())
			if err != nil {
				return err
			}
			b.proxies = append(b.proxies, p)
			in.proxy, hostport = p, p.Addr()
		}
		if err := writeCrontab(in.cfgPath, i, st.ns, st.backendConfig(hostport), b.jobs, rc.bins.job, rc.dir); err != nil {
			return err
		}
		if i == 0 {
			if err := resolvedClaimAhead(in.cfgPath, b.jobs); err != nil {
				return err
			}
		}
		if err := in.setSkew(0); err != nil {
			return err
		}
		insts[i] = in
	}
	b.insts = insts
	return nil
}

// closeProxies closes the fault proxies, the last started first.
func (b *backendRun) closeProxies() {
	for _, p := range slices.Backward(b.proxies) {
		_ = p.Close() // best effort on the way out
	}
}

// killAll kills every daemon still running.
func (b *backendRun) killAll() {
	for _, in := range b.insts {
		if in.proc != nil && in.state != instKilled {
			_ = in.kill() // best effort on the way out
		}
	}
}

// openChaos opens faults.jsonl and sets up the fault schedule, seeded
// from the run's seed, and the run.json it describes.
func (b *backendRun) openChaos() error {
	rc := b.rc
	flog, err := openFaultLog(filepath.Join(rc.dir, "faults.jsonl"), rc.backend)
	if err != nil {
		return err
	}
	b.flog = flog
	b.info = check.RunInfo{
		Backend: rc.backend, Lease: b.st.lease, Instances: rc.instances, Seed: rc.seed,
		EpsilonMs: epsilonMs, Jobs: b.jobs,
		// Every store runs on this host and reads its clock (SQLite the
		// host's, not the daemons' test clocks): store time is wall time.
		StoreClockOffsetMs: 0,
	}
	b.c = &chaos{
		rng:   rand.New(rand.NewPCG(uint64(rc.seed), uint64(rc.seed)^0x9e3779b97f4a7c15)),
		st:    b.st,
		insts: b.insts,
		log:   flog,
		exits: b.exits,
		ov:    newOverload(rc.bins.job),
	}
	return nil
}

// stopOverload kills the overload fault's busy loops, if any run.
func (b *backendRun) stopOverload() {
	if err := b.c.ov.stop(); err != nil {
		progress(b.rc.backend, "overload: %v", err)
	}
}

// start marks the run's start, logs the jobs whose schedule drifts on one
// instance, starts every instance and waits until each schedules.
func (b *backendRun) start(ctx context.Context) error {
	b.info.StartMs = time.Now().UnixMilli()
	for _, j := range b.jobs {
		if j.Drift != "" {
			b.flog.add(check.FaultDriftOn, j.DriftInstance, 0,
				fmt.Sprintf("job %s: %q instead of %q", j.Name, j.Drift, j.Schedule))
		}
	}
	for _, in := range b.insts {
		if err := b.c.start(in); err != nil {
			return err
		}
	}
	for _, in := range b.insts {
		if err := in.waitReady(ctx, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// faultAndDrain injects faults for the duration, quiesces (the run's end),
// lets the instances run fault-free for the drain and stops them all.
func (b *backendRun) faultAndDrain(ctx context.Context) error {
	if err := b.c.run(ctx, time.Now().Add(b.rc.duration)); err != nil {
		return err
	}
	var err error
	b.info.EndMs, err = b.c.quiesce(ctx)
	if err != nil {
		return err
	}
	// Backups take over the runs whose runners died just before the
	// quiesce. The jobs still running then finish during the graceful stop
	// (shutdownGraceMs exceeds the longest job), so the drain need not wait
	// for them too: that keeps -all of eight backends within ten minutes.
	drain := drainTime()
	progress(b.rc.backend, "draining %v", drain)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(drain):
	}
	b.c.notes = append(b.c.notes, stopAll(b.flog, b.insts)...)
	return nil
}

// collect writes status.jsonl and run.json, reports the run's notes and
// calls the checker on the run directory.
func (b *backendRun) collect(ctx context.Context) (res runResult, err error) {
	rc := b.rc
	if err := writeStatus(ctx, rc, b.st, b.insts[0]); err != nil {
		return res, err
	}
	if err := writeJSON(filepath.Join(rc.dir, "run.json"), b.info); err != nil {
		return res, err
	}
	for _, n := range b.c.notes {
		progress(rc.backend, "NOTE: %s", n)
	}
	res.row, res.ok, err = runChecker(rc.dir)
	if err != nil {
		return res, fmt.Errorf("checker: %w", err)
	}
	return res, nil
}

// drainTime is how long the instances keep running, fault-free, after the
// quiesce: a takeover's bound (lease + heartbeat + ε) and a second.
func drainTime() time.Duration {
	return time.Duration(leaseMs+heartbeatMs+epsilonMs)*time.Millisecond + time.Second
}

// stopAll SIGTERMs every instance at once and waits for them to exit; a
// daemon that does not exit in time or exits non-zero is returned as a
// note.
func stopAll(flog *faultLog, insts []*instance) []string {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		notes []string
	)
	for _, in := range insts {
		if in.state == instKilled {
			continue
		}
		flog.add(check.FaultStopInstance, in.idx, 0, "")
		wg.Go(func() {
			if err := in.terminate(shutdownGraceMs*time.Millisecond + 2*time.Second); err != nil {
				mu.Lock()
				notes = append(notes, err.Error())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return notes
}

// writeStatus runs `anarchond status --json` against the store itself (not
// through a proxy) into status.jsonl.
func writeStatus(ctx context.Context, rc runConfig, st *store, in *instance) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := os.Create(filepath.Join(rc.dir, "status.jsonl"))
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, rc.bins.anarchond, "status", "--json", "--limit", "100000", "--config", in.cfgPath)
	cmd.Env = append(daemonEnv(), st.directEnv()...)
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		out.Close()
		return fmt.Errorf("anarchond status: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out.Close()
}

// daemonEnv is the harness's environment without ANARCHON_* variables,
// which would override the crontabs.
func daemonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANARCHON_") {
			env = append(env, kv)
		}
	}
	return env
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
