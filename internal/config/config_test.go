package config

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/natsclaim"
	"github.com/anarchon/anarchon/internal/pgclaim"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
	"github.com/anarchon/anarchon/internal/redisclaim"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
)

func TestBuiltinDefaults(t *testing.T) {
	cfg := mustParse(t, "jobs:\n"+job("a"))
	want := &Config{
		File:          "crontab.yaml",
		Instance:      cfg.Instance,
		Namespace:     "cron",
		ShutdownGrace: 30 * time.Second,
		Metrics:       Metrics{Listen: "127.0.0.1:9464"},
		Dashboard:     Dashboard{Refresh: 5 * time.Second},
		Log:           Log{Level: "info", Format: "auto"},
		Backend: Backend{
			Type:      "sqlite",
			Retention: 168 * time.Hour,
			Store:     sqliteclaim.Settings{Path: "/var/lib/anarchon/anarchon.db", BusyTimeout: 5 * time.Second},
		},
		Jobs: []Job{{
			Name: "a", Schedule: "* * * * *", Command: "true",
			Timezone: "UTC", Location: time.UTC,
			MaxLate: time.Minute, ClaimSpread: 10 * time.Millisecond, ClaimAhead: 100 * time.Millisecond,
			Lease: 30 * time.Second, Heartbeat: 10 * time.Second, MaxAttempts: 3, Overlap: "skip", CatchUp: "latest", Timeout: time.Hour, KillGrace: 10 * time.Second,
			Shell: "/bin/sh", OutputTailBytes: 4096, HookTimeout: time.Minute, OnDrift: "run", Line: 2, Index: 0,
			Retry: Retry{Backoff: time.Second, MaxBackoff: time.Minute},
		}},
	}
	cfg.Backend.sections = nil // every store's section: checked by TestFullConfig
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got\n%+v\nwant\n%+v", cfg, want)
	}
	if !regexp.MustCompile(`^testhost-[0-9a-f]{4}$`).MatchString(cfg.Instance) {
		t.Errorf("default instance %q, want testhost-<4 hex>", cfg.Instance)
	}
}

func TestEmptyAndNoJobs(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"empty file", ""},
		{"comments only", "# nothing here\n"},
		{"empty document", "---\n"},
		{"null jobs", "jobs:\n"},
		{"empty jobs", "jobs: []\n"},
		{"no jobs key", "namespace: x\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.yaml)
			if len(cfg.Jobs) != 0 {
				t.Errorf("jobs: %v", cfg.Jobs)
			}
			if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "no jobs") {
				t.Errorf("warnings %q, want one about no jobs", cfg.Warnings)
			}
		})
	}
}

func TestFullConfig(t *testing.T) {
	cfg := mustParse(t, `instance: web1
namespace: prod_cron-1
shutdownGraceMs: 0
log: {level: debug, format: json}
backend:
  type: postgres
  retention: 720h
  sqlite: {path: ./x.db, busyTimeoutMs: 0}
  postgres: {dsn: "host=db user=app dbname=cron", table: cron.runs, passwordFile: /etc/pg.pass, synchronousCommit: off}
  redis: {url: "rediss://cache:6380/1", strategy: script, passwordFile: /etc/redis.pass,
          strategyOptions: {durationSec: 600, windowMs: 120000}}
  rabbitmq: {url: "amqps://mq:5671/vhost", slotTtlMs: 600000}
  nats: {url: "nats://n1:4222, tls://n2:4222", stream: CRON_1, duplicateWindowMs: 600000}
jobs:
  - name: backup
    schedule: "@every 90s"
    args: [/usr/bin/backup, --level, 3, true]
    env: {MODE: full, LEVEL: 3, EMPTY: ""}
    workdir: /srv
    user: "1000"
`)
	b := cfg.Backend
	if cfg.Instance != "web1" || cfg.Namespace != "prod_cron-1" || cfg.ShutdownGrace != 0 ||
		cfg.Log != (Log{"debug", "json"}) || b.Type != "postgres" || b.Retention != 720*time.Hour ||
		b.sections["sqlite"] != (sqliteclaim.Settings{Path: "./x.db"}) ||
		b.Store != (pgclaim.Settings{DSN: "host=db user=app dbname=cron", Table: "cron.runs", PasswordFile: "/etc/pg.pass", SynchronousCommit: "off"}) ||
		b.sections["redis"] != (redisclaim.Settings{URL: "rediss://cache:6380/1", Strategy: "script", PasswordFile: "/etc/redis.pass", DurationSec: 600, WindowMs: 120000}) ||
		b.sections["rabbitmq"] != (rabbitclaim.Settings{URL: "amqps://mq:5671/vhost", SlotTTLMs: 600000}) ||
		!reflect.DeepEqual(b.sections["nats"], natsclaim.Settings{URL: "nats://n1:4222, tls://n2:4222", Stream: "CRON_1", DuplicateWindowMs: 600000}) {
		t.Errorf("got %+v", cfg)
	}
	j := cfg.Jobs[0]
	if !reflect.DeepEqual(j.Args, []string{"/usr/bin/backup", "--level", "3", "true"}) || j.Command != "" {
		t.Errorf("args %q command %q", j.Args, j.Command)
	}
	if !reflect.DeepEqual(j.Env, map[string]string{"MODE": "full", "LEVEL": "3", "EMPTY": ""}) {
		t.Errorf("env %v", j.Env)
	}
	if j.Workdir != "/srv" || j.User != "1000" || j.Line != 15 {
		t.Errorf("job %+v", j)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %q", cfg.Warnings)
	}
}

