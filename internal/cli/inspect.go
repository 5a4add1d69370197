package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/schedule"
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
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := cf.load(env)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "%s: ok: %d job(s), backend %s, instance %s\n",
				cfg.File, len(cfg.Jobs), cfg.Backend.Describe(), cfg.Instance)
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
		},
	}
	cf.register(c, env)
	c.Flags().BoolVar(&offline, "offline", false, "check the file and this host; do not open the store")
	return c
}

// nextSlot is one line of `next --json`.
type nextSlot struct {
	Job    string `json:"job"`
	Slot   string `json:"slot"`
	SlotMs int64  `json:"slot_ms"`
	Local  string `json:"local"`
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
		Short: "Print the next slots of each job, in its zone and in UTC",
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
			var out []nextSlot
			for _, j := range jobs {
				sc, err := schedule.Parse(j.Schedule, j.Location)
				if err != nil {
					return usageError(fmt.Errorf("job %q: %w", j.Name, err))
				}
				t := t0
				for range n {
					if t = sc.Next(t); t.IsZero() {
						break
					}
					out = append(out, nextSlot{Job: j.Name, Slot: t.UTC().Format(time.RFC3339Nano),
						SlotMs: t.UnixMilli(), Local: t.In(j.Location).Format(time.RFC3339Nano)})
				}
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
			fmt.Fprintln(tw, "JOB\tLOCAL\tUTC")
			for _, s := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Job, s.Local, s.Slot)
			}
			return tw.Flush()
		},
	}
	cf.register(c, env)
	c.Flags().StringVar(&job, "job", "", "only this job")
	c.Flags().IntVarP(&n, "count", "n", 5, fmt.Sprintf("slots per job (at most %d)", MaxNextCount))
	c.Flags().StringVar(&from, "from", "", "start after this time (RFC 3339; default now)")
	c.Flags().BoolVar(&asJSON, "json", false, "one JSON object per slot: job, slot, slot_ms, local")
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
	)
	c := &cobra.Command{
		Use:   "status",
		Short: "Show recent runs read from the store: what ran where",
		Long: "Show recent runs read from the store: what ran where.\n" +
			"A run's status is running, succeeded, failed, timeout, interrupted, or abandoned: the store\n" +
			"holds it running but no live runner does (on a lease store its lease ended by the store's\n" +
			"clock; on a claim-only store it has run longer than the job's timeout + killGraceMs +\n" +
			"max(30s, leaseMs)). No store writes abandoned; status computes it when it reads the runs.\n" +
			"A slot that no attempt ran is skipped (overlap: the job's previous run held it; paused:\n" +
			"anarchond pause held the job; drift: the instances define the job differently and it has\n" +
			"onDrift: pause), missed (late, store_unreachable, store_refused, all_down,\n" +
			"catch_up) or unknown (the store gave no decision); --all or --outcome shows them.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := cf.load(env)
			if err != nil {
				return err
			}
			if limit <= 0 {
				return usageError(fmt.Errorf("--limit %d: want a positive count", limit))
			}
			if outc != "" {
				if filter.All {
					return usageError(errors.New("--all and --outcome: give one of them (--all shows every outcome)"))
				}
				if filter.Outcomes, err = status.ParseOutcomes(outc); err != nil {
					return usageError(fmt.Errorf("--outcome: %w", err))
				}
			}
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			defer cancel()
			b, err := cfg.OpenStore(ctx, zap.NewNop(), nil)
			if err != nil {
				return runtimeError(err)
			}
			defer b.Close()
			runs, err := b.ListRuns(ctx, claim.ListQuery{Job: job, Limit: limit, Statuses: filter.Query()})
			if err != nil {
				return runtimeError(fmt.Errorf("list runs: %w", err))
			}
			runs = filter.Keep(liveness(ctx, b, cfg, runs).Mark(runs))
			if asJSON {
				err = status.WriteJSON(env.Stdout, runs)
			} else {
				err = status.WriteTable(env.Stdout, runs)
			}
			if err != nil {
				return runtimeError(err)
			}
			return nil
		},
	}
	cf.register(c, env)
	c.Flags().StringVar(&job, "job", "", "only this job")
	c.Flags().IntVar(&limit, "limit", 20, "at most this many runs, newest slot first")
	c.Flags().BoolVar(&asJSON, "json", false, "one JSON object per run")
	c.Flags().BoolVar(&filter.All, "all", false, "every outcome, the slots no attempt ran too")
	c.Flags().StringVar(&outc, "outcome", "", "only these outcomes, comma-separated (e.g. skipped,missed)")
	return c
}

// liveness is what status needs to show the runs left running with no
// live runner as abandoned: on a lease store the store's clock, read with
// the first running run (a store that does not answer leaves every run as
// it is); on a claim-only store this host's clock and the jobs' bounds.
func liveness(ctx context.Context, b claim.Backend, cfg *config.Config, runs []claim.Run) status.Liveness {
	l := status.Liveness{Now: clock.Real{}.Now(), Bounds: status.BoundsOf(cfg.Jobs)}
	leaser, ok := b.(claim.Leaser)
	if !ok {
		return l
	}
	for _, r := range runs {
		if r.Status != claim.StatusRunning {
			continue
		}
		if _, now, err := leaser.Read(ctx, r.Job, r.Slot); err == nil || errors.Is(err, claim.ErrNotFound) {
			l.StoreNow = now
		}
		break
	}
	return l
}
