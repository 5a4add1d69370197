package daemon

import (
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
)

// stateDirName is the state directory beside the crontab when neither the
// crontab's stateDir nor systemd's StateDirectory= names one.
const stateDirName = ".anarchon"

// stateDir is where the daemon keeps its state: the crontab's stateDir;
// else $STATE_DIRECTORY, which systemd sets from the unit's
// StateDirectory= (the first path, when it lists several); else
// .anarchon in the crontab's directory, which needs no setting for a
// daemon run by hand or in a test.
func stateDir(cfg *config.Config, environ []string) string {
	if cfg.StateDir != "" {
		return cfg.StateDir
	}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "STATE_DIRECTORY="); ok && v != "" {
			first, _, _ := strings.Cut(v, ":")
			return first
		}
	}
	return filepath.Join(filepath.Dir(cfg.File), stateDirName)
}

// reapOrphans opens the attempts' records in the state directory and kills
// what is left of the jobs of daemons that died with their job guard
// (runner.Records). It runs before the daemon claims anything: an attempt
// that takes over a run must never run beside the processes of the one
// before it.
func reapOrphans(cfg *config.Config, environ []string, log *zap.Logger) (*runner.Records, error) {
	rs, err := runner.OpenRecords(stateDir(cfg, environ), log)
	if err != nil {
		return nil, err
	}
	n, err := rs.Reap()
	if err != nil {
		rs.Close()
		return nil, err
	}
	log.Debug("read the attempts' records", zap.String("dir", rs.Dir()), zap.Int("reaped", n))
	return rs, nil
}
