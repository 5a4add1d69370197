package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/status"
	"github.com/anarchon/anarchon/internal/store"
)

func newValidateCmd(env Env) *cobra.Command {
	var (
		cf      = configFlags{host: config.HostErrors}
		offline bool
	)
	c := &cobra.Command{
		Use:   "validate",
		Short: "Check the crontab; list every problem with its file, line, job and field",
		Long: "Check the crontab and list every problem with its file, line, job and field (exit 2),\n" +
			"including what would fail every run on this host: a job's unknown user or group, a\n" +
			"workdir that is not a directory, a program (args[0]) or shell that is not there or not\n" +
			"executable, an argument the kernel refuses, a schedule that never fires.\n" +
			"Then open the store as the daemon would (connect, check its version and settings, migrate):\n" +
			"a store that cannot be used is reported with the reason (exit 1). --offline skips that\n" +
			"(the host checks need no store and still run).",
		Args: cobra.NoArgs,
		RunE: cf.runE(env, func(c *cobra.Command, _ []string, cfg *config.Config) error {
			fmt.Fprintf(env.Stdout, "%s: ok: %d job(s), backend %s, instance %s\n",
				cfg.File, len(cfg.Jobs), cfg.Backend.Describe(), cfg.Instance)
			printNotHere(env.Stdout, cfg)
			if offline {
				return nil
			}
			ctx, cancel := context.WithTimeout(c.Context(), 15*time.Second)
			defer cancel()
			if d, ok := store.Lookup(cfg.Backend.Type); ok && d.Check != nil {
				note, err := d.Check(ctx, cfg.Backend.Store)
				if err != nil {
					return runtimeError(fmt.Errorf("%s: the store cannot be used: %w", cfg.File, err))
				}
				for _, line := range strings.Split(note, "\n") {
					if line != "" {
						fmt.Fprintf(env.Stdout, "%s: %s\n", cfg.File, line)
					}
				}
			}
			b, err := cfg.OpenStore(ctx, zap.NewNop(), nil)
			if err != nil {
				return runtimeError(fmt.Errorf("%s: the store cannot be used: %w", cfg.File, err))
			}
			defer b.Close()
			fmt.Fprintf(env.Stdout, "%s: store ok: %s\n", cfg.File, cfg.Backend.Describe())
			return nil
		}),
	}
	cf.register(c, env)
	c.Flags().BoolVar(&offline, "offline", false, "check the file and this host; do not open the store")
	return c
}

// MaxNextCount bounds next's --count: the slots are collected before they
// are printed (the table aligns its columns), and ten thousand per job
// already cover a week of a job that runs every minute.
const MaxNextCount = 10000

func newNextCmd(env Env) *cobra.Command {
	var (
		cf     configFlags
		job    string
		n      int
		from   string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "next",
		Short: "Print the next slots of each job, in its zone and in UTC, and when each run starts (jitterMs)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch {
			case n <= 0:
				return usageError(fmt.Errorf("-n %d: want a positive count", n))
			case n > MaxNextCount:
				return usageError(fmt.Errorf("-n %d: at most %d slots per job (--count)", n, MaxNextCount))
			}
			cfg, err := cf.load(env)
			if err != nil {
				return err
			}
			t0 := clock.Real{}.Now()
			if from != "" {
				if t0, err = time.Parse(time.RFC3339Nano, from); err != nil {
					return usageError(fmt.Errorf("--from %q: want RFC 3339, e.g. 2027-03-28T00:00:00Z", from))
				}
			}
			jobs, err := selectJobs(cfg, job)
			if err != nil {
				return err
			}
			out, err := status.NextSlots(jobs, t0, n)
			if err != nil {
				return usageError(err)
			}
			if asJSON {
				enc := json.NewEncoder(env.Stdout)
				for _, s := range out {
					if err := enc.Encode(s); err != nil {
						return runtimeError(err)
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			// START only where a job has a jitter: otherwise it is the slot.
			jittered := slices.ContainsFunc(jobs, func(j config.Job) bool { return j.Jitter > 0 })
			if jittered {
				fmt.Fprintln(tw, "JOB\tLOCAL\tUTC\tSTART (UTC)")
			} else {
				fmt.Fprintln(tw, "JOB\tLOCAL\tUTC")
			}
			for _, s := range out {
				if jittered {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Job, s.Local, s.Slot, s.Start)
				} else {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Job, s.Local, s.Slot)
				}
			}
			return tw.Flush()
		},
	}
	cf.register(c, env)
	c.Flags().StringVar(&job, "job", "", "only this job")
	c.Flags().IntVarP(&n, "count", "n", 5, fmt.Sprintf("slots per job (at most %d)", MaxNextCount))
	c.Flags().StringVar(&from, "from", "", "start after this time (RFC 3339; default now)")
	c.Flags().BoolVar(&asJSON, "json", false, "one JSON object per slot: job, slot, slot_ms, local, start, start_ms")
	return c
}

