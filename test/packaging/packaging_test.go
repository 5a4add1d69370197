// Package packaging tests what ships to operators: the systemd unit
// (systemd-analyze verify), the maintainer scripts, and the .deb that
// `make package` builds, by installing, upgrading and purging it on this
// machine with dpkg.
//
// Installing needs root and dpkg. Without them, or without the other tools
// used here, the tests skip, and fail when ANARCHON_TEST_REQUIRE is "all" or
// names "packaging" (CI sets "all"). -short skips the package tests. The
// install test refuses to touch a machine where anarchon is already
// installed, and purges what it installed even when it fails.
package packaging

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Paths the package installs.
const (
	binPath     = "/usr/bin/anarchond"
	supPath     = "/usr/bin/anarchon-supervise"
	unitPath    = "/lib/systemd/system/anarchond.service"
	configPath  = "/etc/anarchon/anarchon.yaml"
	defaultPath = "/etc/default/anarchond"
	stateDir    = "/var/lib/anarchon"
	pkgName     = "anarchon"
	svcUser     = "anarchon"
)

// required reports whether ANARCHON_TEST_REQUIRE makes a missing
// prerequisite a failure.
func required() bool {
	req := os.Getenv("ANARCHON_TEST_REQUIRE")
	return req == "all" || slices.Contains(strings.Split(req, ","), "packaging")
}

// need skips t, or fails it under ANARCHON_TEST_REQUIRE, unless ok.
func need(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if required() {
		t.Fatalf("%s\n(ANARCHON_TEST_REQUIRE=%s requires the packaging tests)", msg, os.Getenv("ANARCHON_TEST_REQUIRE"))
	}
	t.Skipf("%s\n(set ANARCHON_TEST_REQUIRE=all to make this a failure)", msg)
}

// needTools calls need for each program that is not on PATH.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		_, err := exec.LookPath(tool)
		need(t, err == nil, "%s is not installed (%v)", tool, err)
	}
}

// repoRoot is the repository's root: this package is test/packaging.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "packaging", "nfpm.yaml")); err != nil {
		t.Fatalf("repository root not found from the test's directory: %v", err)
	}
	return root
}

// cleanEnv is the environment of the installed programs: no ANARCHON_*
// variable of the caller's may change what they read.
func cleanEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "DEBIAN_FRONTEND=noninteractive"}
}

// run runs name args in dir (the current directory when empty) with env (the
// test's when nil) and at most timeout; it returns the combined output and
// the error, both also logged.
func run(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (after %v: %w)", err, timeout, ctx.Err())
	}
	t.Logf("$ %s %s (%v, err %v)\n%s", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err, out.String())
	return out.String(), err
}

// must is run that fails the test on an error.
func must(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := run(t, timeout, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// verifyUnit runs systemd-analyze verify on unit and fails on an error or on
// any output about anarchond.
func verifyUnit(t *testing.T, unit string) {
	t.Helper()
	out, err := run(t, time.Minute, "", cleanEnv(), "systemd-analyze", "verify", unit)
	if err != nil {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "anarchond") {
			t.Errorf("systemd-analyze verify %s complains: %s", unit, strings.TrimSpace(line))
		}
	}
}

// unitDirectives parses a unit file into directive -> values, in order.
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := map[string][]string{}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a directive: %q", path, line)
		}
		d[k] = append(d[k], v)
	}
	return d
}

