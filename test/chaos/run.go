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
	if err := os.MkdirAll(filepath.Join(rc.dir, "fence"), 0o755); err != nil {
		return res, err
	}
	progress(rc.backend, "run directory %s, seed %d (repeat the schedule with -seed %d)", rc.dir, rc.seed, rc.seed)
	st, err := openStore(ctx, rc.backend, rc.dir, rc.private)
	if err != nil {
		return res, fmt.Errorf("%s: %w", rc.backend, err)
	}
	st.setRestart(rc.storeRestart)
	defer func() {
		if cerr := st.cleanup(rc.keep); cerr != nil {
			progress(rc.backend, "cleanup: %v", cerr)
		}
	}()

	jobs := withoutLeases(append(makeJobs(rc.jobs), burstJobs(rc.burst)...), st.lease)
	env := daemonEnv()
	exits := make(chan int, 64)
	insts := make([]*instance, rc.instances)
	for i := range insts {
		in := newInstance(i, rc.dir, rc.bins.anarchond, env, exits)
		hostport := ""
		if st.network() {
			p, err := faultproxy.Start("127.0.0.1:0", st.addr())
			if err != nil {
				return res, err
			}
			defer p.Close()
			in.proxy, hostport = p, p.Addr()
		}
		if err := writeCrontab(in.cfgPath, i, st.ns, st.backendConfig(hostport), jobs, rc.bins.job, rc.dir); err != nil {
			return res, err
		}
		if i == 0 {
			if err := resolvedClaimAhead(in.cfgPath, jobs); err != nil {
				return res, err
			}
		}
		if err := in.setSkew(0); err != nil {
			return res, err
		}
		insts[i] = in
	}
	// Whatever happens, no daemon outlives the run.
	defer func() {
		for _, in := range insts {
			if in.proc != nil && in.state != instKilled {
				_ = in.kill() // best effort on the way out
			}
		}
	}()

	flog, err := openFaultLog(filepath.Join(rc.dir, "faults.jsonl"), rc.backend)
	if err != nil {
		return res, err
	}
	defer flog.close()
	info := check.RunInfo{
		Backend: rc.backend, Lease: st.lease, Instances: rc.instances, Seed: rc.seed,
		EpsilonMs: epsilonMs, Jobs: jobs,
		// Every store runs on this host and reads its clock (SQLite the
		// host's, not the daemons' test clocks): store time is wall time.
		StoreClockOffsetMs: 0,
	}
	c := &chaos{
		rng:   rand.New(rand.NewPCG(uint64(rc.seed), uint64(rc.seed)^0x9e3779b97f4a7c15)),
		st:    st,
		insts: insts,
		log:   flog,
		exits: exits,
		ov:    newOverload(rc.bins.job),
	}
	// Whatever happens (an error, ^C), no busy loop outlives the run.
	defer func() {
		if err := c.ov.stop(); err != nil {
			progress(rc.backend, "overload: %v", err)
		}
	}()

	info.StartMs = time.Now().UnixMilli()
	for _, j := range jobs {
		if j.Drift != "" {
			flog.add(check.FaultDriftOn, j.DriftInstance, 0,
				fmt.Sprintf("job %s: %q instead of %q", j.Name, j.Drift, j.Schedule))
		}
	}
	for _, in := range insts {
		if err := c.start(in); err != nil {
			return res, err
		}
	}
	for _, in := range insts {
		if err := in.waitReady(ctx, 60*time.Second); err != nil {
			return res, err
		}
	}

	if err := c.run(ctx, time.Now().Add(rc.duration)); err != nil {
		return res, err
	}
	info.EndMs, err = c.quiesce(ctx)
	if err != nil {
		return res, err
	}
	// Backups take over the runs whose runners died just before the
	// quiesce. The jobs still running then finish during the graceful stop
	// (shutdownGraceMs exceeds the longest job), so the drain need not wait
	// for them too: that keeps -all of eight backends within ten minutes.
	drain := drainTime()
	progress(rc.backend, "draining %v", drain)
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(drain):
	}
	c.notes = append(c.notes, stopAll(flog, insts)...)

	if err := writeStatus(ctx, rc, st, insts[0]); err != nil {
		return res, err
	}
	if err := writeJSON(filepath.Join(rc.dir, "run.json"), info); err != nil {
		return res, err
	}
	for _, n := range c.notes {
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
