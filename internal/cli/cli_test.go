package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/testserver"
)

const goodJobs = `jobs:
  - name: a
    schedule: "*/30 * * * *"
    timezone: Europe/Athens
    command: "true"
`

// run runs anarchond in-process in dir and returns its exit code and output.
func run(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	code := Main(context.Background(), args, Env{Stdout: &out, Stderr: &errb, Environ: []string{"PATH=/usr/bin:/bin"}})
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, dir, name, body string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestBadInput: each bad input is a one-line error naming its place, with
// exit code 2 for an invalid config or flags and 1 for a runtime failure;
// nothing is started.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		mode os.FileMode
		args []string
		code int
		want string // regexp over stderr
	}{
		{"malformed yaml", "jobs:\n  - name: a\n    schedule: \"* * * * *\n", 0o644, []string{"validate"}, 2,
			`^c\.yaml:3: invalid YAML: .*\n`},
		{"unknown key", "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: \"true\"\n    comand: x\n", 0o644, []string{"validate"}, 2,
			`(?m)^c\.yaml:5: job "a": jobs\[0\]\.comand: unknown key "comand" \(did you mean "command"\?\)$`},
		{"bad expression", "jobs:\n  - name: a\n    schedule: \"*/61 * * * *\"\n    command: \"true\"\n", 0o644, []string{"validate"}, 2,
			`(?m)^c\.yaml:3: job "a": jobs\[0\]\.schedule: bad schedule "\*/61 \* \* \* \*": .*$`},
		{"unknown zone", "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    timezone: Mars/Olympus\n    command: \"true\"\n", 0o644, []string{"validate"}, 2,
			`(?m)^c\.yaml:4: job "a": jobs\[0\]\.timezone: unknown time zone "Mars/Olympus".*$`},
		{"duplicate job", goodJobs + "  - name: a\n    schedule: \"@hourly\"\n    command: \"true\"\n", 0o644, []string{"validate"}, 2,
			`(?m)^c\.yaml:6: job "a": jobs\[1\]\.name: duplicate job name "a" \(first defined at line 2\)$`},
		{"world-writable crontab", goodJobs, 0o666, []string{"validate"}, 2,
			`(?m)^c\.yaml: file is writable by group or others \(mode 0666\); fix with chmod go-w c\.yaml; or pass --insecure-allow-writable-config for development$`},
		{"world-writable crontab refused by run", goodJobs, 0o666, []string{"run"}, 2,
			`(?m)^c\.yaml: file is writable by group or others`},
		{"unwritable database path", "metrics: {listen: \"\"}\nbackend:\n  sqlite: {path: /nonexistent/dir/x.db}\n" + goodJobs, 0o644, []string{"run"}, 1,
			`^anarchond: open sqlite backend: open sqlite database "/nonexistent/dir/x.db": unable to open database file: no such file or directory\n$`},
		{"unwritable database path in status", "backend:\n  sqlite: {path: /nonexistent/dir/x.db}\n" + goodJobs, 0o644, []string{"status"}, 1,
			`^anarchond: open sqlite backend: open sqlite database "/nonexistent/dir/x.db"`},
		{"missing config file", "", 0, []string{"validate", "--config", "nope.yaml"}, 2,
			`^anarchond: load config: open nope\.yaml: no such file or directory\n$`},
		{"unknown flag", goodJobs, 0o644, []string{"next", "--bogus"}, 2,
			`^anarchond: unknown flag: --bogus \(see anarchond next --help\)\n$`},
		{"bad --from", goodJobs, 0o644, []string{"next", "--from", "tomorrow"}, 2,
			`^anarchond: --from "tomorrow": want RFC 3339`},
		{"unknown --job", goodJobs, 0o644, []string{"next", "--job", "zzz"}, 2,
			`^anarchond: --job "zzz": no such job in c\.yaml\n$`},
		{"unknown command", goodJobs, 0o644, []string{"frobnicate"}, 2,
			`^anarchond: unknown command "frobnicate"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := tc.args
			if tc.file != "" {
				writeFile(t, dir, "c.yaml", tc.file, tc.mode)
				args = append(args, "--config", "c.yaml")
			}
			code, out, stderr := run(t, dir, args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if !regexp.MustCompile(tc.want).MatchString(stderr) {
				t.Errorf("stderr:\n%s\nwant match for %s", stderr, tc.want)
			}
			if strings.Contains(stderr, "anarchond started") || out != "" && tc.code != 0 {
				t.Errorf("something started or printed: stdout %q", out)
			}
			if _, err := os.Stat(filepath.Join(dir, "x.db")); err == nil {
				t.Error("a database was created")
			}
		})
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", `defaults:
  overlap: sometimes
jobs:
  - name: "bad name!"
    schedule: "* * *"
    command: "true"
  - name: b
    schedule: "@daily"
    timezone: Nowhere/City
`, 0o644)
	code, _, stderr := run(t, dir, "validate", "--config", "c.yaml")
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{
		`c.yaml:2: defaults.overlap:`,
		`c.yaml:4: job "bad name!": jobs[0].name:`,
		`c.yaml:5: job "bad name!": jobs[0].schedule:`,
		`c.yaml:7: job "b": jobs[1]`, // no command or args
		`c.yaml:9: job "b": jobs[1].timezone:`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestValidateOK(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "instance: web-1\n"+goodJobs, 0o644)
	code, out, stderr := run(t, dir, "validate", "--offline", "--config", "c.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "c.yaml: ok: 1 job(s), backend sqlite (/var/lib/anarchon/anarchon.db), instance web-1\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
}

// validate opens the store as the daemon would, and says why it cannot.
func TestValidateOpensTheStore(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "ok.yaml", "backend:\n  sqlite: {path: s.db}\n"+goodJobs, 0o644)
	code, out, stderr := run(t, dir, "validate", "--config", "ok.yaml")
	if code != 0 || !strings.Contains(out, "ok.yaml: store ok: sqlite (s.db)\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	writeFile(t, dir, "down.yaml", "backend:\n  type: postgres\n  postgres: {dsn: \"postgres://app:s3cret@127.0.0.1:1/cron?connect_timeout=2\"}\n"+goodJobs, 0o644)
	code, out, stderr = run(t, dir, "validate", "--config", "down.yaml")
	if code != 1 {
		t.Fatalf("exit %d, want 1 for an unreachable store; stderr %q", code, stderr)
	}
	if !strings.Contains(out, "down.yaml: ok: 1 job(s)") ||
		!regexp.MustCompile(`^anarchond: down\.yaml: the store cannot be used: .*127\.0\.0\.1`).MatchString(stderr) {
		t.Fatalf("stdout %q stderr %q: want the file ok and the store's reason", out, stderr)
	}
	if strings.Contains(out+stderr, "s3cret") {
		t.Fatalf("the password leaked: %s %s", out, stderr)
	}
}

func TestNextJSON(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", goodJobs, 0o644)
	// Athens falls back on 2027-10-31 at 04:00 EEST: */30 runs in both
	// copies of 03:xx.
	code, out, stderr := run(t, dir, "next", "--config", "c.yaml", "-n", "5", "--from", "2027-10-31T00:15:00Z", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	type slot struct {
		Job    string `json:"job"`
		Slot   string `json:"slot"`
		SlotMs int64  `json:"slot_ms"`
		Local  string `json:"local"`
	}
	var got []slot
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var s slot
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, s)
	}
	want := []slot{
		{"a", "2027-10-31T00:30:00Z", 1824942600000, "2027-10-31T03:30:00+03:00"},
		{"a", "2027-10-31T01:00:00Z", 1824944400000, "2027-10-31T03:00:00+02:00"},
		{"a", "2027-10-31T01:30:00Z", 1824946200000, "2027-10-31T03:30:00+02:00"},
		{"a", "2027-10-31T02:00:00Z", 1824948000000, "2027-10-31T04:00:00+02:00"},
		{"a", "2027-10-31T02:30:00Z", 1824949800000, "2027-10-31T04:30:00+02:00"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d slots, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("slot %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestNextTable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", goodJobs, 0o644)
	code, out, _ := run(t, dir, "next", "--config", "c.yaml", "-n", "2", "--from", "2027-03-28T00:15:00Z")
	if code != 0 {
		t.Fatal(out)
	}
	// Spring forward in Athens at 03:00 EET: 03:00 and 03:30 do not exist.
	want := "JOB  LOCAL                      UTC\n" +
		"a    2027-03-28T02:30:00+02:00  2027-03-28T00:30:00Z\n" +
		"a    2027-03-28T04:00:00+03:00  2027-03-28T01:00:00Z\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestStatusEmptyStore(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+goodJobs, 0o644)
	code, out, stderr := run(t, dir, "status", "--config", "c.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "JOB  SLOT  STATUS  ATTEMPT  INSTANCE  STARTED  DURATION  EXIT  KIND\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, t.TempDir(), "version")
	if code != 0 || !regexp.MustCompile(`^anarchond \S+\ncommit \S+\ngo1\.\d+`).MatchString(out) {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
}

// On this Redis (7.x), idmp is refused with the server's version and a
// suggestion, and auto shows the strategy it picks.
func TestValidateRedisStrategies(t *testing.T) {
	testserver.For("redis").Require(t, "")
	dir := t.TempDir()
	writeFile(t, dir, "idmp.yaml", "backend:\n  type: redis\n  redis: {strategy: idmp}\n"+goodJobs, 0o644)
	code, _, stderr := run(t, dir, "validate", "--config", "idmp.yaml")
	if code != 1 || !regexp.MustCompile(`redis strategy idmp needs Redis 8\.6 or later \(XADD IDMP\); this server is 7\.[0-9.]+: use strategy "script"`).MatchString(stderr) {
		t.Fatalf("idmp on Redis 7: exit %d, stderr %q", code, stderr)
	}
	writeFile(t, dir, "auto.yaml", "namespace: validate-auto\nbackend:\n  type: redis\n  redis: {strategy: auto}\n"+goodJobs, 0o644)
	code, out, stderr := run(t, dir, "validate", "--config", "auto.yaml")
	if code != 0 || !strings.Contains(out, "auto.yaml: redis strategy auto: using script on this server\n") {
		t.Fatalf("auto: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// A store that refuses us is one clear error naming the cause and the fix,
// the password never shown.
func TestValidateStoreRefuses(t *testing.T) {
	testserver.For("rabbitmq").Require(t, "")
	for _, tc := range []struct{ name, backend, want string }{
		{"rabbitmq vhost", `{type: rabbitmq, rabbitmq: {url: "amqp://guest:guest@127.0.0.1:5672/nope"}}`,
			`the store cannot be used: open rabbitmq backend: rabbitmq refused: the broker does not allow the vhost \(530 NOT_ALLOWED\) \(connect to rabbitmq amqp://guest:xxxxx@127.0.0.1:5672/nope: .*vhost nope not found.*; fix: create the vhost`},
		{"rabbitmq credentials", `{type: rabbitmq, rabbitmq: {url: "amqp://guest:s3cret@127.0.0.1:5672/"}}`,
			`the store cannot be used: open rabbitmq backend: rabbitmq refused: the broker refused the login .*username or password not allowed.*; fix: correct the user and password`},
		{"nats down", `{type: nats, nats: {url: "nats://127.0.0.1:1"}}`,
			`the store cannot be used: open nats backend: .*127\.0\.0\.1:1`},
		{"redis down", `{type: redis, redis: {url: "redis://:s3cret@127.0.0.1:1/0"}}`,
			`the store cannot be used: .*127\.0\.0\.1:1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "c.yaml", "backend: "+tc.backend+"\n"+goodJobs, 0o644)
			code, _, stderr := run(t, dir, "validate", "--config", "c.yaml")
			if code != 1 || !regexp.MustCompile(tc.want).MatchString(stderr) || strings.Contains(stderr, "s3cret") {
				t.Fatalf("exit %d, stderr %q, want %s", code, stderr, tc.want)
			}
		})
	}
}
