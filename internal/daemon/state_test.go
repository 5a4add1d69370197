package daemon

import (
	"testing"

	"github.com/anarchon/anarchon/internal/config"
)

func TestStateDirPrefersTheCrontabThenSystemdThenTheCrontabsDirectory(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		env       []string
		want      string
	}{
		{"stateDir", "/srv/anarchon", []string{"STATE_DIRECTORY=/var/lib/anarchon"}, "/srv/anarchon"},
		{"systemd's StateDirectory=", "", []string{"STATE_DIRECTORY=/var/lib/anarchon:/var/lib/other"}, "/var/lib/anarchon"},
		{"beside the crontab", "", []string{"STATE_DIRECTORY="}, "/etc/anarchon/.anarchon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{File: "/etc/anarchon/anarchon.yaml", StateDir: tc.key}
			if got := stateDir(cfg, tc.env); got != tc.want {
				t.Errorf("stateDir = %q, want %q", got, tc.want)
			}
		})
	}
}
