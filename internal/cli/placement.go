package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

// perInstanceScan is how many runs of every job a listing of a perInstance
// job reads at least: its runs are recorded under one key per instance
// (config.Job.Key), which a store lists only among every job's runs.
const perInstanceScan = 1000

// listRuns lists q's runs. For a perInstance job of cfg they are every
// instance's (the job's keys): the newest max(50 × limit, perInstanceScan)
// runs of all jobs are read, and the job's kept.
func listRuns(ctx context.Context, b claim.Backend, cfg *config.Config, q claim.ListQuery) ([]claim.Run, error) {
	if !perInstanceJob(cfg, q.Job) {
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

// perInstanceJob reports whether cfg's job name is perInstance.
func perInstanceJob(cfg *config.Config, name string) bool {
	for _, j := range cfg.Jobs {
		if j.Name == name {
			return j.PerInstance
		}
	}
	return false
}

// printNotHere prints, for validate, each job this instance does not
// schedule for want of its tags.
func printNotHere(w io.Writer, cfg *config.Config) {
	for _, line := range cfg.NotHere() {
		fmt.Fprintf(w, "%s: info: %s\n", cfg.File, line)
	}
}