// TestUnit checks the unit as systemd reads it, offline: systemd-analyze
// verify needs the programs it runs to exist, so the copy it checks runs this
// test's own executable instead of /usr/bin/anarchond (TestDeb verifies the
// installed unit as it is).
func TestUnit(t *testing.T) {
	root := repoRoot(t)
	src := filepath.Join(root, "systemd", "anarchond.service")
	d := unitDirectives(t, src)

	want := map[string]string{
		"Type": "notify", "NotifyAccess": "main", "KillMode": "mixed",
		"ExecStart": binPath + " run --config " + configPath,
		"Restart":   "on-failure", "RestartSec": "5s", "WatchdogSec": "30s",
		"User": svcUser, "Group": svcUser, "StateDirectory": "anarchon",
		"EnvironmentFile": "-" + defaultPath, "ProtectSystem": "full",
	}
	for k, v := range want {
		if got := d[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
	if got := d["ExecReload"]; len(got) == 0 || got[len(got)-1] != "/bin/kill -HUP $MAINPID" {
		t.Errorf("ExecReload=%q, want the last to be /bin/kill -HUP $MAINPID", got)
	}
	if _, ok := d["RestartPreventExitStatus"]; ok {
		t.Error("RestartPreventExitStatus is set: Go exits 2 on a panic and on the watchdog's SIGABRT, which must restart")
	}

	// docs/operating.md explains every directive.
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	for k := range d {
		if k != "Description" && k != "Documentation" && !bytes.Contains(doc, []byte("`"+k+"=")) {
			t.Errorf("docs/operating.md does not explain %s=", k)
		}
	}

	// TimeoutStopSec must leave the daemon its whole stop
	// (docs/spec.md#s4-stop): shutdownGraceMs of the packaged config, the
	// default killGraceMs, 5 s to release or record the stopped runs and
	// 2 s to leave the cluster view and close the store client.
	cfg, err := os.ReadFile(filepath.Join(root, "packaging", "anarchon.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	grace := 30 * time.Second
	if m := regexp.MustCompile(`(?m)^shutdownGraceMs:\s*(\d+)`).FindSubmatch(cfg); m != nil {
		ms, _ := strconv.Atoi(string(m[1]))
		grace = time.Duration(ms) * time.Millisecond
	}
	const killGrace, settle = 10 * time.Second, 7 * time.Second
	stop, err := time.ParseDuration(strings.Join(d["TimeoutStopSec"], ""))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", d["TimeoutStopSec"], err)
	}
	if stop <= grace+killGrace+settle {
		t.Errorf("TimeoutStopSec=%v, want above shutdownGraceMs %v + killGraceMs %v + %v", stop, grace, killGrace, settle)
	}

	needTools(t, "systemd-analyze")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "anarchond.service")
	if err := os.WriteFile(copyPath, bytes.ReplaceAll(data, []byte(binPath), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	verifyUnit(t, copyPath)
}

// TestScripts checks that every maintainer script is valid sh and executable.
func TestScripts(t *testing.T) {
	needTools(t, "sh")
	dir := filepath.Join(repoRoot(t), "packaging", "scripts")
	for _, name := range []string{"preinstall.sh", "postinstall.sh", "preremove.sh", "postremove.sh"} {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is not executable (mode %v)", name, fi.Mode())
		}
		must(t, time.Minute, "", nil, "sh", "-n", p)
	}
}

// lock takes the machine-wide lock of the install test, waiting for another
// run (another checkout's `go test`) to finish; it is released at cleanup.
func lock(t *testing.T) {
	t.Helper()
	dir := "/run/lock"
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "anarchon-packaging-test.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("lock %s: %v", path, err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("lock %s (another packaging test holds it?): %v", path, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}

// pkgStatus is dpkg's status of the package ("" when dpkg does not know it).
func pkgStatus(t *testing.T) (status, version string) {
	t.Helper()
	out, err := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", pkgName).Output()
	if err != nil {
		return "", ""
	}
	status, version, _ = strings.Cut(strings.TrimSpace(string(out)), " ")
	return status, version
}

// owner returns the uid, gid and permissions of path.
func owner(t *testing.T, path string) (uid, gid uint32, perm fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode()
}

// checkFile fails unless path has the mode and owner, and, when want is not
// nil, exactly that content.
func checkFile(t *testing.T, path string, mode fs.FileMode, uid, gid uint32, want []byte) {
	t.Helper()
	u, g, m := owner(t, path)
	if m != mode || u != uid || g != gid {
		t.Errorf("%s: mode %v owner %d:%d, want %v %d:%d", path, m, u, g, mode, uid, gid)
	}
	if want != nil {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the repository's file", path)
		}
	}
}

func lookupIDs(t *testing.T) (uid, gid uint32) {
	t.Helper()
	u, err := user.Lookup(svcUser)
	if err != nil {
		t.Fatalf("user %s: %v", svcUser, err)
	}
	if _, err := user.LookupGroup(svcUser); err != nil {
		t.Fatalf("group %s: %v", svcUser, err)
	}
	if u.HomeDir != stateDir {
		t.Errorf("user %s: home %q, want %q", svcUser, u.HomeDir, stateDir)
	}
	id, _ := strconv.ParseUint(u.Uid, 10, 32)
	gd, _ := strconv.ParseUint(u.Gid, 10, 32)
	return uint32(id), uint32(gd)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// maxGlibc is the newest GLIBC_x.y symbol version the binary needs.
func maxGlibc(t *testing.T, path string) []int {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil {
		t.Fatalf("%s: %v (built without cgo?)", path, err)
	}
	var newest []int
	for _, s := range syms {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if !ok {
			continue
		}
		if ver := parseVersion(v); slices.Compare(ver, newest) > 0 {
			newest = ver
		}
	}
	if newest == nil {
		t.Fatalf("%s needs no glibc symbol: built without cgo? SQLite needs cgo", path)
	}
	return newest
}

func parseVersion(s string) []int {
	var v []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}

// TestDeb builds the packages with `make package`, checks the .deb, and
// installs it on this machine: first install, the service user and state
// directory, the installed binary on the installed config, the installed
// unit, an upgrade over a modified config, and the purge.
func TestDeb(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and installs a package; not in -short")
	}
	needTools(t, "make", "go", "dpkg", "dpkg-deb", "dpkg-query", "systemd-analyze")
	need(t, os.Geteuid() == 0, "installing a .deb needs root (running as uid %d)", os.Geteuid())
	root := repoRoot(t)
	lock(t)

	// Never disturb an anarchon someone installed or left here.
	if st, v := pkgStatus(t); st != "" && st != "not-installed" {
		need(t, false, "package %s is already on this machine (%s %s): the test would remove it; run `dpkg --purge %s` first", pkgName, st, v, pkgName)
	}
	for _, p := range []string{binPath, supPath, configPath, defaultPath, stateDir, unitPath} {
		need(t, !exists(p), "%s exists although package %s is not installed: the test would remove it", p, pkgName)
	}

	// The packages: v1 as the Makefile builds it (deb and rpm), v2 the same
	// with a newer version, for the upgrade.
	tmp := t.TempDir()
	dist1, dist2 := filepath.Join(tmp, "v1"), filepath.Join(tmp, "v2")
	// The first nfpm run downloads it: minutes on a cold module cache.
	must(t, 10*time.Minute, root, nil, "make", "--no-print-directory", "package", "DIST="+dist1, "PKG_VERSION=0.0.1")
	must(t, 5*time.Minute, root, nil, "make", "--no-print-directory", "package", "DIST="+dist2, "PKG_VERSION=0.0.2")
	deb1 := filepath.Join(dist1, "anarchon_0.0.1_amd64.deb")
	deb2 := filepath.Join(dist2, "anarchon_0.0.2_amd64.deb")
	rpms, _ := filepath.Glob(filepath.Join(dist1, "anarchon-0.0.1-*.x86_64.rpm"))
	if len(rpms) != 1 {
		t.Errorf("want one rpm in %s, found %q", dist1, rpms)
	} else if data, err := os.ReadFile(rpms[0]); err != nil || !bytes.HasPrefix(data, []byte{0xed, 0xab, 0xee, 0xdb}) {
		t.Errorf("%s is not an rpm (%v)", rpms[0], err)
	}

	t.Run("contents", func(t *testing.T) {
		fields := must(t, time.Minute, "", nil, "dpkg-deb", "-f", deb1, "Package", "Version", "Architecture", "Depends", "Pre-Depends")
		for _, w := range []string{"Package: anarchon", "Version: 0.0.1", "Architecture: amd64", "Pre-Depends: passwd"} {
			if !strings.Contains(fields, w) {
				t.Errorf("control fields lack %q:\n%s", w, fields)
			}
		}
		// The libc6 dependency must cover every glibc symbol the binary uses.
		m := regexp.MustCompile(`libc6 \(>= ([0-9.]+)\)`).FindStringSubmatch(fields)
		if m == nil {
			t.Errorf("Depends lacks libc6 (>= x.y):\n%s", fields)
		} else if need, dep := maxGlibc(t, filepath.Join(root, "bin", "anarchond")), parseVersion(m[1]); slices.Compare(need, dep) > 0 {
			t.Errorf("bin/anarchond needs GLIBC_%v but the package depends on libc6 (>= %s): update packaging/nfpm.yaml", need, m[1])
		}

		// The supervisor starts once per job: static (built without cgo),
		// it does without the dynamic loader.
		if f, err := elf.Open(filepath.Join(root, "bin", "anarchon-supervise")); err != nil {
			t.Error(err)
		} else {
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Error("bin/anarchon-supervise is dynamically linked: build it with CGO_ENABLED=0")
				}
			}
			f.Close()
		}

		conffiles := must(t, time.Minute, "", nil, "dpkg-deb", "-I", deb1, "conffiles")
		got := strings.Fields(conffiles)
		slices.Sort(got)
		if want := []string{configPath, defaultPath}; !slices.Equal(got, want) {
			t.Errorf("conffiles %q, want %q", got, want)
		}
		info := must(t, time.Minute, "", nil, "dpkg-deb", "-I", deb1)
		for _, s := range []string{"preinst", "postinst", "prerm", "postrm", "conffiles"} {
			if !strings.Contains(info, " "+s+" ") {
				t.Errorf("control archive lacks %s:\n%s", s, info)
			}
		}

		// dpkg-deb -c: "perms owner/group size date time ./path".
		listing := map[string][2]string{}
		for line := range strings.Lines(must(t, time.Minute, "", nil, "dpkg-deb", "-c", deb1)) {
			f := strings.Fields(line)
			if len(f) < 6 {
				continue
			}
			listing[strings.TrimSuffix(strings.TrimPrefix(f[len(f)-1], "."), "/")] = [2]string{f[0], f[1]}
		}
		for path, want := range map[string][2]string{
			binPath:               {"-rwxr-xr-x", "root/root"},
			supPath:               {"-rwxr-xr-x", "root/root"},
			unitPath:              {"-rw-r--r--", "root/root"},
			"/etc/anarchon":       {"drwxr-xr-x", "root/root"},
			configPath:            {"-rw-r--r--", "root/root"},
			defaultPath:           {"-rw-------", "root/root"},
			stateDir:              {"drwxr-x---", "anarchon/anarchon"},
			"/usr/bin":            {"drwxr-xr-x", "root/root"},
			"/lib/systemd":        {"drwxr-xr-x", "root/root"},
			"/etc/default":        {"drwxr-xr-x", "root/root"},
			"/var/lib":            {"drwxr-xr-x", "root/root"},
			"/etc":                {"drwxr-xr-x", "root/root"},
			"/lib":                {"drwxr-xr-x", "root/root"},
			"/usr":                {"drwxr-xr-x", "root/root"},
			"/var":                {"drwxr-xr-x", "root/root"},
			"/lib/systemd/system": {"drwxr-xr-x", "root/root"},
		} {
			if got, ok := listing[path]; !ok {
				t.Errorf("the .deb lacks %s", path)
			} else if got != want {
				t.Errorf("%s in the .deb: %v, want %v", path, got, want)
			}
		}
		if len(listing) != 16 {
			t.Errorf("the .deb holds %d entries, want 16: %v", len(listing), listing)
		}
	})
	if t.Failed() {
		return
	}

	// From here on the machine is changed: undo it even on failure. The
	// system user is kept by the purge (by design); remove it if this test
	// created it.
	_, errUser := user.Lookup(svcUser)
	_, errGroup := user.LookupGroup(svcUser)
	t.Cleanup(func() {
		if errUser != nil {
			if _, err := user.Lookup(svcUser); err == nil {
				run(t, time.Minute, "", cleanEnv(), "userdel", svcUser)
			}
		}
		if errGroup != nil {
			if _, err := user.LookupGroup(svcUser); err == nil {
				run(t, time.Minute, "", cleanEnv(), "groupdel", svcUser)
			}
		}
	})
	t.Cleanup(func() {
		if st, _ := pkgStatus(t); st != "" && st != "not-installed" {
			if _, err := run(t, 3*time.Minute, "", cleanEnv(), "dpkg", "--purge", pkgName); err != nil {
				t.Errorf("cleanup: dpkg --purge %s failed: remove it by hand", pkgName)
			}
		}
		for _, p := range []string{binPath, supPath} {
			if exists(p) {
				t.Errorf("cleanup: %s is still there after the purge", p)
			}
		}
	})

	must(t, 3*time.Minute, "", cleanEnv(), "dpkg", "-i", deb1)
	if st, v := pkgStatus(t); st != "installed" || v != "0.0.1" {
		t.Fatalf("after dpkg -i: status %q version %q, want installed 0.0.1", st, v)
	}

	uid, gid := lookupIDs(t)
	checkFile(t, stateDir, fs.ModeDir|0o750, uid, gid, nil)
	checkFile(t, binPath, 0o755, 0, 0, nil)
	checkFile(t, supPath, 0o755, 0, 0, nil)
	// The installed supervisor runs a job and passes its exit code on.
	var ee *exec.ExitError
	if _, err := run(t, time.Minute, "/", cleanEnv(), supPath, "--", "/bin/sh", "-c", "exit 3"); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("%s -- /bin/sh -c 'exit 3': %v, want exit status 3", supPath, err)
	}
	checkFile(t, configPath, 0o644, 0, 0, mustRead(t, filepath.Join(root, "packaging", "anarchon.yaml")))
	checkFile(t, defaultPath, 0o600, 0, 0, mustRead(t, filepath.Join(root, "packaging", "anarchond.default")))
	checkFile(t, unitPath, 0o644, 0, 0, mustRead(t, filepath.Join(root, "systemd", "anarchond.service")))

	// The installed binary accepts the installed crontab...
	must(t, time.Minute, "/", cleanEnv(), binPath, "validate", "--offline", "--config", configPath)
	// ...and, as the service's user, opens (creates) its SQLite store in the
	// state directory: the user can write there.
	t.Run("store as "+svcUser, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, binPath, "validate", "--config", configPath)
		cmd.Dir, cmd.Env = "/", append(cleanEnv(), "HOME="+stateDir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		t.Logf("validate as %s: %v\n%s", svcUser, err, out)
		if err != nil {
			t.Fatalf("validate as %s: %v\n%s", svcUser, err, out)
		}
		db := filepath.Join(stateDir, "anarchon.db")
		if u, _, _ := owner(t, db); u != uid {
			t.Errorf("%s is owned by uid %d, want %s (%d)", db, u, svcUser, uid)
		}
	})

	verifyUnit(t, unitPath)

	// Upgrade over modified configuration files: both survive as they are.
	modConfig := bytes.Replace(mustRead(t, configPath), []byte("namespace: cron"), []byte("namespace: upgraded"), 1)
	modConfig = append(modConfig, "# changed by the packaging test\n"...)
	modDefault := append(mustRead(t, defaultPath), "ANARCHON_INSTANCE=packaging-test\n"...)
	if err := os.WriteFile(configPath, modConfig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(defaultPath, modDefault, 0o600); err != nil {
		t.Fatal(err)
	}
	out := must(t, 3*time.Minute, "", cleanEnv(), "dpkg", "-i", deb2)
	if st, v := pkgStatus(t); st != "installed" || v != "0.0.2" {
		t.Fatalf("after the upgrade: status %q version %q, want installed 0.0.2", st, v)
	}
	if strings.Contains(out, "Configuration file") {
		t.Errorf("the upgrade asked about a configuration file:\n%s", out)
	}
	checkFile(t, configPath, 0o644, 0, 0, modConfig)
	checkFile(t, defaultPath, 0o600, 0, 0, modDefault)
	checkFile(t, stateDir, fs.ModeDir|0o750, uid, gid, nil)
	for _, p := range []string{configPath + ".dpkg-new", configPath + ".dpkg-dist", defaultPath + ".dpkg-new", defaultPath + ".dpkg-dist"} {
		if exists(p) {
			t.Errorf("the upgrade left %s", p)
		}
	}
	if !exists(filepath.Join(stateDir, "anarchon.db")) {
		t.Errorf("the upgrade lost the store in %s", stateDir)
	}
	must(t, time.Minute, "/", cleanEnv(), binPath, "validate", "--offline", "--config", configPath)

	// The purge removes the package, its configuration and its state; the
	// system user stays (Debian's practice for system users).
	must(t, 3*time.Minute, "", cleanEnv(), "dpkg", "--purge", pkgName)
	if st, _ := pkgStatus(t); st != "" && st != "not-installed" {
		t.Errorf("after the purge dpkg still knows %s: %s", pkgName, st)
	}
	for _, p := range []string{binPath, supPath, unitPath, configPath, defaultPath, stateDir} {
		if exists(p) {
			t.Errorf("%s is still there after the purge", p)
		}
	}
	if _, err := user.Lookup(svcUser); err != nil {
		t.Errorf("the purge removed the user %s, which it should keep: %v", svcUser, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
