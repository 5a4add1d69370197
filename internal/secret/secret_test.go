//go:build unix

package secret_test

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/secret"
)

const what = "backend.postgres.passwordFile"

// write makes a password file holding content with exactly mode.
func write(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadFileStripsTrailingLineBreaks(t *testing.T) {
	for content, want := range map[string]string{
		"s3cret":         "s3cret",
		"s3cret\n":       "s3cret",
		"s3cret\r\n":     "s3cret",
		"s3cret\n\n\r\n": "s3cret",
		"two\nlines\n":   "two\nlines",
		" spaced \n":     " spaced ", //nolint:gocritic // the spaces are what is tested
		"tab\t\n":        "tab\t",
	} {
		got, err := secret.ReadFile(write(t, content, 0o600), what)
		if err != nil || got != want {
			t.Errorf("ReadFile(%q) = %q, %v; want %q", content, got, err, want)
		}
	}
}

func TestReadFileRefusesEmptyAndMissing(t *testing.T) {
	path := write(t, "\r\n", 0o600)
	if _, err := secret.ReadFile(path, what); err == nil || err.Error() != "read "+what+": "+path+" is empty" {
		t.Errorf("empty file: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := secret.ReadFile(missing, what); err == nil || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
}

// TestReadFileModes: a file others can read is refused with the chmod that
// fixes it, and never quoted; root may share its file with the daemon's
// group (0640), another owner may not.
func TestReadFileModes(t *testing.T) {
	rootOwned := os.Geteuid() == 0
	for _, tc := range []struct {
		mode    os.FileMode
		refused bool
	}{
		{0o600, false},
		{0o400, false},
		{0o644, true},
		{0o604, true},
		{0o602, true},
		{0o660, true},
		{0o640, !rootOwned},
	} {
		path := write(t, "hunter2\n", tc.mode)
		got, err := secret.ReadFile(path, what)
		if !tc.refused {
			if err != nil || got != "hunter2" {
				t.Errorf("mode %04o: got %q, %v", tc.mode, got, err)
			}
			continue
		}
		for _, want := range []string{
			fmt.Sprintf("%s %s is readable or writable by group or others (mode %04o)", what, path, tc.mode),
			"fix with chmod 600 " + path,
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("mode %04o: got %v\nwant it to contain %q", tc.mode, err, want)
			}
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("mode %04o: the error quotes the password: %v", tc.mode, err)
		}
	}
}

// TestReadFileGroupOfAnotherOwner: 0640 is refused for a file root does not
// own (needs root to give the file away).
func TestReadFileGroupOfAnotherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	path := write(t, "hunter2", 0o640)
	if err := os.Chown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := secret.ReadFile(path, what); err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Errorf("got %v", err)
	}
}
