package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostOpts checks the host too, from a fixed now.
func hostOpts(mode HostMode, now time.Time) LoadOptions {
	o := opts(nil)
	o.Checks = Checks{Host: mode, Now: func() time.Time { return now }}
	return o
}

var preflightNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// problem is one expected Error: its line, job, field, and substrings of
// its message (what is wrong and the fix).
type problem struct {
	line  int
	job   string
	field string
	subs  []string
}

// checkProblems asserts that errs are exactly want, each naming the file.
func checkProblems(t *testing.T, errs Errors, want []problem) {
	t.Helper()
	used := make([]bool, len(errs))
	for _, w := range want {
		found := false
		for i, e := range errs {
			if used[i] || e.Line != w.line || e.Job != w.job || e.Field != w.field {
				continue
			}
			ok := e.File == "crontab.yaml"
			for _, s := range w.subs {
				ok = ok && strings.Contains(e.Msg, s)
			}
			if ok {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing problem at line %d, job %q, field %s, with %q", w.line, w.job, w.field, w.subs)
		}
	}
	for i, e := range errs {
		if !used[i] {
			t.Errorf("unexpected problem: %v", e)
		}
	}
	if t.Failed() {
		t.Logf("all problems:\n%v", errs)
	}
}

func preflightErrs(t *testing.T, yml string, o LoadOptions) Errors {
	t.Helper()
	cfg, err := Parse("crontab.yaml", []byte(yml), o)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse: want Errors, got %v (config %v)\n--- yaml:\n%s", err, cfg, yml)
	}
	return errs
}

