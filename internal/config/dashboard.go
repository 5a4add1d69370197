package config

import (
	"time"

	"github.com/anarchon/anarchon/internal/store"
)

// DefaultDashboardRefresh is how often the dashboard reads the store at most
// (dashboard.refreshMs): every page and API answer in between is served from
// the last read.
const DefaultDashboardRefresh = 5 * time.Second

// Dashboard configures the web dashboard and its JSON API, served beside
// /metrics on metrics.listen (docs/spec.md#s6-dashboard).
type Dashboard struct {
	// Enabled serves / and /api/v1/ on metrics.listen; off by default.
	Enabled bool
	// TokenFile holds the bearer token of the actions (pause, resume);
	// empty: the actions are refused. It is read at start.
	TokenFile string
	// Refresh is the least time between two reads of the store.
	Refresh time.Duration
}

// resolveDashboard reads the dashboard section; an enabled dashboard needs
// the listener it is served on.
func (p *parser) resolveDashboard(cfg *Config) {
	enabled := get(p, p.vals, "dashboard.enabled", def(false), p.asBool, nil)
	cfg.Dashboard.Enabled = enabled.val
	cfg.Dashboard.TokenFile = p.anchor(get(p, p.vals, "dashboard.tokenFile", def(""), p.asString, nil).val)
	ms := get(p, p.vals, "dashboard.refreshMs", def(DefaultDashboardRefresh.Milliseconds()), p.asInt, store.IntRange(100, 3600000))
	cfg.Dashboard.Refresh = time.Duration(ms.val) * time.Millisecond
	if enabled.val && cfg.Metrics.Listen == "" {
		p.errorf(enabled.at, "dashboard.enabled: the dashboard is served on metrics.listen, which is empty; set metrics.listen (e.g. 127.0.0.1:9464) or turn the dashboard off")
	}
}
