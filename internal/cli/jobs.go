package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/spf13/cobra"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/schedule"
	"github.com/anarchon/anarchon/internal/status"
)

// jobsReaders bounds the reads of the jobs' newest runs in flight.
const jobsReaders = 8

func newJobsCmd(env Env) *cobra.Command {
	var (
		cf     configFlags
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "jobs",
		Short: "List the crontab's jobs: schedule, next slot, pause, last outcome",
		Long: "List the crontab's jobs, one row each: schedule and zone, next slot, whether it is paused\n" +
			"(until when, by whom, why: anarchond pause), and its newest run or note in the store\n" +
			"(its status and slot), and the fields the live instances define differently (drift,\n" +
			"from their heartbeat records). --json: one object per job with job, schedule, timezone,\n" +
			"next_slot, next_slot_ms, paused, paused_until, paused_reason, paused_by, last_status,\n" +
			"last_slot_ms, drift, drift_fields.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := cf.load(env)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), storeTimeout)
			defer cancel()
			b, err := openStore(ctx, cfg)
			if err != nil {
				return err
			}
			defer b.Close()
			jobs, err := readJobs(ctx, env, cfg, b)
			if err != nil {
				return err
			}
			if asJSON {
				err = status.WriteJobsJSON(env.Stdout, jobs)
			} else {
				err = status.WriteJobsTable(env.Stdout, jobs)
			}
			if err != nil {
				return runtimeError(err)
			}
			return nil
		},
	}
	cf.register(c, env)
	c.Flags().BoolVar(&asJSON, "json", false, "one JSON object per job")
	return c
}

// readJobs is every job of cfg with its next slot, its control record and
// its newest run or note: the control records in one read, the runs one
// read per job, jobsReaders at a time.
func readJobs(ctx context.Context, env Env, cfg *config.Config, b claim.Backend) ([]status.Job, error) {
	now := clock.Real{}.Now()
	controls := map[string]claim.Control{}
	if ctl, err := claim.ControllerOf(b, cfg.Backend.Type); err != nil {
		fmt.Fprintf(env.Stderr, "anarchond: note: %v\n", err)
	} else {
		all, err := ctl.Controls(ctx)
		if err != nil {
			return nil, runtimeError(fmt.Errorf("store %s: %w", cfg.Backend.Describe(), err))
		}
		for _, c := range all {
			controls[c.Job] = c
		}
	}
	drift := map[string][]string{}
	if _, err := claim.RegistryOf(b, cfg.Backend.Type); err == nil {
		v, err := readCluster(ctx, cfg, b)
		if err != nil {
			return nil, err
		}
		for _, d := range v.Drift {
			drift[d.Job] = d.Fields
		}
	}
	out := make([]status.Job, len(cfg.Jobs))
	errs := make([]error, len(cfg.Jobs))
	sem := make(chan struct{}, jobsReaders)
	var wg sync.WaitGroup
	for i, j := range cfg.Jobs {
		out[i] = status.Job{Name: j.Name, Schedule: j.Schedule, Timezone: j.Timezone, Control: controls[j.Name], Now: now, Drift: drift[j.Name]}
		if sc, err := schedule.Parse(j.Schedule, j.Location); err == nil {
			out[i].Next = sc.Next(now)
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			runs, err := b.ListRuns(ctx, claim.ListQuery{Job: j.Name, Limit: 1})
			if err != nil {
				errs[i] = fmt.Errorf("store %s: list the runs of %s: %w", cfg.Backend.Describe(), j.Name, err)
			} else if len(runs) > 0 {
				out[i].Last = &runs[0]
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, runtimeError(err)
	}
	return out, nil
}