// TestCatchUp: catchUp from the built-in default (latest), defaults, the
// job and the environment.
func TestCatchUp(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        []string
		want       []string // per job
	}{
		{"built-in default", "jobs:\n" + job("a"), nil, []string{"latest"}},
		{"defaults inherited, job overrides", "defaults: {catchUp: all}\njobs:\n" + job("a") + job("b") + "    catchUp: none\n" + job("c") + "    catchUp: latest\n",
			nil, []string{"all", "none", "latest"}},
		{"env override of defaults", "jobs:\n" + job("a") + job("b") + "    catchUp: all\n", []string{"ANARCHON_DEFAULTS_CATCHUP=none"},
			[]string{"none", "all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.yaml, tc.env...)
			var got []string
			for _, j := range cfg.Jobs {
				got = append(got, j.CatchUp)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("catchUp %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMergePrecedence(t *testing.T) {
	cfg := mustParse(t, `defaults:
  timezone: Europe/Athens
  maxLateMs: 5000
  leaseMs: 9000
  maxAttempts: 5
  overlap: allow
  timeout: 5m
  killGraceMs: 100
  shell: /bin/bash
  outputTailBytes: 0
jobs:
  - name: inherits
    schedule: "* * * * *"
    command: "true"
  - name: overrides
    schedule: "* * * * *"
    command: "true"
    timezone: America/New_York
    maxLateMs: 0
    leaseMs: 60000
    heartbeatMs: 1000
    maxAttempts: 1
    overlap: skip
    timeout: 30s
    killGraceMs: 0
    shell: /bin/dash
    outputTailBytes: 1048576
  - name: lease-only
    schedule: "* * * * *"
    command: "true"
    leaseMs: 3000
`)
	athens, _ := time.LoadLocation("Europe/Athens")
	ny, _ := time.LoadLocation("America/New_York")
	type pol struct {
		tz                              string
		loc                             *time.Location
		maxLate, lease, heartbeat, kill time.Duration
		attempts                        int
		overlap, shell                  string
		timeout                         time.Duration
		tail                            int
	}
	got := func(j Job) pol {
		return pol{j.Timezone, j.Location, j.MaxLate, j.Lease, j.Heartbeat, j.KillGrace, j.MaxAttempts, j.Overlap, j.Shell, j.Timeout, j.OutputTailBytes}
	}
	ms := time.Millisecond
	wants := []pol{
		// defaults value > built-in; heartbeat is the inherited lease / 3.
		{"Europe/Athens", athens, 5000 * ms, 9000 * ms, 3000 * ms, 100 * ms, 5, "allow", "/bin/bash", 5 * time.Minute, 0},
		// job value > defaults value.
		{"America/New_York", ny, 0, 60000 * ms, 1000 * ms, 0, 1, "skip", "/bin/dash", 30 * time.Second, 1 << 20},
		// a job's own leaseMs gives its default heartbeat.
		{"Europe/Athens", athens, 5000 * ms, 3000 * ms, 1000 * ms, 100 * ms, 5, "allow", "/bin/bash", 5 * time.Minute, 0},
	}
	for i, w := range wants {
		if g := got(cfg.Jobs[i]); !reflect.DeepEqual(g, w) {
			t.Errorf("job %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// TestClaimTimings: claimSpreadMs (bounded by maxLate) and claimAheadMs
// (bounded by the heartbeat) per job, from the built-in default, defaults,
// the job and the environment.
func TestClaimTimings(t *testing.T) {
	ms := time.Millisecond
	spread := func(j Job) time.Duration { return j.ClaimSpread }
	ahead := func(j Job) time.Duration { return j.ClaimAhead }
	for _, tc := range []struct {
		name, yaml string
		env        []string
		of         func(Job) time.Duration
		want       []time.Duration // per job
	}{
		{"spread: built-in default", "jobs:\n" + job("a"), nil, spread, []time.Duration{10 * ms}},
		{"spread: defaults and job", "defaults: {claimSpreadMs: 40}\njobs:\n" + job("a") + job("b") + "    claimSpreadMs: 0\n" + job("c") + "    claimSpreadMs: 1000\n    maxLateMs: 1001\n",
			nil, spread, []time.Duration{40 * ms, 0, 1000 * ms}},
		{"spread: zero fits any maxLate", "jobs:\n" + job("a") + "    maxLateMs: 0\n    claimSpreadMs: 0\n", nil, spread, []time.Duration{0}},
		{"spread: just below maxLate", "jobs:\n" + job("a") + "    maxLateMs: 100\n    claimSpreadMs: 99\n", nil, spread, []time.Duration{99 * ms}},
		// The built-in default never makes a short maxLate invalid: it
		// shrinks below half of it.
		{"spread: built-in default under a short maxLate", "jobs:\n" + job("a") + "    maxLateMs: 0\n" + job("b") + "    maxLateMs: 15\n" + job("c") + "    maxLateMs: 21\n",
			nil, spread, []time.Duration{0, 7 * ms, 10 * ms}},
		{"spread: env override", "jobs:\n" + job("a"), []string{"ANARCHON_DEFAULTS_CLAIMSPREADMS=0"}, spread, []time.Duration{0}},

		{"ahead: built-in default", "jobs:\n" + job("a"), nil, ahead, []time.Duration{100 * ms}},
		{"ahead: defaults and job", "defaults: {claimAheadMs: 200}\njobs:\n" + job("a") + job("b") + "    claimAheadMs: 0\n" + job("c") + "    claimAheadMs: 1000\n",
			nil, ahead, []time.Duration{200 * ms, 0, 1000 * ms}},
		{"ahead: just below the heartbeat", "jobs:\n" + job("a") + "    heartbeatMs: 100\n    claimAheadMs: 99\n", nil, ahead, []time.Duration{99 * ms}},
		{"ahead: below the default heartbeat", "jobs:\n" + job("a") + "    leaseMs: 900\n    claimAheadMs: 299\n", nil, ahead, []time.Duration{299 * ms}},
		// The built-in default never makes a short heartbeat invalid: it
		// shrinks below half of it.
		{"ahead: built-in default under a short heartbeat", "jobs:\n" + job("a") + "    heartbeatMs: 1\n" + job("b") + "    heartbeatMs: 61\n" + job("c") + "    leaseMs: 300\n",
			nil, ahead, []time.Duration{0, 30 * ms, 49 * ms}},
		{"ahead: env override", "jobs:\n" + job("a"), []string{"ANARCHON_DEFAULTS_CLAIMAHEADMS=0"}, ahead, []time.Duration{0}},
		// RabbitMQ's claims are slower at load: its built-in head start is
		// longer, shrinks the same way, and yields to a value that is set.
		{"ahead: built-in default on RabbitMQ", "backend: {type: rabbitmq}\njobs:\n" + job("a") + job("b") + "    heartbeatMs: 601\n" + job("c") + "    claimAheadMs: 100\n",
			nil, ahead, []time.Duration{500 * ms, 300 * ms, 100 * ms}},
		{"ahead: defaults on RabbitMQ", "backend: {type: rabbitmq}\ndefaults: {claimAheadMs: 50}\njobs:\n" + job("a"), nil, ahead, []time.Duration{50 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.yaml, tc.env...)
			if len(cfg.Jobs) != len(tc.want) {
				t.Fatalf("%d jobs, want %d", len(cfg.Jobs), len(tc.want))
			}
			for i, w := range tc.want {
				if got := tc.of(cfg.Jobs[i]); got != w {
					t.Errorf("job %s: %v, want %v", cfg.Jobs[i].Name, got, w)
				}
			}
		})
	}
}

func TestDefaultHeartbeatInherited(t *testing.T) {
	// An explicit defaults.heartbeatMs is inherited as is, not recomputed
	// from the job's lease.
	cfg := mustParse(t, "defaults: {heartbeatMs: 2000}\njobs:\n"+job("a")+"    leaseMs: 90000\n")
	if cfg.Jobs[0].Heartbeat != 2*time.Second || cfg.Jobs[0].Lease != 90*time.Second {
		t.Errorf("heartbeat %v lease %v", cfg.Jobs[0].Heartbeat, cfg.Jobs[0].Lease)
	}
}

func TestMergeKeysAndAnchors(t *testing.T) {
	cfg := mustParse(t, `x-common: &common
  timezone: Europe/Athens
  maxLateMs: 1000
  env: {A: "1"}
x-tz: &tz America/New_York
jobs:
  - <<: *common
    name: a
    schedule: "* * * * *"
    command: "true"
    maxLateMs: 2000
  - name: b
    <<: [*common]
    schedule: "* * * * *"
    command: "true"
    timezone: *tz
`)
	a, b := cfg.Jobs[0], cfg.Jobs[1]
	if a.Timezone != "Europe/Athens" || a.MaxLate != 2*time.Second || a.Env["A"] != "1" {
		t.Errorf("a: %+v", a)
	}
	if b.Timezone != "America/New_York" || b.MaxLate != time.Second {
		t.Errorf("b: %+v", b)
	}
}

func TestEnvOverrides(t *testing.T) {
	const file = `instance: from-file
namespace: filens
backend:
  type: sqlite
  sqlite: {path: /file.db}
defaults:
  maxLateMs: 1000
jobs:
  - name: a
    schedule: "* * * * *"
    command: "true"
  - name: b
    schedule: "* * * * *"
    command: "true"
    maxLateMs: 7
`
	cfg := mustParse(t, file,
		"PATH=/bin",
		"ANARCHON_INSTANCE=from-env",
		"ANARCHON_NAMESPACE=envns",
		"ANARCHON_LOG_LEVEL=warn",
		"ANARCHON_BACKEND_TYPE=postgres",
		"ANARCHON_BACKEND_POSTGRES_DSN=postgres://u:pw@db/cron",
		"ANARCHON_BACKEND_SQLITE_PATH=/tmp/x.db",
		"ANARCHON_BACKEND_SQLITE_BUSYTIMEOUTMS=250",
		"ANARCHON_BACKEND_RETENTION=48h",
		"ANARCHON_BACKEND_REDIS_STRATEGYOPTIONS_WINDOWMS=5000",
		"ANARCHON_DEFAULTS_MAXLATEMS=30000",
		"ANARCHON_DEFAULTS_TIMEOUT=2m",
		"ANARCHON_SHUTDOWNGRACEMS=",  // empty: ignored
		"ANARCHON_JOB=someone-elses", // set for jobs: not a setting, no warning
	)
	b := cfg.Backend
	if cfg.Instance != "from-env" || cfg.Namespace != "envns" || cfg.Log.Level != "warn" ||
		b.Type != "postgres" || b.Store.(pgclaim.Settings).DSN != "postgres://u:pw@db/cron" ||
		b.sections["sqlite"] != (sqliteclaim.Settings{Path: "/tmp/x.db", BusyTimeout: 250 * time.Millisecond}) ||
		b.Retention != 48*time.Hour || b.sections["redis"].(redisclaim.Settings).WindowMs != 5000 || cfg.ShutdownGrace != 30*time.Second {
		t.Errorf("got %+v", cfg)
	}
	// The env override of defaults reaches the jobs that inherit it; a job's
	// own value still wins.
	if cfg.Jobs[0].MaxLate != 30*time.Second || cfg.Jobs[1].MaxLate != 7*time.Millisecond {
		t.Errorf("maxLate %v %v", cfg.Jobs[0].MaxLate, cfg.Jobs[1].MaxLate)
	}
	if cfg.Jobs[0].Timeout != 2*time.Minute {
		t.Errorf("timeout %v", cfg.Jobs[0].Timeout)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings %q", cfg.Warnings)
	}
}

// TestPostgresSynchronousCommit: backend.postgres.synchronousCommit takes
// PostgreSQL's synchronous_commit levels, written plain or quoted, or from
// the environment; unset it stays empty (the server's setting). Anything
// else is a problem naming the file, the line and the field.
func TestPostgresSynchronousCommit(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        []string
		want       string // the setting, or with wantErr the whole error
		wantErr    bool
	}{
		{name: "unset", yaml: "backend:\n  postgres: {dsn: \"postgres://db/cron\"}\n", want: ""},
		{name: "off, plain", yaml: "backend:\n  postgres:\n    synchronousCommit: off\n", want: "off"},
		{name: "on, plain", yaml: "backend:\n  postgres:\n    synchronousCommit: on\n", want: "on"},
		{name: "local", yaml: "backend:\n  postgres: {synchronousCommit: local}\n", want: "local"},
		{name: "remote_write, quoted", yaml: "backend:\n  postgres: {synchronousCommit: \"remote_write\"}\n", want: "remote_write"},
		{name: "remote_apply", yaml: "backend:\n  postgres: {synchronousCommit: remote_apply}\n", want: "remote_apply"},
		{name: "env overrides the file", yaml: "backend:\n  postgres: {synchronousCommit: on}\n",
			env: []string{"ANARCHON_BACKEND_POSTGRES_SYNCHRONOUSCOMMIT=off"}, want: "off"},
		{name: "bad value", yaml: "namespace: cron\nbackend:\n  type: sqlite\n  postgres:\n    synchronousCommit: async\n", wantErr: true,
			want: `crontab.yaml:5: backend.postgres.synchronousCommit: must be one of on, off, local, remote_write, remote_apply; not "async"`},
		{name: "bad value from env", yaml: "", env: []string{"ANARCHON_BACKEND_POSTGRES_SYNCHRONOUSCOMMIT=yes"}, wantErr: true,
			want: `env ANARCHON_BACKEND_POSTGRES_SYNCHRONOUSCOMMIT: backend.postgres.synchronousCommit: must be one of on, off, local, remote_write, remote_apply; not "yes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = noEnv
			}
			cfg, err := Parse("crontab.yaml", []byte(tc.yaml+"jobs: []\n"), opts(env))
			if tc.wantErr {
				var e *Error
				if !errors.As(err, &e) || e.Field != "backend.postgres.synchronousCommit" || e.Error() != tc.want {
					t.Fatalf("error %v, want %s", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := cfg.Backend.sections["postgres"].(pgclaim.Settings).SynchronousCommit; got != tc.want {
				t.Fatalf("synchronousCommit %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEnvUnknownWarns(t *testing.T) {
	cfg := mustParse(t, "jobs:\n"+job("a"), "ANARCHON_BAKEND_TYPE=redis", "ANARCHON_FOO=1")
	want := []string{
		"environment variable ANARCHON_BAKEND_TYPE matches no setting and is ignored (did you mean ANARCHON_BACKEND_TYPE?)",
		"environment variable ANARCHON_FOO matches no setting and is ignored",
	}
	if !reflect.DeepEqual(cfg.Warnings, want) {
		t.Errorf("warnings\n%q\nwant\n%q", cfg.Warnings, want)
	}
}

// TestEnvThroughViper reads the process environment (Environ nil), which goes
// through viper's env binding, and checks that every setting's variable is
// the one envName names.
func TestEnvThroughViper(t *testing.T) {
	t.Setenv("ANARCHON_BACKEND_TYPE", "redis")
	t.Setenv("ANARCHON_BACKEND_REDIS_STRATEGY", "stream-id")
	t.Setenv("ANARCHON_BACKEND_REDIS_STRATEGYOPTIONS_DURATIONSEC", "60")
	t.Setenv("ANARCHON_DEFAULTS_MAXLATEMS", "10")
	t.Setenv("ANARCHON_NAMESPACE", "")
	cfg, err := Parse("crontab.yaml", []byte("jobs:\n"+job("a")), LoadOptions{Hostname: fixedHost})
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Backend.Store.(redisclaim.Settings); cfg.Backend.Type != "redis" || r.Strategy != "stream-id" ||
		r.DurationSec != 60 || cfg.Jobs[0].MaxLate != 10*time.Millisecond || cfg.Namespace != "cron" {
		t.Errorf("got %+v", cfg)
	}

	// Every setting, with a distinct value, through viper and through an
	// Environ list: the two must agree.
	paths := scalarPaths()
	names := map[string]bool{}
	var environ []string
	for _, ps := range paths {
		n := envName(ps.path)
		if names[n] {
			t.Errorf("two settings share %s", n)
		}
		names[n] = true
		t.Setenv(n, "v-"+ps.path)
		environ = append(environ, n+"=v-"+ps.path)
	}
	viaViper := newEnvLayer(nil, paths)
	viaList := newEnvLayer(environ, paths)
	for _, ps := range paths {
		n1, v1, ok1 := viaViper.lookup(ps.path)
		n2, v2, ok2 := viaList.lookup(ps.path)
		if !ok1 || !ok2 || v1 != v2 || n1 != n2 || v1 != "v-"+ps.path {
			t.Errorf("%s: viper (%s, %q, %v), list (%s, %q, %v)", ps.path, n1, v1, ok1, n2, v2, ok2)
		}
	}
	if len(paths) != 80 {
		t.Errorf("%d overridable settings, want 80: update the docs' table", len(paths))
	}
}

func TestEnvNames(t *testing.T) {
	for path, want := range map[string]string{
		"instance":                               "ANARCHON_INSTANCE",
		"backend.type":                           "ANARCHON_BACKEND_TYPE",
		"backend.sqlite.path":                    "ANARCHON_BACKEND_SQLITE_PATH",
		"backend.postgres.dsn":                   "ANARCHON_BACKEND_POSTGRES_DSN",
		"defaults.maxLateMs":                     "ANARCHON_DEFAULTS_MAXLATEMS",
		"backend.redis.strategyOptions.windowMs": "ANARCHON_BACKEND_REDIS_STRATEGYOPTIONS_WINDOWMS",
	} {
		if got := envName(path); got != want {
			t.Errorf("envName(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestDefaultInstance(t *testing.T) {
	cfg, err := Parse("c.yaml", nil, LoadOptions{Environ: noEnv, Hostname: func() (string, error) { return "", errors.New("no uts") }})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^anarchond-[0-9a-f]{4}$`).MatchString(cfg.Instance) {
		t.Errorf("instance %q", cfg.Instance)
	}
	if len(cfg.Warnings) != 2 || !strings.Contains(strings.Join(cfg.Warnings, "\n"), "cannot read the hostname") {
		t.Errorf("warnings %q", cfg.Warnings)
	}
	// The suffix is the same on every load of one crontab on one host,
	// and differs with the crontab's path and with the machine.
	on := func(file, machine string) string {
		t.Helper()
		cfg, err := Parse(file, nil, LoadOptions{Environ: noEnv, Hostname: fixedHost,
			MachineID: func() (string, error) { return machine, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Instance
	}
	a := on("/etc/anarchon/crontab.yaml", "m1")
	if a2 := on("/etc/anarchon/crontab.yaml", "m1"); a2 != a || !regexp.MustCompile(`^testhost-[0-9a-f]{4}$`).MatchString(a) {
		t.Errorf("default instance %q then %q: want the same testhost-<4 hex> on every load", a, a2)
	}
	if b := on("/etc/anarchon/other.yaml", "m1"); b == a {
		t.Errorf("two crontabs of one host both get %q", a)
	}
	if c := on("/etc/anarchon/crontab.yaml", "m2"); c == a {
		t.Errorf("two machines of one hostname both get %q", a)
	}
	// Without a machine id, the hostname stands in for it.
	noID := func() (string, error) { return "", errors.New("no machine id") }
	c1, err1 := Parse("/x/c.yaml", nil, LoadOptions{Environ: noEnv, Hostname: fixedHost, MachineID: noID})
	c2, err2 := Parse("/x/c.yaml", nil, LoadOptions{Environ: noEnv, Hostname: fixedHost, MachineID: noID})
	if err1 != nil || err2 != nil || c1.Instance != c2.Instance {
		t.Errorf("without a machine id: %q then %q (%v, %v)", c1.Instance, c2.Instance, err1, err2)
	}
	// A host name with white space still gives a valid id.
	cfg, err = Parse("c.yaml", nil, LoadOptions{Environ: noEnv, Hostname: func() (string, error) { return "my host\n", nil }})
	if err != nil || !strings.HasPrefix(cfg.Instance, "my-host-") {
		t.Errorf("instance %q, err %v", cfg.Instance, err)
	}
}

func TestJobLinesAndIndexes(t *testing.T) {
	cfg := mustParse(t, "jobs:\n"+job("a")+"\n"+job("b"))
	if cfg.Jobs[0].Line != 2 || cfg.Jobs[1].Line != 6 || cfg.Jobs[1].Index != 1 {
		t.Errorf("lines %d %d index %d", cfg.Jobs[0].Line, cfg.Jobs[1].Line, cfg.Jobs[1].Index)
	}
}

func TestIDMPWithinLimits(t *testing.T) {
	// 720 slots an hour, 1440 a day: fine for idmp.
	cfg := mustParse(t, `backend:
  type: redis
  redis: {strategy: idmp, strategyOptions: {durationSec: 3600}}
jobs:
  - {name: a, schedule: "*/5 * * * * *", command: "true"}
  - {name: b, schedule: "* * * * *", command: "true"}
  - {name: c, schedule: "@every 1s", command: "true", timezone: Europe/Athens}
`)
	if len(cfg.Jobs) != 3 {
		t.Fatal(cfg.Jobs)
	}
}

func TestErrorsAs(t *testing.T) {
	_, err := Parse("c.yaml", []byte("bogus: 1\n"), opts(nil))
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 {
		t.Fatalf("errors.As(Errors): %v", err)
	}
	var pes *Errors
	if !errors.As(err, &pes) || len(*pes) != 1 {
		t.Fatalf("errors.As(*Errors): %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line != 1 || e.Field != "bogus" {
		t.Fatalf("errors.As(*Error): %v", err)
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "crontab.yaml", Line: 12, Column: 15, Job: "sync", Field: "jobs[2].schedule", Msg: `bad schedule "*/61 * * * *": x`},
			`crontab.yaml:12: job "sync": jobs[2].schedule: bad schedule "*/61 * * * *": x`},
		{Error{File: "crontab.yaml", Line: 3, Field: "backend.sqlite.busyTimeoutMs", Msg: "must be 0 or more, not -1"},
			`crontab.yaml:3: backend.sqlite.busyTimeoutMs: must be 0 or more, not -1`},
		{Error{File: "crontab.yaml", Msg: "file is writable"}, `crontab.yaml: file is writable`},
		{Error{File: "crontab.yaml", Env: "ANARCHON_BACKEND_TYPE", Field: "backend.type", Msg: "bad"},
			`env ANARCHON_BACKEND_TYPE: backend.type: bad`},
		{Error{Line: 4, Msg: "x"}, `line 4: x`},
		{Error{Msg: "x"}, `x`},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
	es := Errors{{File: "a", Line: 1, Msg: "x"}, {File: "a", Line: 2, Msg: "y"}}
	if got := es.Error(); got != "a:1: x\na:2: y" {
		t.Errorf("Errors.Error() = %q", got)
	}
}

// The built-in overlap is skip where the store keeps leases and allow on
// the claim-only stores, which cannot enforce skip.
func TestOverlapDefaultFollowsTheBackend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ backend, want string }{
		{"type: sqlite", "skip"},
		{"type: postgres\n  postgres:\n    dsn: postgres://localhost/test", "skip"},
		{"type: redis\n  redis:\n    strategy: lease", "skip"},
		{"type: redis\n  redis:\n    strategy: stream-id", "allow"},
		{"type: redis\n  redis:\n    strategy: script", "allow"},
		{"type: redis\n  redis:\n    strategy: auto", "allow"},
		{"type: nats", "allow"},
		{"type: rabbitmq", "allow"},
	} {
		cfg, err := Parse("c.yaml", []byte("backend:\n  "+tc.backend+"\njobs:\n"+job("a")), LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.backend, err)
		}
		if got := cfg.Jobs[0].Overlap; got != tc.want {
			t.Errorf("%s: overlap %q, want %q", tc.backend, got, tc.want)
		}
	}
}
