package cli

import (
	"bytes"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/status"
)

func newJobsCmd(env Env) *cobra.Command {
	var (
		cf     configFlags
		asJSON bool
		watchF bool
	)
	c := &cobra.Command{
		Use:   "jobs",
		Short: "List the crontab's jobs: schedule, next slot, pause, last outcome",
		Long: "List the crontab's jobs, one row each: schedule and zone, next slot, whether it is paused\n" +
			"(until when, by whom, why: anarchond pause), and its newest run or note in the store\n" +
			"(its status and slot), and the fields the live instances define differently (drift,\n" +
			"from their heartbeat records). --json: one object per job with job, schedule, timezone,\n" +
			"next_slot, next_slot_ms, paused, paused_until, paused_reason, paused_by, last_status,\n" +
			"last_slot_ms, tags, per_instance, runs_here (where the job may run: the tags an instance\n" +
			"needs, whether every such instance runs it, whether this instance does), drift, drift_fields.",
		Args: cobra.NoArgs,
		RunE: cf.runE(env, func(c *cobra.Command, _ []string, cfg *config.Config) error {
			if watchF {
				if asJSON {
					return usageError(errWatchJSON)
				}
				return watchJobs(c.Context(), env, cfg)
			}
			p := storePrint[[]status.Job]{
				open: openStore,
				read: func(ctx context.Context, b claim.Backend) ([]status.Job, error) {
					return readJobs(ctx, env, cfg, b)
				},
				json: status.WriteJobsJSON, table: status.WriteJobsTable,
			}
			return p.run(c.Context(), env, cfg, asJSON)
		}),
	}
	cf.register(c, env)
	c.Flags().BoolVar(&asJSON, "json", false, "one JSON object per job")
	c.Flags().BoolVar(&watchF, "watch", false, "redraw the table every second until Ctrl-C")
	return c
}

// watchJobs is jobs --watch: the table redrawn every second; a store
// without control records is noted in the frame.
func watchJobs(ctx context.Context, env Env, cfg *config.Config) error {
	b, closeFn, err := openForWatch(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeFn()
	return watch(ctx, env, "jobs", func(ctx context.Context, w *bytes.Buffer) error {
		jobs, err := readJobs(ctx, Env{Stderr: w}, cfg, b)
		if err != nil {
			return err
		}
		return status.WriteJobsTable(w, jobs)
	})
}

// jobsReaders bounds the reads of the jobs' newest runs in flight.
const jobsReaders = 8

// readJobs is every job of cfg with its next slot, its control record and
// its newest run or note (status.ReadJobs); a store without control
// records is noted on stderr.
func readJobs(ctx context.Context, env Env, cfg *config.Config, b claim.Backend) ([]status.Job, error) {
	jobs, note, err := status.ReadJobs(ctx, cfg, b, clock.Real{}.Now(), 1, jobsReaders)
	if err != nil {
		return nil, runtimeError(err)
	}
	if note != "" {
		fmt.Fprintf(env.Stderr, "anarchond: note: %s\n", note)
	}
	return jobs, nil
}
