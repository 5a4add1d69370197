package config

import (
	"strings"
	"testing"
	"time"
)

func TestDashboardSection(t *testing.T) {
	cfg := mustParse(t, "dashboard:\n  enabled: true\n  tokenFile: dash.token\n  refreshMs: 2000\njobs: []\n")
	want := Dashboard{Enabled: true, TokenFile: "dash.token", Refresh: 2 * time.Second}
	if cfg.Dashboard != want {
		t.Errorf("dashboard %+v, want %+v", cfg.Dashboard, want)
	}
	cfg = mustParse(t, "jobs: []\n", "ANARCHON_DASHBOARD_ENABLED=true")
	if !cfg.Dashboard.Enabled || cfg.Dashboard.Refresh != DefaultDashboardRefresh {
		t.Errorf("dashboard from the environment %+v", cfg.Dashboard)
	}
}

func TestDashboardRefused(t *testing.T) {
	for yml, want := range map[string]string{
		"metrics: {listen: \"\"}\ndashboard:\n  enabled: true\njobs: []\n": "served on metrics.listen, which is empty",
		"dashboard:\n  refreshMs: 10\njobs: []\n":                          "must be between 100 and 3600000",
		"dashboard:\n  enabled: yes please\njobs: []\n":                    "dashboard.enabled",
	} {
		errs := parseErrs(t, yml, nil)
		if !strings.Contains(errs.Error(), want) {
			t.Errorf("%q: %v, want %q", yml, errs, want)
		}
	}
}
