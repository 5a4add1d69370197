package cli

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSupervisorCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup prepares dir, which holds the daemon binary anarchond, and
		// returns the path the daemon was started as.
		setup func(t *testing.T, dir string) string
		// small: anarchon-supervise is expected, else the fallback.
		small bool
	}{
		{"beside, executable", func(t *testing.T, dir string) string {
			writeExe(t, filepath.Join(dir, supervisorName), 0o755)
			return filepath.Join(dir, "anarchond")
		}, true},
		{"absent", func(t *testing.T, dir string) string {
			return filepath.Join(dir, "anarchond")
		}, false},
		{"not executable", func(t *testing.T, dir string) string {
			writeExe(t, filepath.Join(dir, supervisorName), 0o644)
			return filepath.Join(dir, "anarchond")
		}, false},
		{"a directory", func(t *testing.T, dir string) string {
			if err := os.Mkdir(filepath.Join(dir, supervisorName), 0o755); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "anarchond")
		}, false},
		{"started through a symlink from elsewhere", func(t *testing.T, dir string) string {
			writeExe(t, filepath.Join(dir, supervisorName), 0o755)
			link := filepath.Join(t.TempDir(), "anarchond")
			if err := os.Symlink(filepath.Join(dir, "anarchond"), link); err != nil {
				t.Fatal(err)
			}
			return link
		}, true},
		{"only the symlink's directory has it", func(t *testing.T, dir string) string {
			other := t.TempDir()
			writeExe(t, filepath.Join(other, supervisorName), 0o755)
			link := filepath.Join(other, "anarchond")
			if err := os.Symlink(filepath.Join(dir, "anarchond"), link); err != nil {
				t.Fatal(err)
			}
			return link
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Resolved, so that the expectations compare with what
			// supervisorCommand returns where the temporary directory is
			// itself behind a symlink.
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			exe := filepath.Join(dir, "anarchond")
			writeExe(t, exe, 0o755)
			want := []string{exe, "supervise", "--"}
			if tc.small {
				want = []string{filepath.Join(dir, supervisorName), "--"}
			}
			if got := supervisorCommand(tc.setup(t, dir)); !slices.Equal(got, want) {
				t.Errorf("supervisorCommand = %q, want %q", got, want)
			}
		})
	}
}

func writeExe(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
	// The umask may have dropped bits the case needs.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