// selectJobs returns every job, or the one named (a usage error if unknown).
func selectJobs(cfg *config.Config, name string) ([]config.Job, error) {
	if name == "" {
		return cfg.Jobs, nil
	}
	for _, j := range cfg.Jobs {
		if j.Name == name {
			return []config.Job{j}, nil
		}
	}
	return nil, usageError(fmt.Errorf("--job %q: no such job in %s", name, cfg.File))
}

func newStatusCmd(env Env) *cobra.Command {
	var (
		cf     configFlags
		job    string
		limit  int
		asJSON bool
		filter status.Filter
		outc   string
		watchF bool
	)
	c := &cobra.Command{
		Use:   "status",
		Short: "Show recent runs read from the store: what ran where",
		Long: "Show recent runs read from the store: what ran where.\n" +
			"A run's status is running, succeeded, failed, timeout, interrupted, replaced (stopped at the\n" +
			"job's next slot, overlap: replace), or abandoned: the store\n" +
			"holds it running but no live runner does (on a lease store its lease ended by the store's\n" +
			"clock; on a claim-only store it has run longer than the job's timeout + killGraceMs +\n" +
			"max(30s, leaseMs)). No store writes abandoned; status computes it when it reads the runs.\n" +
			"A slot that no attempt ran is skipped (overlap: the job's previous run held it; paused:\n" +
			"anarchond pause held the job; drift: the instances define the job differently and it has\n" +
			"onDrift: pause), missed (late, store_unreachable, store_refused, all_down,\n" +
			"catch_up) or unknown (the store gave no decision); --all or --outcome shows them.",
		Args: cobra.NoArgs,
		RunE: cf.runE(env, func(c *cobra.Command, _ []string, cfg *config.Config) error {
			if limit <= 0 {
				return usageError(fmt.Errorf("--limit %d: want a positive count", limit))
			}
			if outc != "" {
				if filter.All {
					return usageError(errors.New("--all and --outcome: give one of them (--all shows every outcome)"))
				}
				outcomes, err := status.ParseOutcomes(outc)
				if err != nil {
					return usageError(fmt.Errorf("--outcome: %w", err))
				}
				filter.Outcomes = outcomes
			}
			q := claim.ListQuery{Job: job, Limit: limit, Statuses: filter.Query()}
			if watchF {
				if asJSON {
					return usageError(errWatchJSON)
				}
				return watchStatus(c.Context(), env, cfg, q, filter)
			}
			p := storePrint[[]claim.Run]{
				open: openToRead,
				read: func(ctx context.Context, b claim.Backend) ([]claim.Run, error) {
					runs, err := readStatus(ctx, b, cfg, q, filter)
					if err != nil {
						return nil, runtimeError(err)
					}
					return annotate(ctx, env, b, runs), nil
				},
				json: status.WriteJSON, table: status.WriteTable,
			}
			return p.run(c.Context(), env, cfg, asJSON)
		}),
	}
	cf.register(c, env)
	c.Flags().StringVar(&job, "job", "", "only this job")
	c.Flags().IntVar(&limit, "limit", 20, "at most this many runs, newest slot first")
	c.Flags().BoolVar(&asJSON, "json", false, "one JSON object per run")
	c.Flags().BoolVar(&filter.All, "all", false, "every outcome, the slots no attempt ran too")
	c.Flags().StringVar(&outc, "outcome", "", "only these outcomes, comma-separated (e.g. skipped,missed)")
	c.Flags().BoolVar(&watchF, "watch", false, "redraw the table every second until Ctrl-C")
	return c
}

// watchStatus is status --watch: the table redrawn every second.
func watchStatus(ctx context.Context, env Env, cfg *config.Config, q claim.ListQuery, filter status.Filter) error {
	b, closeFn, err := openForWatch(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeFn()
	return watch(ctx, env, "status", func(ctx context.Context, w *bytes.Buffer) error {
		runs, err := readStatus(ctx, b, cfg, q, filter)
		if err != nil {
			return err
		}
		return status.WriteTable(w, annotate(ctx, env, b, runs))
	})
}

// readStatus reads the runs q selects (a perInstance job's under every
// instance's key) and marks the abandoned ones.
func readStatus(ctx context.Context, b claim.Backend, cfg *config.Config, q claim.ListQuery, filter status.Filter) ([]claim.Run, error) {
	runs, err := listRuns(ctx, b, cfg, q)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return filter.Keep(liveness(ctx, b, cfg, runs).Mark(runs)), nil
}

// liveness is what status needs to show the runs left running with no
// live runner as abandoned (status.LivenessOf).
func liveness(ctx context.Context, b claim.Backend, cfg *config.Config, runs []claim.Run) status.Liveness {
	return status.LivenessOf(ctx, b, cfg.Jobs, clock.Real{}.Now(), runs)
}