// TestPreflightHost: what this host lacks for every run of a job is an
// error naming the job's setting, with the fix.
func TestPreflightHost(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "data.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "mytool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const head = "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
	for _, tc := range []struct {
		name string
		yaml string
		want []problem
	}{
		{"unknown user", head + "    command: \"true\"\n    user: anarchon-no-such-user\n",
			[]problem{{5, "a", "jobs[0].user", []string{`unknown user "anarchon-no-such-user" on this host`, "create the user, or name one that exists"}}}},
		{"unknown uid", head + "    command: \"true\"\n    user: \"4000000001\"\n",
			[]problem{{5, "a", "jobs[0].user", []string{`unknown user "4000000001"`}}}},
		{"unknown group", head + "    command: \"true\"\n    user: root\n    group: anarchon-no-such-group\n",
			[]problem{{6, "a", "jobs[0].group", []string{`unknown group "anarchon-no-such-group" on this host`, "create the group, or name one that exists"}}}},
		{"missing workdir", head + "    command: \"true\"\n    workdir: " + filepath.Join(dir, "nope") + "\n",
			[]problem{{5, "a", "jobs[0].workdir", []string{"does not exist on this host", "create it, or fix the path"}}}},
		{"workdir not a directory", head + "    command: \"true\"\n    workdir: " + file + "\n",
			[]problem{{5, "a", "jobs[0].workdir", []string{"is not a directory", "name a directory"}}}},
		{"program not in PATH", head + "    args: [anarchon-no-such-program, x]\n",
			[]problem{{4, "a", "jobs[0].args[0]", []string{`program "anarchon-no-such-program" is not found in the job's PATH (` + DefaultPath(os.Geteuid() == 0) + ")", "install it, write its full path, or set env: PATH"}}}},
		{"program in the job's own PATH", head + "    args: [mytool]\n    env: {PATH: " + bin + "}\n", nil},
		{"program missing from the job's own PATH", head + "    args: [ls]\n    env: {PATH: " + bin + "}\n",
			[]problem{{4, "a", "jobs[0].args[0]", []string{`program "ls" is not found in the job's PATH (` + bin + ")"}}}},
		{"program not executable", head + "    args:\n      - " + file + "\n",
			[]problem{{5, "a", "jobs[0].args[0]", []string{"is not executable (mode 0644)", "chmod +x it"}}}},
		{"program relative to workdir", head + "    args: [bin/mytool]\n    workdir: " + dir + "\n", nil},
		{"program missing relative to workdir", head + "    args: [bin/nope]\n    workdir: " + dir + "\n",
			[]problem{{4, "a", "jobs[0].args[0]", []string{"does not exist on this host", "install it, or fix the path"}}}},
		{"job's shell missing", head + "    command: \"true\"\n    shell: /bin/anarchon-no-such-shell\n",
			[]problem{{5, "a", "jobs[0].shell", []string{`shell "/bin/anarchon-no-such-shell" does not exist on this host`, "install it, or fix the path"}}}},
		{"shell of an args job is not used", head + "    args: [\"true\"]\n    shell: /bin/anarchon-no-such-shell\n", nil},
		{"inherited shell missing, once with its jobs",
			"defaults:\n  shell: anarchon-no-such-shell\n" + head + "    command: \"true\"\n" + job("b") + job("c"),
			[]problem{{2, "", "defaults.shell", []string{`shell "anarchon-no-such-shell" is not found in the job's PATH`, `(jobs "a", "b", "c")`}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := hostOpts(HostErrors, preflightNow)
			if tc.want == nil {
				if _, err := Parse("crontab.yaml", []byte(tc.yaml), o); err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			checkProblems(t, preflightErrs(t, tc.yaml, o), tc.want)
		})
	}
}

// TestPreflightHostModes: the host is not looked at unless asked; the
// daemon's start gets warnings, not errors.
func TestPreflightHostModes(t *testing.T) {
	yml := "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: \"true\"\n    user: anarchon-no-such-user\n"
	if _, err := Parse("crontab.yaml", []byte(yml), hostOpts(HostSkip, preflightNow)); err != nil {
		t.Errorf("HostSkip: %v", err)
	}
	cfg, err := Parse("crontab.yaml", []byte(yml), hostOpts(HostWarnings, preflightNow))
	if err != nil {
		t.Fatalf("HostWarnings: %v", err)
	}
	want := `crontab.yaml:5: job "a": jobs[0].user: unknown user "anarchon-no-such-user" on this host`
	if len(cfg.Warnings) != 1 || !strings.HasPrefix(cfg.Warnings[0], want) {
		t.Errorf("warnings %q, want one starting %q", cfg.Warnings, want)
	}
}

// TestPreflightArgSizes: an argument or env entry execve refuses, or an
// argv over MaxArgvBytes, is an error in every mode: it fails on any host.
func TestPreflightArgSizes(t *testing.T) {
	big := strings.Repeat("x", MaxArgBytes+1)
	fits := strings.Repeat("x", MaxArgBytes)
	const head = "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
	tenMB := strings.Repeat("y", 10<<20)
	for _, tc := range []struct {
		name string
		yaml string
		want []problem
	}{
		{"10 MB command", head + "    command: " + tenMB + "\n",
			[]problem{
				{4, "a", "jobs[0].command", []string{fmt.Sprintf("command is %d bytes", len(tenMB)), "at most 131071 bytes", "MAX_ARG_STRLEN", "put the script in a file"}},
			}},
		{"command just fits", head + "    command: " + fits + "\n", nil},
		{"one argument too long", head + "    args:\n      - echo\n      - " + big + "\n",
			[]problem{{6, "a", "jobs[0].args[1]", []string{"argument is 131072 bytes", "at most 131071 bytes", "pass the data in a file"}}}},
		{"env entry too long", head + "    command: \"true\"\n    env:\n      DATA: " + big + "\n",
			[]problem{{6, "a", "jobs[0].env.DATA", []string{"DATA=... is 131077 bytes", "pass the value in a file"}}}},
		{"argv over the total", head + "    args: [echo" + strings.Repeat(", "+fits, 9) + "]\n",
			[]problem{{4, "a", "jobs[0].args", []string{"arguments and env take 1179733 bytes", "at most 1048576"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := hostOpts(HostSkip, preflightNow)
			if tc.want == nil {
				if _, err := Parse("crontab.yaml", []byte(tc.yaml), o); err != nil {
					t.Fatalf("Parse: %.500v", err)
				}
				return
			}
			checkProblems(t, preflightErrs(t, tc.yaml, o), tc.want)
		})
	}
}

// TestPreflightListen: metrics.listen must be an address net.Listen takes.
func TestPreflightListen(t *testing.T) {
	for _, tc := range []struct{ addr, sub string }{
		{"127.0.0.1:-1", `port -1 of "127.0.0.1:-1" is out of range 0-65535`},
		{"127.0.0.1:65536", "port 65536 of"},
		{":99999999999999999999", "out of range 0-65535"},
		{"127.0.0.1:anarchon-no-such-service", "neither a number 0-65535 nor a known service name"},
		{"127.0.0.1", "must be host:port"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			yml := fmt.Sprintf("metrics:\n  listen: %q\n", tc.addr)
			checkProblems(t, preflightErrs(t, yml, opts(nil)), []problem{
				{2, "", "metrics.listen", []string{tc.sub, "host:port such as 127.0.0.1:9464 or :9464"}},
			})
		})
	}
	for _, ok := range []string{"", ":0", "127.0.0.1:9464", "[::1]:65535", "localhost:http"} {
		if _, err := Parse("crontab.yaml", []byte(fmt.Sprintf("metrics:\n  listen: %q\n", ok)), opts(nil)); err != nil {
			t.Errorf("listen %q: %v", ok, err)
		}
	}
}

// TestPreflightNeverFires: a schedule with no slot within five years is an
// error naming the field that makes it impossible, when one does.
func TestPreflightNeverFires(t *testing.T) {
	for _, tc := range []struct {
		expr string
		now  time.Time
		sub  string // "" when the schedule is fine
	}{
		{"0 0 31 2 *", preflightNow, `schedule "0 0 31 2 *" never fires within 5 years: day-of-month 31 never falls in month 2; pick a day the month has (L is its last day)`},
		{"0 0 30 2 *", preflightNow, "day-of-month 30 never falls in month 2"},
		{"0 0 31 4,6,9,11 *", preflightNow, "day-of-month 31 never falls in months 4, 6, 9, 11"},
		{"0 0 * 2 1#5", preflightNow, `schedule "0 0 * 2 1#5" never fires within 5 years: its next slot is 2044-02-29T00:00:00Z`},
		{"0 0 * 2 1#5", time.Date(2043, 6, 1, 0, 0, 0, 0, time.UTC), ""},
		{"0 0 29 2 *", preflightNow, ""},
		{"@every 87600h", preflightNow, ""},
		{"@every 200000h", preflightNow, `schedule "@every 200000h" never fires within 5 years: its next slot is 2038-`},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			yml := fmt.Sprintf("jobs:\n  - name: a\n    schedule: %q\n    command: \"true\"\n", tc.expr)
			o := hostOpts(HostSkip, tc.now)
			if tc.sub == "" {
				if _, err := Parse("crontab.yaml", []byte(yml), o); err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			checkProblems(t, preflightErrs(t, yml, o), []problem{{3, "a", "jobs[0].schedule", []string{tc.sub}}})
		})
	}
}
