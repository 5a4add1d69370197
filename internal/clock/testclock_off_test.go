//go:build !anarchon_testclock

package clock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A release build ignores the test clock's variable.
func TestFromEnvIgnoresTheFileInReleaseBuilds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skew")
	if err := os.WriteFile(path, []byte("-90000"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ANARCHON_TESTCLOCK_FILE", path)
	f := NewFake(time.Unix(1000, 0))
	if got := FromEnv(f).Now(); !got.Equal(time.Unix(1000, 0)) {
		t.Fatalf("Now() = %v, want the base clock's 1000s", got)
	}
}
