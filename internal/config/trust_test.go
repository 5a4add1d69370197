//go:build unix

package config

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// nobody is the uid of the unprivileged account "nobody"; the test is skipped
// unless it runs as root (only root can give a file away) and the account
// exists.
func nobody(t *testing.T) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// mkdir makes a directory with exactly mode (chmod is not subject to the
// umask).
func mkdir(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, path string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("jobs:\n"+job("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
}

// loadProblems loads path and returns its one problem's line.
func loadProblem(t *testing.T, path string) string {
	t.Helper()
	cfg, err := Load(path, opts(nil))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Load(%s): got %v, %+v; want a refusal", path, err, cfg)
	}
	if len(errs) != 1 || errs[0].File != path {
		t.Fatalf("Load(%s): got %q", path, err)
	}
	return errs[0].Error()
}

func wantContains(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("got %q\nwant it to contain %q", got, w)
		}
	}
}

func TestTrustRefusesFileOfAnotherUser(t *testing.T) {
	uid := nobody(t)
	path := writeFile(t, filepath.Join(t.TempDir(), "crontab.yaml"))
	chown(t, path, uid)
	wantContains(t, loadProblem(t, path),
		path+": file is owned by nobody (uid "+strconv.Itoa(uid)+"), not by root or the daemon's user (root (uid 0))",
		"fix with chown root "+path+"; or pass --insecure-allow-writable-config")
}

func TestTrustRefusesWritableDirectory(t *testing.T) {
	nobody(t)
	dir := mkdir(t, filepath.Join(t.TempDir(), "shared"), 0o777)
	path := writeFile(t, filepath.Join(dir, "crontab.yaml"))
	wantContains(t, loadProblem(t, path),
		"directory "+dir+" is writable by group or others without the sticky bit (mode 0777)",
		"fix with chmod go-w "+dir+";")
}

func TestTrustRefusesDirectoryOfAnotherUser(t *testing.T) {
	uid := nobody(t)
	dir := mkdir(t, filepath.Join(t.TempDir(), "theirs"), 0o755)
	chown(t, dir, uid)
	path := writeFile(t, filepath.Join(dir, "crontab.yaml"))
	wantContains(t, loadProblem(t, path), "directory "+dir+" is owned by nobody", "chown root "+dir)
}

func TestTrustAcceptsStickyDirectory(t *testing.T) {
	nobody(t)
	dir := mkdir(t, filepath.Join(t.TempDir(), "tmp"), 0o777|os.ModeSticky)
	if fi, err := os.Stat(dir); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("%s is not sticky: %v", dir, err)
	}
	path := writeFile(t, filepath.Join(dir, "crontab.yaml"))
	cfg, err := Load(path, opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %q", cfg.Warnings)
	}
}

func TestTrustRefusesStickyDirectoryFileOfAnotherUser(t *testing.T) {
	uid := nobody(t)
	dir := mkdir(t, filepath.Join(t.TempDir(), "tmp"), 0o777|os.ModeSticky)
	path := writeFile(t, filepath.Join(dir, "crontab.yaml"))
	chown(t, path, uid)
	wantContains(t, loadProblem(t, path), path+": file is owned by nobody")
}

func TestTrustChecksLinkTargets(t *testing.T) {
	uid := nobody(t)
	root := t.TempDir()
	target := writeFile(t, filepath.Join(root, "theirs.yaml"))
	chown(t, target, uid)
	link := filepath.Join(root, "crontab.yaml")
	if err := os.Symlink("theirs.yaml", link); err != nil {
		t.Fatal(err)
	}
	got := loadProblem(t, link)
	wantContains(t, got, link+": file "+target+" is owned by nobody", "chown root "+target)

	// A link owned by another user in a sticky directory can be replaced by
	// its owner.
	dir := mkdir(t, filepath.Join(root, "tmp"), 0o777|os.ModeSticky)
	mine := writeFile(t, filepath.Join(root, "mine.yaml"))
	link = filepath.Join(dir, "crontab.yaml")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	chown(t, link, uid)
	wantContains(t, loadProblem(t, link), link+": symbolic link is owned by nobody", "chown -h root "+link)

	// A link through a directory link: the target directory is checked.
	open := mkdir(t, filepath.Join(root, "open"), 0o777)
	writeFile(t, filepath.Join(open, "crontab.yaml"))
	dirLink := filepath.Join(root, "etc")
	if err := os.Symlink(open, dirLink); err != nil {
		t.Fatal(err)
	}
	wantContains(t, loadProblem(t, filepath.Join(dirLink, "crontab.yaml")), "directory "+open+" is writable")
}

func TestTrustInsecureFlagWarns(t *testing.T) {
	uid := nobody(t)
	dir := mkdir(t, filepath.Join(t.TempDir(), "shared"), 0o777)
	path := writeFile(t, filepath.Join(dir, "crontab.yaml"))
	chown(t, path, uid)
	cfg, err := Load(path, LoadOptions{AllowInsecurePerms: true, Environ: noEnv, Hostname: fixedHost})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 2 {
		t.Fatalf("warnings: %q", cfg.Warnings)
	}
	for _, w := range cfg.Warnings {
		wantContains(t, w, path+": ", "accepted because of --insecure-allow-writable-config (development only")
	}
}
