package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/cluster"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/schedule"
)

// ReadJobs is every job of cfg with its next slot after now, its control
// record and its newest recent runs or notes (at least one, Job.Last the
// newest): the control records in one read, the runs one read per job,
// readers at a time (at least 1). note is set, not an error, when the store keeps
// no control records. It is what `jobs` and the dashboard show.
func ReadJobs(ctx context.Context, cfg *config.Config, b claim.Backend, now time.Time, recent, readers int) (jobs []Job, note string, err error) {
	controls := map[string]claim.Control{}
	if ctl, err := claim.ControllerOf(b, cfg.Backend.Type); err != nil {
		note = err.Error()
	} else {
		all, err := ctl.Controls(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("store %s: %w", cfg.Backend.Describe(), err)
		}
		for _, c := range all {
			controls[c.Job] = c
		}
	}
	drift, err := driftOf(ctx, cfg, b, now)
	if err != nil {
		return nil, "", err
	}
	out := make([]Job, len(cfg.Jobs))
	errs := make([]error, len(cfg.Jobs))
	sem := make(chan struct{}, max(readers, 1))
	var wg sync.WaitGroup
	for i, j := range cfg.Jobs {
		out[i] = Job{Name: j.Name, Schedule: j.Schedule, Timezone: j.Timezone, Control: controls[j.Name], Now: now,
			Tags: j.Tags, PerInstance: j.PerInstance, NotHere: !j.RunsOn(cfg.Tags), Drift: drift[j.Name]}
		if sc, err := schedule.Parse(j.Schedule, j.Location); err == nil {
			out[i].Next = sc.Next(now)
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			runs, err := ListRuns(ctx, b, cfg.Jobs, claim.ListQuery{Job: j.Name, Limit: max(recent, 1)})
			if err != nil {
				errs[i] = fmt.Errorf("store %s: list the runs of %s: %w", cfg.Backend.Describe(), j.Name, err)
			} else if len(runs) > 0 {
				out[i].Last, out[i].Recent = &runs[0], runs
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, "", err
	}
	return out, note, nil
}

// driftOf maps each job the live instances define differently to the
// fields that differ (cluster.Analyze of the instance records), on a store
// that keeps them; none elsewhere.
func driftOf(ctx context.Context, cfg *config.Config, b claim.Backend, now time.Time) (map[string][]string, error) {
	drift := map[string][]string{}
	reg, ok := b.(claim.Registry)
	if !ok {
		return drift, nil
	}
	recs, at, err := reg.Instances(ctx)
	if err != nil {
		return nil, fmt.Errorf("store %s: read the instances: %w", cfg.Backend.Describe(), err)
	}
	if at.IsZero() {
		at = now
	}
	for _, d := range cluster.Analyze(recs, at).Drift {
		drift[d.Job] = d.Fields
	}
	return drift, nil
}

// LivenessOf is what status needs to show the runs left running with no
// live runner as abandoned: on a lease store the store's clock, read with
// the first running run (a store that does not answer leaves every run as
// it is); on a claim-only store now, this host's clock, and the jobs'
// bounds.
func LivenessOf(ctx context.Context, b claim.Backend, jobs []config.Job, now time.Time, runs []claim.Run) Liveness {
	l := Liveness{Now: now, Bounds: BoundsOf(jobs)}
	leaser, ok := b.(claim.Leaser)
	if !ok {
		return l
	}
	for _, r := range runs {
		if r.Status != claim.StatusRunning {
			continue
		}
		if _, storeNow, err := leaser.Read(ctx, r.Job, r.Slot); err == nil || errors.Is(err, claim.ErrNotFound) {
			l.StoreNow = storeNow
		}
		break
	}
	return l
}

// NextSlot is one slot as `next --json` prints it (docs/spec.md#s6-cli).
type NextSlot struct {
	Job    string `json:"job"`
	Slot   string `json:"slot"`
	SlotMs int64  `json:"slot_ms"`
	Local  string `json:"local"`
	// Start is when the run starts: the slot plus its jitter
	// (docs/spec.md#s5-jitter), the same on every instance.
	Start   string `json:"start"`
	StartMs int64  `json:"start_ms"`
}

// NextSlots returns, for each job in order, the next n runs that start
// after from (with a jitter, a slot before from may still start after
// it); a job whose schedule does not parse is an error.
func NextSlots(jobs []config.Job, from time.Time, n int) ([]NextSlot, error) {
	var out []NextSlot
	for _, j := range jobs {
		sc, err := schedule.Parse(j.Schedule, j.Location)
		if err != nil {
			return nil, fmt.Errorf("job %q: %w", j.Name, err)
		}
		t := from.Add(-j.Jitter)
		for i := 0; i < n; {
			if t = sc.Next(t); t.IsZero() {
				break
			}
			start := schedule.Start(j.Name, t, j.Jitter)
			if !start.After(from) {
				continue
			}
			i++
			out = append(out, NextSlot{Job: j.Name, Slot: t.UTC().Format(time.RFC3339Nano),
				SlotMs: t.UnixMilli(), Local: t.In(j.Location).Format(time.RFC3339Nano),
				Start: start.UTC().Format(time.RFC3339Nano), StartMs: start.UnixMilli()})
		}
	}
	return out, nil
}

// perInstanceScan is how many runs of every job a listing of a perInstance
// job reads at least: its runs are recorded under one key per instance
// (config.Job.Key), which a store lists only among every job's runs.
const perInstanceScan = 1000

// ListRuns lists q's runs. For a perInstance job of jobs they are every
// instance's (the job's keys): the newest max(50 × limit, perInstanceScan)
// runs of all jobs are read, and the job's kept.
func ListRuns(ctx context.Context, b claim.Backend, jobs []config.Job, q claim.ListQuery) ([]claim.Run, error) {
	if !perInstanceJob(jobs, q.Job) {
		return b.ListRuns(ctx, q)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	all := q
	all.Job, all.Limit = "", max(50*limit, perInstanceScan)
	runs, err := b.ListRuns(ctx, all)
	if err != nil {
		return nil, err
	}
	out := make([]claim.Run, 0, limit)
	for _, r := range runs {
		if len(out) < limit && config.JobOfKey(r.Job) == q.Job {
			out = append(out, r)
		}
	}
	return out, nil
}

// perInstanceJob reports whether the job named is perInstance.
func perInstanceJob(jobs []config.Job, name string) bool {
	for _, j := range jobs {
		if j.Name == name {
			return j.PerInstance
		}
	}
	return false
}
