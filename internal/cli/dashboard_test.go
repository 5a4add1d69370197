package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDashboardTokenRefused: a dashboard token file that is missing or
// readable by others stops the daemon's start, exit 1, naming the file and
// the fix; nothing is scheduled.
func TestDashboardTokenRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "open.token", "s3cret\n", 0o644)
	for file, want := range map[string]string{
		"missing.token": "no such file or directory",
		"open.token":    "chmod 600 " + filepath.Join(dir, "open.token"),
	} {
		t.Run(file, func(t *testing.T) {
			writeFile(t, dir, "c.yaml", "metrics: {listen: \"127.0.0.1:0\"}\ndashboard:\n  enabled: true\n  tokenFile: "+
				filepath.Join(dir, file)+"\nbackend:\n  sqlite: {path: s.db}\n"+goodJobs, 0o644)
			code, _, stderr := run(t, dir, "run", "--config", "c.yaml")
			if code != ExitFailure || !strings.Contains(stderr, "dashboard.tokenFile") ||
				!strings.Contains(stderr, filepath.Join(dir, file)) || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 naming dashboard.tokenFile, the file and %q", code, stderr, want)
			}
		})
	}
}
