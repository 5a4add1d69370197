package daemon

import (
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/dashboard"
)

// newDashboard is the dashboard of cfg, nil when it is not enabled. A token
// file that is missing or readable by others stops the start, naming it.
func newDashboard(cfg *config.Config, o Options) (*dashboard.Dashboard, error) {
	if !cfg.Dashboard.Enabled {
		return nil, nil
	}
	return dashboard.New(cfg, dashboard.Options{Log: o.Log, Clock: o.Clock})
}
