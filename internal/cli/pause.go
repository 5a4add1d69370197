package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/sanitize"
)

func newPauseCmd(env Env) *cobra.Command {
	var (
		cf     configFlags
		until  string
		reason string
	)
	c := &cobra.Command{
		Use:   "pause JOB",
		Short: "Pause a job on every instance: its slots are skipped until it is resumed",
		Long: "Pause a job on every instance: its control record in the store says so, and every\n" +
			"instance reads it within a second. Its slots are not claimed while it is paused; each is\n" +
			"recorded skipped (paused), which status --all shows. A run already started finishes.\n" +
			"--until ends the pause by itself at that instant (a slot at or after it runs). The\n" +
			"pause lives in the store: a reload or a restart keeps it. anarchond resume ends it.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			now := clock.Real{}.Now()
			p := claim.Control{Job: args[0], Paused: true, Reason: reason, By: caller(env), At: now.UnixMilli()}
			if until != "" {
				t, err := time.Parse(time.RFC3339Nano, until)
				switch {
				case err != nil:
					return usageError(fmt.Errorf("--until %q: want RFC 3339, e.g. 2027-03-28T06:00:00Z", until))
				case !t.After(now):
					return usageError(fmt.Errorf("--until %s is not in the future (now %s)", until, now.UTC().Format(time.RFC3339)))
				}
				p.Until = t.UnixMilli()
			}
			if len(reason) > claim.MaxControlText {
				return usageError(fmt.Errorf("--reason of %d bytes: at most %d", len(reason), claim.MaxControlText))
			}
			return writeControl(c.Context(), env, &cf, args[0], func(cur claim.Control) (claim.Control, bool) {
				p.Triggers = cur.Triggers // a pause keeps the runs asked for
				return p, true
			})
		},
	}
	cf.register(c, env)
	c.Flags().StringVar(&until, "until", "", "end the pause by itself at this time (RFC 3339)")
	c.Flags().StringVar(&reason, "reason", "", "why, for the others (shown by jobs and in the daemons' logs)")
	return c
}

func newResumeCmd(env Env) *cobra.Command {
	var cf configFlags
	c := &cobra.Command{
		Use:   "resume JOB",
		Short: "Resume a paused job on every instance",
		Long: "Resume a paused job on every instance: its control record in the store says so, and\n" +
			"every instance reads it within a second; its next slot runs. A job that is not paused\n" +
			"is left as it is.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			r := claim.Control{Job: args[0], By: caller(env), At: clock.Real{}.Now().UnixMilli()}
			return writeControl(c.Context(), env, &cf, args[0], func(cur claim.Control) (claim.Control, bool) {
				r.Triggers = cur.Triggers
				return r, cur.Paused
			})
		},
	}
	cf.register(c, env)
	return c
}

// writeControl loads the crontab, checks that it has job, opens the store
// and applies change to the job's control record: read, change, compare
// and set. change returns the record to write, or false to write nothing.
func writeControl(ctx context.Context, env Env, cf *configFlags, job string, change func(cur claim.Control) (claim.Control, bool)) error {
	cfg, err := cf.load(env)
	if err != nil {
		return err
	}
	if err := knownJob(cfg, job); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	b, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	ctl, err := claim.ControllerOf(b, cfg.Backend.Type)
	if err != nil {
		return runtimeError(err)
	}
	w := controlWriter{ctl: ctl, env: env, cfg: cfg}
	return w.apply(ctx, job, change)
}

// knownJob refuses a job the crontab does not have, listing those it has.
func knownJob(cfg *config.Config, job string) error {
	names := make([]string, len(cfg.Jobs))
	for i, j := range cfg.Jobs {
		names[i] = j.Name
	}
	if slices.Contains(names, job) {
		return nil
	}
	return usageError(fmt.Errorf("no job %q in %s; its jobs: %s", sanitize.Line(job), cfg.File, strings.Join(names, ", ")))
}

// controlWriter applies one change to a job's control record.
type controlWriter struct {
	ctl claim.Controller
	env Env
	cfg *config.Config
}

// apply reads the job's record, changes it and writes it at the version
// read. When another writer changed it meanwhile (claim.ErrConflict) it
// reads and writes once more, saying over what; a second conflict is
// reported with nothing written.
func (w controlWriter) apply(ctx context.Context, job string, change func(cur claim.Control) (claim.Control, bool)) error {
	got, wrote, err := claim.UpdateControl(ctx, w.ctl, job, 2, func(cur claim.Control, try int) (claim.Control, bool) {
		if try > 0 {
			fmt.Fprintf(w.env.Stderr, "anarchond: note: %s changed meanwhile (now: %s); applying this change over it\n",
				sanitize.Line(job), describeControl(cur, clock.Real{}.Now()))
		}
		return change(cur)
	})
	switch {
	case errors.Is(err, claim.ErrConflict):
		return runtimeError(fmt.Errorf("%s was changed by another writer while this one wrote, twice; nothing written: see anarchond jobs, and try again", sanitize.Line(job)))
	case err != nil:
		return w.storeError(err)
	case !wrote:
		fmt.Fprintf(w.env.Stdout, "job %s is not paused: nothing to resume\n", sanitize.Line(job))
		return nil
	}
	fmt.Fprintf(w.env.Stdout, "job %s %s\n", sanitize.Line(job), describeControl(got, clock.Real{}.Now()))
	return nil
}

// storeError is a failed read or write of the store: nothing written.
func (w controlWriter) storeError(err error) error {
	return runtimeError(fmt.Errorf("store %s: %w; nothing written", w.cfg.Backend.Describe(), err))
}

// describeControl says what a record means at now, sanitised.
func describeControl(c claim.Control, now time.Time) string {
	var s string
	switch {
	case c.Version == 0, !c.Paused && c.At == 0:
		return "not paused"
	case c.PausedAt(now) && c.Until == 0:
		s = "paused until resumed"
	case c.PausedAt(now):
		s = "paused until " + c.UntilTime().Format(time.RFC3339Nano)
	case c.Paused:
		s = "not paused (its pause ended " + c.UntilTime().Format(time.RFC3339Nano) + ")"
	default:
		s = "resumed"
	}
	if c.By != "" {
		s += ", by " + sanitize.Line(c.By)
	}
	if c.At != 0 {
		s += " at " + time.UnixMilli(c.At).UTC().Format(time.RFC3339)
	}
	if c.Paused && c.Reason != "" {
		s += ": " + sanitize.Line(c.Reason)
	}
	return s
}

// caller is user@host of whoever runs the command: the record's By.
func caller(env Env) string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	for _, k := range []string{"USER", "LOGNAME"} {
		if name != "" {
			break
		}
		for _, kv := range env.Environ {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				name = v
			}
		}
	}
	if name == "" {
		name = fmt.Sprintf("uid%d", os.Getuid())
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return name + "@" + host
}
