package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/supervise"
)

// passwdEntry returns the home and the login shell of name as getent
// reads them.
func passwdEntry(t *testing.T, name string) (home, shell string) {
	t.Helper()
	out, err := exec.Command("getent", "passwd", name).Output()
	if err != nil {
		t.Skipf("getent passwd %s: %v", name, err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), ":")
	if len(f) != 7 {
		t.Fatalf("getent passwd %s: %q", name, out)
	}
	if f[6] == "" {
		f[6] = "/bin/sh"
	}
	return f[5], f[6]
}

// runOutput runs job with r and returns its output tail.
func runOutput(t *testing.T, r *Runner, s *store, e Execution) string {
	t.Helper()
	rep := run(t, r, context.Background(), e, 30*time.Second)
	if rep.Status != claim.StatusSucceeded || !rep.Recorded || rep.Err != nil {
		t.Fatalf("report = %+v", rep)
	}
	fins, _ := s.finished()
	return fins[len(fins)-1].OutputTail
}

// A job's environment is a clean one: its user's identity, the default
// PATH, the run's ANARCHON_* variables, its env: and what its inheritEnv
// names; nothing else of the daemon's environment, such as a store's URL
// with its password.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	home, shell := passwdEntry(t, me.Username)
	path := "/usr/local/bin:/usr/bin:/bin"
	if os.Geteuid() == 0 {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	// A retry's run is at its own slot; the job sees the slot retried,
	// and the attempts counted on from it (docs/spec.md#s6-trigger).
	retry := &claim.Trigger{ID: "r", Kind: claim.TriggerRetry, Slot: testSlot.Add(time.Minute).UnixMilli(),
		Of: testSlot.UnixMilli(), Attempt: 3, Due: 1}
	for _, tc := range []struct {
		name, slot    string
		at, seen      time.Time // the run's slot; the slot the job sees
		trigger       *claim.Trigger
		kind, attempt string
	}{
		{"whole second", "2027-03-28T01:00:00Z", testSlot, testSlot, nil, "scheduled", "2"},
		{"milliseconds", "2027-03-28T01:00:00.250Z", testSlot.Add(250 * time.Millisecond), testSlot.Add(250 * time.Millisecond), nil, "scheduled", "2"},
		{"retry", "2027-03-28T01:00:00Z", testSlot.Add(time.Minute), testSlot, retry, "retry", "4"},
	} {
		for _, guarded := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/guard=%v", tc.name, guarded), func(t *testing.T) {
				t.Parallel()
				s := &store{}
				r, _ := newRunner(t, s, clock.Real{})
				if !guarded {
					r.Guard = nil // under the supervisor
				}
				r.BaseEnv = append(r.BaseEnv, supervise.Env+`={"parent":1}`, "ANARCHON_TOKEN=spoofed",
					"ANARCHON_BACKEND_REDIS_URL=redis://:pw@store:6379", "TEST_SECRET=s3cret")
				job := shellJob("envjob", "")
				job.Args = []string{"/usr/bin/env"}
				job.Env = map[string]string{"SHARED": "job", "JOB_ONLY": "j", "ANARCHON_JOB": "spoofed"}
				// ANARCHON_* is never inherited, even where the crontab's
				// check was bypassed.
				job.InheritEnv = []string{"BASE_ONLY", "SHARED", "NOT_SET", "ANARCHON_BACKEND_REDIS_URL"}
				e := execution(job)
				e.Slot, e.Fence.Slot, e.Trigger = tc.at, tc.at.UnixMilli(), tc.trigger
				got := map[string]string{}
				for _, line := range strings.Split(strings.TrimSpace(runOutput(t, r, s, e)), "\n") {
					k, v, _ := strings.Cut(line, "=")
					got[k] = v
				}
				want := map[string]string{
					"HOME": home, "USER": me.Username, "LOGNAME": me.Username, "SHELL": shell, "PATH": path,
					"BASE_ONLY":         "base",
					"SHARED":            "job",
					"JOB_ONLY":          "j",
					"ANARCHON_JOB":      "envjob",
					"ANARCHON_SLOT":     tc.slot,
					"ANARCHON_SLOT_MS":  strconv.FormatInt(tc.seen.UnixMilli(), 10),
					"ANARCHON_ATTEMPT":  tc.attempt,
					"ANARCHON_KIND":     tc.kind,
					"ANARCHON_TOKEN":    string(testToken),
					"ANARCHON_INSTANCE": "test-1",
				}
				for k, v := range want {
					if g, ok := got[k]; !ok || g != v {
						t.Errorf("%s = %q, want %q", k, g, v)
					}
				}
				for k, v := range got {
					if _, ok := want[k]; !ok {
						t.Errorf("the job sees %s=%s, which it was not given", k, v)
					}
				}
			})
		}
	}
}

