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
	n := &nextCmd{env: env}
	c := &cobra.Command{
		Use:   "next",
		Short: "Print the next slots of each job, in its zone and in UTC, and when each run starts (jitterMs)",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return n.run() },
	}
	n.cf.register(c, env)
	c.Flags().StringVar(&n.job, "job", "", "only this job")
	c.Flags().IntVarP(&n.count, "count", "n", 5, fmt.Sprintf("slots per job (at most %d)", MaxNextCount))
	c.Flags().StringVar(&n.from, "from", "", "start after this time (RFC 3339; default now)")
	c.Flags().BoolVar(&n.asJSON, "json", false, "one JSON object per slot: job, slot, slot_ms, local, start, start_ms")
	return c
}

// nextCmd is one anarchond next: its flags, and the steps that compute and
// print the slots.
type nextCmd struct {
	env    Env
	cf     configFlags
	job    string
	count  int
	from   string
	asJSON bool
}

// run checks the flags, loads the crontab and prints the next slots of the
// jobs selected, as JSON lines or as a table.
func (n *nextCmd) run() error {
	switch {
	case n.count <= 0:
		return usageError(fmt.Errorf("-n %d: want a positive count", n.count))
	case n.count > MaxNextCount:
		return usageError(fmt.Errorf("-n %d: at most %d slots per job (--count)", n.count, MaxNextCount))
	}
	cfg, err := n.cf.load(n.env)
	if err != nil {
		return err
	}
	t0, err := n.start()
	if err != nil {
		return err
	}
	jobs, err := selectJobs(cfg, n.job)
	if err != nil {
		return err
	}
	out, err := status.NextSlots(jobs, t0, n.count)
	if err != nil {
		return usageError(err)
	}
	if n.asJSON {
		return n.writeJSON(out)
	}
	return n.writeTable(jobs, out)
}

// start is the time the slots follow: --from, or now.
func (n *nextCmd) start() (time.Time, error) {
	if n.from == "" {
		return clock.Real{}.Now(), nil
	}
	t0, err := time.Parse(time.RFC3339Nano, n.from)
	if err != nil {
		return time.Time{}, usageError(fmt.Errorf("--from %q: want RFC 3339, e.g. 2027-03-28T00:00:00Z", n.from))
	}
	return t0, nil
}

// writeJSON prints one JSON object per slot.
func (n *nextCmd) writeJSON(out []status.NextSlot) error {
	enc := json.NewEncoder(n.env.Stdout)
	for _, s := range out {
		if err := enc.Encode(s); err != nil {
			return runtimeError(err)
		}
	}
	return nil
}

// writeTable prints the slots as a table, with a START column when one of
// the jobs has a jitter.
func (n *nextCmd) writeTable(jobs []config.Job, out []status.NextSlot) error {
	tw := tabwriter.NewWriter(n.env.Stdout, 0, 4, 2, ' ', 0)
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
	s := &statusCmd{env: env}
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
		RunE: s.cf.runE(env, func(c *cobra.Command, _ []string, cfg *config.Config) error {
			return s.run(c.Context(), cfg)
		}),
	}
	s.cf.register(c, env)
	c.Flags().StringVar(&s.job, "job", "", "only this job")
	c.Flags().IntVar(&s.limit, "limit", 20, "at most this many runs, newest slot first")
	c.Flags().BoolVar(&s.asJSON, "json", false, "one JSON object per run")
	c.Flags().BoolVar(&s.filter.All, "all", false, "every outcome, the slots no attempt ran too")
	c.Flags().StringVar(&s.outcome, "outcome", "", "only these outcomes, comma-separated (e.g. skipped,missed)")
	c.Flags().BoolVar(&s.watch, "watch", false, "redraw the table every second until Ctrl-C")
	return c
}

// statusCmd is one anarchond status: its flags, and the steps that read
// the runs and print them.
type statusCmd struct {
	env     Env
	cf      configFlags
	job     string
	limit   int
	asJSON  bool
	filter  status.Filter
	outcome string // --outcome as given; query parses it into filter
	watch   bool
}

// run prints the runs the flags select once, or redraws them every second
// with --watch.
func (s *statusCmd) run(ctx context.Context, cfg *config.Config) error {
	q, err := s.query()
	if err != nil {
		return err
	}
	if s.watch {
		if s.asJSON {
			return usageError(errWatchJSON)
		}
		return watchStatus(ctx, s.env, cfg, q, s.filter)
	}
	p := storePrint[[]claim.Run]{
		open: openToRead,
		read: func(ctx context.Context, b claim.Backend) ([]claim.Run, error) {
			runs, err := readStatus(ctx, b, cfg, q, s.filter)
			if err != nil {
				return nil, runtimeError(err)
			}
			return annotate(ctx, s.env, b, runs), nil
		},
		json: status.WriteJSON, table: status.WriteTable,
	}
	return p.run(ctx, s.env, cfg, s.asJSON)
}

// query checks --limit, --all and --outcome, sets the filter's outcomes and
// returns what to ask the store for.
func (s *statusCmd) query() (claim.ListQuery, error) {
	if s.limit <= 0 {
		return claim.ListQuery{}, usageError(fmt.Errorf("--limit %d: want a positive count", s.limit))
	}
	if s.outcome != "" {
		if s.filter.All {
			return claim.ListQuery{}, usageError(errors.New("--all and --outcome: give one of them (--all shows every outcome)"))
		}
		outcomes, err := status.ParseOutcomes(s.outcome)
		if err != nil {
			return claim.ListQuery{}, usageError(fmt.Errorf("--outcome: %w", err))
		}
		s.filter.Outcomes = outcomes
	}
	return claim.ListQuery{Job: s.job, Limit: s.limit, Statuses: s.filter.Query()}, nil
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
