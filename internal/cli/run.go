package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/daemon"
	"github.com/anarchon/anarchon/internal/logging"
)

func newRunCmd(env Env) *cobra.Command {
	var cf configFlags
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: claim and run the crontab's slots until SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := cf.load(env)
			if err != nil {
				return err
			}
			log, err := logging.New(env.Stderr, cfg.Log.Level, cfg.Log.Format)
			if err != nil {
				return usageError(err)
			}
			defer log.Sync() //nolint:errcheck // stderr may not sync
			exe, err := os.Executable()
			if err != nil {
				return runtimeError(fmt.Errorf("find own executable for the job supervisor: %w", err))
			}
			err = daemon.Run(c.Context(), cfg, daemon.Options{
				Log: log, Clock: clock.FromEnv(clock.Real{}), Environ: env.Environ,
				Supervisor: []string{exe, "supervise", "--"},
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