// inheritEnv: [PATH] gives the job the daemon's PATH instead of the
// default one; env: wins over both.
func TestInheritPath(t *testing.T) {
	t.Parallel()
	s := &store{}
	r, _ := newRunner(t, s, clock.Real{})
	r.BaseEnv = append(r.BaseEnv, "PATH=/opt/daemon/bin:/usr/bin:/bin")
	job := shellJob("path", `echo "$PATH"`)
	job.InheritEnv = []string{"PATH"}
	if got := runOutput(t, r, s, execution(job)); got != "/opt/daemon/bin:/usr/bin:/bin\n" {
		t.Errorf("with inheritEnv: [PATH]: PATH=%q", got)
	}
	job.Env = map[string]string{"PATH": "/bin"}
	if got := runOutput(t, r, s, execution(job)); got != "/bin\n" {
		t.Errorf("with env: PATH: PATH=%q", got)
	}
}

// A job runs in its workdir, else in its user's home directory.
func TestWorkdirDefault(t *testing.T) {
	t.Parallel()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	home, _ := passwdEntry(t, me.Username)
	wantHome, err := filepath.EvalSymlinks(home)
	if err != nil {
		t.Skipf("the daemon user's home %s: %v", home, err)
	}
	dir := t.TempDir()
	wantDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &store{}
	r, _ := newRunner(t, s, clock.Real{})
	job := shellJob("cwd", "pwd -P")
	if got := runOutput(t, r, s, execution(job)); got != wantHome+"\n" {
		t.Errorf("without workdir: cwd %q, want the home %q", got, wantHome)
	}
	job.Workdir = dir
	if got := runOutput(t, r, s, execution(job)); got != wantDir+"\n" {
		t.Errorf("with workdir: cwd %q, want %q", got, wantDir)
	}
}

// A job with user: gets that user's passwd identity, the users' default
// PATH and its home as working directory, or / when the home does not
// exist.
func TestRunAsUserEnvironment(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	home, shell := passwdEntry(t, "nobody")
	cwd := "/"
	if fi, err := os.Stat(home); err == nil && fi.IsDir() {
		cwd = home
	}
	for _, guarded := range []bool{true, false} {
		t.Run(fmt.Sprintf("guard=%v", guarded), func(t *testing.T) {
			t.Parallel()
			s := &store{}
			r, _ := newRunner(t, s, clock.Real{})
			if !guarded {
				r.Guard = nil
			}
			r.BaseEnv = append(r.BaseEnv, "TEST_SECRET=s3cret")
			job := shellJob("asnobody", `echo "$HOME $USER $LOGNAME $SHELL $PATH ${TEST_SECRET-unset}"; pwd`)
			job.User = "nobody"
			want := fmt.Sprintf("%s nobody nobody %s /usr/local/bin:/usr/bin:/bin unset\n%s\n", home, shell, cwd)
			if got := runOutput(t, r, s, execution(job)); got != want {
				t.Errorf("output %q, want %q", got, want)
			}
		})
	}
}

// A user with no passwd entry of its own in /etc/passwd (another source,
// such as LDAP) gets /bin/sh as SHELL.
func TestLoginShellFallback(t *testing.T) {
	t.Parallel()
	if got := loginShell("anarchon-no-such-user", "4000000000"); got != "/bin/sh" {
		t.Errorf("loginShell = %q, want /bin/sh", got)
	}
}

// The login shells are read again once the passwd file changes. (Not
// parallel: it points passwdFile elsewhere.)
func TestLoginShellCache(t *testing.T) {
	saved := passwdFile
	t.Cleanup(func() { passwdFile = saved })
	passwdFile = filepath.Join(t.TempDir(), "passwd")
	write := func(shell string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(passwdFile, []byte("alice:x:4000:4000::/home/alice:"+shell+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(passwdFile, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	write("/bin/bash", t0)
	if got := shells.of("alice", "4000"); got != "/bin/bash" {
		t.Fatalf("shell %q, want /bin/bash", got)
	}
	write("/bin/zsh", t0.Add(time.Second)) // as long as bash's: the time tells
	if got := shells.of("alice", "4000"); got != "/bin/zsh" {
		t.Errorf("after the file changed: shell %q, want /bin/zsh", got)
	}
	if got := shells.of("bob", "4001"); got != "/bin/sh" {
		t.Errorf("a user not in the file: shell %q, want /bin/sh", got)
	}
}
