package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/daemon"
	"github.com/anarchon/anarchon/internal/logging"
)

func newRunCmd(env Env) *cobra.Command {
	// A job that cannot run on this host (unknown user, missing program)
	// is a warning at the start: its runs fail and are recorded, and the
	// other jobs run.
	cf := configFlags{host: config.HostWarnings}
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: claim and run the crontab's slots until SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := cf.read(env)
			if err != nil {
				return err
			}
			log, err := logging.New(env.Stderr, cfg.Log.Level, cfg.Log.Format)
			if err != nil {
				return usageError(err)
			}
			defer log.Sync() //nolint:errcheck // stderr may not sync
			for _, w := range cfg.Warnings {
				log.Warn("crontab warning", zap.String("file", cf.path), zap.String("warning", w))
			}
			exe, err := os.Executable()
			if err != nil {
				return runtimeError(fmt.Errorf("find own executable for the job supervisor: %w", err))
			}
			// Which one is used is in the "anarchond started" line.
			supervisor := supervisorCommand(exe)
			err = daemon.Run(c.Context(), cfg, daemon.Options{
				Log: log, Clock: clock.FromEnv(clock.Real{}), Environ: env.Environ,
				Supervisor: supervisor, Version: Version,
				Reload: func() (*config.Config, error) {
					next, err := config.Load(cf.path, config.LoadOptions{AllowInsecurePerms: cf.allowWritable, Environ: env.Environ})
					if next != nil {
						next.Instance = cfg.Instance // the id stays for the process's life
					}
					return next, err
				},
			})
			if err != nil {
				return runtimeError(err)
			}
			return nil
		},
	}
	cf.register(c, env)
	return c
}

// supervisorName is the small supervisor's binary (cmd/anarchon-supervise),
// installed beside anarchond.
const supervisorName = "anarchon-supervise"

// supervisorCommand is the argv prefix of the jobs' supervising parent for
// the daemon binary exe: anarchon-supervise when an executable file of that
// name sits beside exe, else exe's own hidden supervise command. Both run the
// same code (internal/supervise), but the small binary imports only the
// standard library: it spares every job start anarchond's package
// initialisation (store clients, metrics, cobra), about two thirds of the
// start's CPU. exe's symlinks are resolved first: a link to anarchond
// elsewhere on the PATH still finds the supervisor installed beside the real
// binary.
func supervisorCommand(exe string) []string {
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	path := filepath.Join(filepath.Dir(exe), supervisorName)
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return []string{path, "--"}
	}
	return []string{exe, "supervise", "--"}
}
