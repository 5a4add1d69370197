package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/sanitize"
	"github.com/anarchon/anarchon/internal/scheduler"
	"github.com/anarchon/anarchon/internal/status"
)

// TriggerLead is how far after the request a manual run's slot is: every
// instance reads the trigger (within a second) before its slot, and claims
// it at the slot as it claims a scheduled one (docs/spec.md#s6-trigger).
const TriggerLead = scheduler.TriggerLead

// triggerPoll is how often trigger --wait reads the run.
const triggerPoll = 250 * time.Millisecond

// pickupWindow is how long after its slot trigger --wait waits for a
// record of the run: the daemons' window (a variable for the tests).
var pickupWindow = scheduler.TriggerWindow

func newTriggerCmd(env Env) *cobra.Command {
	var (
		cf     configFlags
		wait   bool
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "trigger JOB",
		Short: "Run a job now, once, on one of the live instances",
		Long: "Run a job now, once, outside its schedule: the run is asked for in the job's control record\n" +
			"in the store, every instance reads it within a second, and exactly one live instance claims\n" +
			"and runs it, about two seconds after the request. No daemon needs to run on this host. The\n" +
			"run shows in status as kind manual, with who asked. A paused job runs too; a running\n" +
			"scheduled run does not hold it back. --wait waits for its result and prints it (exit 0:\n" +
			"succeeded; 1: otherwise, or no instance picked it up within 30s).",
		Args: cobra.ExactArgs(1),
		RunE: cf.runE(env, func(c *cobra.Command, args []string, cfg *config.Config) error {
			if err := knownJob(cfg, args[0]); err != nil {
				return err
			}
			t := &triggerCmd{env: env, cfg: cfg, job: args[0], asJSON: asJSON}
			return t.run(c.Context(), wait)
		}),
	}
	cf.register(c, env)
	c.Flags().BoolVar(&wait, "wait", false, "wait for the run's result and print it; exit 1 unless it succeeded")
	c.Flags().BoolVar(&asJSON, "json", false, "print the run (with --wait) as status --json does")
	return c
}

// triggerCmd is one anarchond trigger.
type triggerCmd struct {
	env    Env
	cfg    *config.Config
	job    string
	asJSON bool
}

func (t *triggerCmd) run(ctx context.Context, wait bool) error {
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(storeTimeout, cancel) // bounds the open and the write, not the wait
	b, err := openStore(octx, t.cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	ctl, ok := b.(claim.Controller)
	if !ok {
		why := "the store keeps no control records"
		if n, ok := b.(claim.NoController); ok {
			why = n.WhyNoControl()
		}
		return runtimeError(fmt.Errorf("trigger is not supported on backend %s: %s", t.cfg.Backend.Type, why))
	}
	tr, err := t.write(octx, ctl)
	if err != nil {
		return err
	}
	stop.Stop()
	slot := time.UnixMilli(tr.Slot).UTC()
	if !t.asJSON || !wait {
		fmt.Fprintf(t.env.Stdout, "job %s: run asked for at slot %s (%d), by %s\n",
			sanitize.Line(t.job), slot.Format(time.RFC3339Nano), tr.Slot, sanitize.Line(tr.By))
	}
	if !wait {
		return nil
	}
	return t.await(ctx, b, tr)
}

// write adds a manual trigger to the job's control record (scheduler.AskRun).
func (t *triggerCmd) write(ctx context.Context, ctl claim.Controller) (claim.Trigger, error) {
	w := controlWriter{ctl: ctl, env: t.env, cfg: t.cfg}
	tr, err := scheduler.AskRun(ctx, ctl, jobNamed(t.cfg, t.job), caller(t.env), clock.Real{}.Now(), t.cfg.Backend.Retention)
	if err != nil {
		return claim.Trigger{}, w.storeError(err)
	}
	return tr, nil
}

// jobNamed returns cfg's job of that name (knownJob checked it).
func jobNamed(cfg *config.Config, name string) config.Job {
	for _, j := range cfg.Jobs {
		if j.Name == name {
			return j
		}
	}
	return config.Job{}
}

// await reads the job's runs until the trigger's has a final status, and
// prints it; none within the pickup window after its slot is a failure.
func (t *triggerCmd) await(ctx context.Context, b claim.Backend, tr claim.Trigger) error {
	deadline := time.UnixMilli(tr.Slot).Add(pickupWindow)
	for {
		rctx, cancel := context.WithTimeout(ctx, storeTimeout)
		runs, err := b.ListRuns(rctx, claim.ListQuery{Job: t.job, Limit: 200})
		cancel()
		if err != nil && ctx.Err() == nil {
			return runtimeError(fmt.Errorf("store %s: read the run: %w", t.cfg.Backend.Describe(), err))
		}
		for _, r := range runs {
			if r.Slot == tr.Slot && r.Status.Final() {
				return t.report(status.Annotate([]claim.Run{r}, []claim.Control{{Job: t.job, Triggers: []claim.Trigger{tr}}})[0])
			}
			if r.Slot == tr.Slot {
				deadline = time.Time{} // picked up: wait for its end
			}
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return runtimeError(fmt.Errorf("no instance picked up the trigger within %s (slot %s): is anarchond running with this crontab's store?",
				pickupWindow, time.UnixMilli(tr.Slot).UTC().Format(time.RFC3339Nano)))
		}
		if clock.Sleep(ctx, clock.Real{}, triggerPoll) != nil {
			return runtimeError(ctx.Err())
		}
	}
}

// report prints the run and returns its exit: nil when it succeeded.
func (t *triggerCmd) report(r claim.Run) error {
	var err error
	if t.asJSON {
		err = status.WriteJSON(t.env.Stdout, []claim.Run{r})
	} else {
		err = status.WriteTable(t.env.Stdout, []claim.Run{r})
	}
	if err != nil {
		return runtimeError(err)
	}
	if r.Status != claim.StatusSucceeded {
		return runtimeError(fmt.Errorf("the run of %s ended %s", sanitize.Line(t.job), r.Status))
	}
	return nil
}

// annotate marks the runs that triggers asked for (status.Annotate), from
// the control records when the store keeps them; a read that fails leaves
// the runs as they are, with a note.
func annotate(ctx context.Context, env Env, b claim.Backend, runs []claim.Run) []claim.Run {
	ctl, ok := b.(claim.Controller)
	if !ok || len(runs) == 0 {
		return runs
	}
	cs, err := ctl.Controls(ctx)
	if err != nil {
		fmt.Fprintf(env.Stderr, "anarchond: note: cannot read the control records (%v): manual runs and retries show as scheduled\n", err)
		return runs
	}
	return status.Annotate(runs, cs)
}
