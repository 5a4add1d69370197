// Package pgtest starts private PostgreSQL servers for tests: a primary
// on a free loopback port, and streaming standbys of it made with
// pg_basebackup -R, which a test kills, promotes and watches. It needs
// PostgreSQL's server programs (initdb, pg_ctl, pg_basebackup, postgres):
// without them a test skips, and fails when ANARCHON_TEST_REQUIRE is "all"
// or names postgres, saying what to install.
//
// initdb refuses to run as root: as root, the servers run as the
// operating system user "postgres" (which the PostgreSQL packages
// create), their directories owned by it.
package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/anarchon/anarchon/internal/testserver"
)

// BinEnv names the directory of PostgreSQL's server programs when they
// are neither under /usr/lib/postgresql/<version>/bin nor on PATH.
const BinEnv = "ANARCHON_TEST_PG_BIN"

// programs are the server programs a cluster needs.
var programs = []string{"initdb", "pg_ctl", "pg_basebackup", "postgres"}

// install says how to get the programs.
const install = "install PostgreSQL's server programs (Debian/Ubuntu: apt-get install postgresql-15; " +
	"any version from 12 on), or set " + BinEnv + " to the directory holding initdb, pg_ctl, pg_basebackup and postgres"

// binDir returns the directory of the server programs, or why there is
// none.
func binDir() (string, error) {
	var dirs []string
	if d := os.Getenv(BinEnv); d != "" {
		dirs = append(dirs, d)
	} else {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(found, func(a, b string) int { return versionOf(b) - versionOf(a) }) // newest first
		dirs = append(dirs, found...)
		if p, err := exec.LookPath("pg_ctl"); err == nil {
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	for _, d := range dirs {
		if hasPrograms(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL's server programs (%v) were not found (looked in %v)", programs, dirs)
}

// versionOf is the major version of a /usr/lib/postgresql/<v>/bin path.
func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func hasPrograms(dir string) bool {
	for _, p := range programs {
		if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Require returns the directory of the server programs; without them t
// skips, or fails when ANARCHON_TEST_REQUIRE demands postgres.
func Require(t testing.TB) string {
	t.Helper()
	dir, err := binDir()
	if err == nil {
		_, err = runAs()
	}
	if err == nil {
		return dir
	}
	if testserver.For("postgres").Required() {
		t.Fatalf("%v: %s\n(ANARCHON_TEST_REQUIRE=%s requires them)", err, install, os.Getenv("ANARCHON_TEST_REQUIRE"))
	}
	t.Skipf("%v: %s\n(set ANARCHON_TEST_REQUIRE=all to make this a failure)", err, install)
	return ""
}

// owner is the operating system user the servers run as: nil for this
// process's own, the "postgres" user's when this process is root.
type owner struct {
	uid, gid int
}

// runAs returns who runs the servers: nil (this process's user) unless it
// is root, whom initdb refuses.
func runAs() (*owner, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root: the servers need the user \"postgres\" (%w)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &owner{uid: uid, gid: gid}, nil
}

// command is name from the server programs' directory, run as o.
func (o *owner) command(bin, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if o != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(o.uid), Gid: uint32(o.gid)}}
	}
	return cmd
}

// chown gives path to o (nothing when o is nil).
func (o *owner) chown(path string) error {
	if o == nil {
		return nil
	}
	return os.Chown(path, o.uid, o.gid)
}
