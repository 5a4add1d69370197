//go:build unix

package sqliteclaim_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// TestNewFilesArePrivate: the database file New creates, and the -wal and
// -shm files SQLite creates beside it, are mode 0600 whatever the umask.
func TestNewFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0) // the most permissive: nothing masks the mode
	t.Cleanup(func() { syscall.Umask(old) })
	path := filepath.Join(t.TempDir(), "anarchon.db")
	b := open(t, path)
	if _, err := b.Claim(t.Context(), claim.Request{Job: "j", Slot: 60000, Token: claim.NewToken(),
		Instance: "a", MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", p, got)
		}
	}
}

// TestExistingFileKeepsMode: New leaves the mode of an existing database
// alone (the operator's choice).
func TestExistingFileKeepsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "anarchon.db")
	if err := os.WriteFile(path, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	open(t, path)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode: %v %v, want 0640", fi.Mode(), err)
	}
}
