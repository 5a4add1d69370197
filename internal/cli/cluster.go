package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/cluster"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/status"
)

func newClusterCmd(env Env) *cobra.Command {
	var (
		cf     configFlags
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "cluster",
		Short: "List the instances: live ones and those gone within the retention, crontab and version drift",
		Long: "List the instances from their heartbeat records in the store (docs/operating.md, \"The\n" +
			"cluster view\"): each instance's host, version, whether it is alive (it beat within the\n" +
			"last 15 s) or gone (stopped beating, kept for backend.retention), its last beat, its\n" +
			"clock's skew against the store, the hash of its jobs' definitions and the jobs it defines\n" +
			"differently from another live instance. Then one line per job the live instances define\n" +
			"differently (which fields, which instances) and per instance running an older version.\n" +
			"--json: one object per instance with instance, host, pid, version, tags, started_at,\n" +
			"last_seen, alive, skew_ms, jobs_hash, jobs, outdated, drift.",
		Args: cobra.NoArgs,
		RunE: cf.runE(env, func(c *cobra.Command, _ []string, cfg *config.Config) error {
			p := storePrint[cluster.View]{
				open: openStore,
				read: func(ctx context.Context, b claim.Backend) (cluster.View, error) {
					return readCluster(ctx, cfg, b)
				},
				json: status.WriteClusterJSON, table: status.WriteClusterTable,
			}
			return p.run(c.Context(), env, cfg, asJSON)
		}),
	}
	cf.register(c, env)
	c.Flags().BoolVar(&asJSON, "json", false, "one JSON object per instance")
	return c
}

// readCluster reads the instance records and analyses them at the store's
// time (this host's where the store has no clock).
func readCluster(ctx context.Context, cfg *config.Config, b claim.Backend) (cluster.View, error) {
	reg, err := claim.RegistryOf(b, cfg.Backend.Type)
	if err != nil {
		return cluster.View{}, runtimeError(err)
	}
	recs, now, err := reg.Instances(ctx)
	if err != nil {
		return cluster.View{}, runtimeError(fmt.Errorf("store %s: %w", cfg.Backend.Describe(), err))
	}
	if now.IsZero() {
		now = clock.Real{}.Now()
	}
	return cluster.Analyze(recs, now), nil
}
