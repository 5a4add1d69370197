package main

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The supervisor starts once per job: what it imports is initialised on
// every job start. Nothing but the standard library and its own package may
// creep into it (an import of the runner, config or logging would pull the
// daemon's dependencies back in).
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	want := []string{
		"github.com/anarchon/anarchon/cmd/anarchon-supervise",
		"github.com/anarchon/anarchon/internal/supervise",
	}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos)
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("GOOS=%s go list -deps: %v\n%s", goos, err, stderr)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("GOOS=%s: anarchon-supervise imports, besides the standard library:\n%s\nwant only:\n%s",
				goos, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
