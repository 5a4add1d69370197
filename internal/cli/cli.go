// Package cli is anarchond's command line (docs/spec.md#s6-cli): run,
// validate, next, status, jobs, pause, resume, cluster, version, and the hidden
// supervise used by the runner. Main runs it in-process, so tests drive the real commands without
// building a binary.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/supervise"

	// The stores anarchond is built with: each registers itself
	// (store.Register), and one line here adds one.
	_ "github.com/anarchon/anarchon/internal/natsclaim"
	_ "github.com/anarchon/anarchon/internal/pgclaim"
	_ "github.com/anarchon/anarchon/internal/rabbitclaim"
	_ "github.com/anarchon/anarchon/internal/redisclaim"
	_ "github.com/anarchon/anarchon/internal/sqliteclaim"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1 // a runtime failure: store unreachable, I/O error
	ExitUsage   = 2 // an invalid config or bad flags
)

// Version and Commit are set at build time with -ldflags -X.
var (
	Version = "dev"
	Commit  = ""
)

// exitError carries the exit code a failure maps to.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(err error) error   { return &exitError{ExitUsage, err} }
func runtimeError(err error) error { return &exitError{ExitFailure, err} }

// Env is what the commands read from and write to.
type Env struct {
	Stdout, Stderr io.Writer
	// Environ is the environment for ANARCHON_* overrides and for jobs.
	Environ []string
	// Ticks, when set, paces status --watch and jobs --watch instead of
	// a ticker of WatchEvery (tests).
	Ticks <-chan time.Time
}

// Main runs anarchond with args (without the program name) and returns the
// process exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if len(args) > 0 && args[0] == "supervise" {
		// The supervising parent of a job, when anarchon-supervise is not
		// installed beside this binary: no cobra, no config, no logger.
		return supervise.Main(args[1:])
	}
	root := newRoot(env)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if !errors.Is(ee.err, errPrinted) {
			fmt.Fprintf(env.Stderr, "anarchond: %v\n", ee.err)
		}
		return ee.code
	}
	// Anything cobra itself refused (unknown command or flag) is usage.
	fmt.Fprintf(env.Stderr, "anarchond: %v\n", err)
	return ExitUsage
}

// errPrinted marks a failure whose message was already written.
var errPrinted = errors.New("already printed")

func newRoot(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:           "anarchond",
		Short:         "A leaderless cluster-wide cron",
		Long:          "anarchond runs on every host with the same crontab; each scheduled run is claimed in a shared store and executed by exactly one host.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(fmt.Errorf("%w (see %s --help)", err, c.CommandPath()))
	})
	root.AddCommand(newRunCmd(env), newValidateCmd(env), newNextCmd(env), newStatusCmd(env), newVersionCmd(env),
		newPauseCmd(env), newResumeCmd(env), newJobsCmd(env), newTriggerCmd(env), newClusterCmd(env))
	return root
}

// configFlags are the flags every config-reading command takes.
type configFlags struct {
	path          string
	allowWritable bool
	// host is what becomes of the problems found on this host (a job's
	// unknown user, missing workdir or program): validate's errors, run's
	// warnings; the other commands do not look.
	host config.HostMode
}

func (f *configFlags) register(c *cobra.Command, env Env) {
	def := "/etc/anarchon/anarchon.yaml"
	for _, kv := range env.Environ {
		if v, ok := strings.CutPrefix(kv, "ANARCHON_CONFIG="); ok && v != "" {
			def = v
		}
	}
	c.Flags().StringVarP(&f.path, "config", "c", def, "crontab file (env ANARCHON_CONFIG)")
	c.Flags().BoolVar(&f.allowWritable, "insecure-allow-writable-config", false,
		"accept a crontab others than root and the daemon's user can change: writable by group or others, or owned by another user, or in such a directory (development only)")
}

// runE is a RunE that loads the config (load) and hands it to run.
func (f *configFlags) runE(env Env, run func(c *cobra.Command, args []string, cfg *config.Config) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		cfg, err := f.load(env)
		if err != nil {
			return err
		}
		return run(c, args, cfg)
	}
}

// load reads the config and prints its warnings; an invalid one prints every
// problem and maps to exit code 2.
func (f *configFlags) load(env Env) (*config.Config, error) {
	cfg, err := f.read(env)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(env.Stderr, "warning: %s\n", w)
	}
	return cfg, nil
}

// read is load without printing the warnings.
func (f *configFlags) read(env Env) (*config.Config, error) {
	cfg, err := config.Load(f.path, config.LoadOptions{AllowInsecurePerms: f.allowWritable, Environ: env.Environ,
		Checks: config.Checks{Host: f.host}})
	var errs config.Errors
	switch {
	case errors.As(err, &errs):
		for _, e := range errs {
			fmt.Fprintln(env.Stderr, e.Error())
		}
		fmt.Fprintf(env.Stderr, "anarchond: %s: %d problem(s); nothing started\n", f.path, len(errs))
		return nil, &exitError{ExitUsage, errPrinted}
	case err != nil:
		return nil, usageError(err)
	}
	return cfg, nil
}

func newVersionCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			commit := Commit
			if commit == "" {
				if bi, ok := debug.ReadBuildInfo(); ok {
					for _, s := range bi.Settings {
						if s.Key == "vcs.revision" {
							commit = s.Value
						}
					}
				}
			}
			if commit == "" {
				commit = "unknown"
			}
			fmt.Fprintf(env.Stdout, "anarchond %s\ncommit %s\n%s %s/%s\n", Version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// Run is the production entry point used by cmd/anarchond.
func Run() int {
	return Main(context.Background(), os.Args[1:], Env{Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ()})
}
