package cli

import (
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/testserver"
)

// TestStoreRefusalFailsAtOnce: a store that refuses anarchond for good (here
// PostgreSQL: the DSN's database does not exist) fails validate and the
// daemon's start at once, exit 1, with the cause and the fix; the start
// does not wait for the store as it does for one that does not answer.
func TestStoreRefusalFailsAtOnce(t *testing.T) {
	addr := testserver.For("postgres").Require(t, "")
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "metrics: {listen: \"\"}\nbackend:\n  type: postgres\n  postgres:\n"+
		"    dsn: postgres://postgres@"+addr+"/anarchon_no_such_db?sslmode=disable\n"+
		"jobs:\n  - name: a\n    schedule: \"@hourly\"\n    command: \"true\"\n", 0o644)
	for _, args := range [][]string{{"validate"}, {"run"}} {
		t.Run(args[0], func(t *testing.T) {
			code, _, stderr := run(t, dir, append(args, "--config", "c.yaml")...)
			if code != ExitFailure {
				t.Errorf("exit %d, want %d", code, ExitFailure)
			}
			for _, want := range []string{"postgres refused: the database of backend.postgres.dsn does not exist", "fix: create it"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}
