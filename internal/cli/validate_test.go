package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateCatchesWhatFailsEveryRun: validate lists, at once and with
// exit 2, every setting that would make each run of a job fail on this
// host or on any, each with its file, line, job, field and fix; --offline
// too, since none needs the store.
func TestValidateCatchesWhatFailsEveryRun(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "data.txt", "x", 0o644)
	crontab := fmt.Sprintf(`metrics:
  listen: 127.0.0.1:-1
jobs:
  - name: who
    schedule: "@hourly"
    command: "true"
    user: anarchon-no-such-user
    group: anarchon-no-such-group
  - name: where
    schedule: "@hourly"
    command: "true"
    workdir: %[1]s/nope
  - name: what
    schedule: "@hourly"
    args: [anarchon-no-such-program]
  - name: how
    schedule: "@hourly"
    command: "true"
    shell: %[1]s/data.txt
  - name: huge
    schedule: "@hourly"
    command: %[2]s
  - name: never
    schedule: "0 0 31 2 *"
    command: "true"
`, dir, strings.Repeat("x", 10<<20))
	writeFile(t, dir, "c.yaml", crontab, 0o644)
	data := filepath.Join(dir, "data.txt")
	wants := []string{
		`c.yaml:2: metrics.listen: port -1 of "127.0.0.1:-1" is out of range 0-65535: write host:port such as 127.0.0.1:9464`,
		`c.yaml:7: job "who": jobs[0].user: unknown user "anarchon-no-such-user" on this host: every run would fail; create the user, or name one that exists`,
		`c.yaml:8: job "who": jobs[0].group: unknown group "anarchon-no-such-group" on this host: every run would fail; create the group, or name one that exists`,
		`c.yaml:12: job "where": jobs[1].workdir: directory "` + dir + `/nope" does not exist on this host: every run would fail; create it, or fix the path`,
		`c.yaml:15: job "what": jobs[2].args[0]: program "anarchon-no-such-program" is not found in the job's PATH (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin) on this host: every run would fail; install it, write its full path, or set env: PATH`,
		`c.yaml:19: job "how": jobs[3].shell: shell "` + data + `" is not executable (mode 0644): every run would fail; chmod +x it`,
		`c.yaml:22: job "huge": jobs[4].command: command is 10485760 bytes; the shell gets it as one argument, at most 131071 bytes (Linux's MAX_ARG_STRLEN, 131072 with the terminating NUL): execve refuses it, so every run would fail to start; put the script in a file and run that`,
		`c.yaml:24: job "never": jobs[5].schedule: schedule "0 0 31 2 *" never fires within 5 years: day-of-month 31 never falls in month 2; pick a day the month has (L is its last day)`,
	}
	for _, args := range [][]string{{"validate"}, {"validate", "--offline"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, stderr := run(t, dir, append(args, "--config", "c.yaml")...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			for _, want := range wants {
				found := false
				for _, l := range lines {
					found = found || strings.HasPrefix(l, want)
				}
				if !found {
					t.Errorf("stderr lacks a line starting %q", want)
				}
			}
			if want := "anarchond: c.yaml: 8 problem(s); nothing started"; lines[len(lines)-1] != want {
				t.Errorf("last line %q, want %q", lines[len(lines)-1], want)
			}
			if t.Failed() {
				t.Logf("stderr:\n%.3000s", stderr)
			}
		})
	}
}

// TestRunWarnsOfHostProblems: the daemon's start logs what this host lacks
// for a job as a warning and goes on (its runs fail and are recorded, the
// other jobs run); here it goes on to the store, which cannot be opened.
func TestRunWarnsOfHostProblems(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "metrics: {listen: \"\"}\nbackend:\n  sqlite: {path: /nonexistent/dir/x.db}\n"+
		"jobs:\n  - name: a\n    schedule: \"@hourly\"\n    command: \"true\"\n    user: anarchon-no-such-user\n", 0o644)
	code, _, stderr := run(t, dir, "run", "--config", "c.yaml")
	if code != 1 {
		t.Errorf("exit %d, want 1 (the store)", code)
	}
	// run logs the crontab's warnings (here as JSON: stderr is no
	// terminal) and goes on to open the store.
	for _, want := range []string{
		`"msg":"crontab warning"`,
		`c.yaml:8: job \"a\": jobs[0].user: unknown user \"anarchon-no-such-user\" on this host`,
		`anarchond: open sqlite backend:`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestNextCountBound: next refuses a count over MaxNextCount at once,
// before reading the crontab, and takes MaxNextCount.
func TestNextCountBound(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := run(t, dir, "next", "--config", "missing.yaml", "-n", "100000000")
	if code != 2 || out != "" {
		t.Errorf("exit %d, stdout %q; want 2 and nothing", code, out)
	}
	if want := "anarchond: -n 100000000: at most 10000 slots per job (--count)\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	writeFile(t, dir, "c.yaml", goodJobs, 0o644)
	code, out, stderr = run(t, dir, "next", "--config", "c.yaml", "-n", fmt.Sprint(MaxNextCount), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(out, "\n"); n != MaxNextCount {
		t.Errorf("%d slots, want %d", n, MaxNextCount)
	}
}
