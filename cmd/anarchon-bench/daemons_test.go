package main

import (
	"cmp"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/pgclaim"
)

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tanarchond\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t 1300000 kB\nVmRSS:\t   23456 kB\nRssAnon:\t   10000 kB\n"
	got, err := parseVmRSS([]byte(status))
	if err != nil || got != 23456*1024 {
		t.Errorf("parseVmRSS = %d, %v; want %d", got, err, 23456*1024)
	}
	for _, bad := range []string{"Name:\tkthreadd\nState:\tS\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := parseVmRSS([]byte(bad)); err == nil {
			t.Errorf("parseVmRSS(%q): no error", bad)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses: fields count from the
	// last ')'. utime 1234, stime 567 (fields 14, 15); cutime 99 after them.
	stat := "4242 (we (ird) name) S 1 4242 4242 0 -1 4194560 1200 0 3 0 1234 567 99 11 20 0 9 0 1000 1300000000 5000 18446744073709551615\n"
	u, s, err := parseStatCPU([]byte(stat))
	if err != nil || u != 1234 || s != 567 {
		t.Errorf("parseStatCPU = %d, %d, %v; want 1234, 567", u, s, err)
	}
	for _, bad := range []string{"4242 noparen S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 1200 0 3 0 u 567 99"} {
		if _, _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
}

func TestProcOfSelf(t *testing.T) {
	// The parsers against the kernel's real files (Linux only).
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc:", err)
	}
	rss, err := procRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Errorf("procRSS(self) = %d, %v", rss, err)
	}
	if _, err := procCPUTicks(os.Getpid()); err != nil {
		t.Errorf("procCPUTicks(self): %v", err)
	}
}

func TestMetricSum(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 27
go_goroutines_extra 5
anarchon_runs_total{job="a",status="succeeded"} 10
anarchon_runs_total{job="b",status="succeeded"} 5
anarchon_runs_total{job="b",status="failed"} 2
anarchon_config_reloads_total{result="error"} 0
anarchon_config_reloads_total{result="ok"} 3
anarchon_run_duration_seconds_bucket{job="a",le="0.1"} 4
process_resident_memory_bytes 2.3456e+07 1700000000000
`
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
		ok     bool
	}{
		{"go_goroutines", nil, 27, true},
		{"anarchon_runs_total", nil, 17, true},
		{"anarchon_runs_total", []string{`status="succeeded"`}, 15, true},
		{"anarchon_runs_total", []string{`job="b"`, `status="failed"`}, 2, true},
		{"anarchon_config_reloads_total", []string{`result="ok"`}, 3, true},
		{"anarchon_run_duration_seconds", nil, 0, false},
		{"process_resident_memory_bytes", nil, 23456000, true},
		{"anarchon_missed_slots_total", nil, 0, false},
	} {
		got, ok := metricSum(text, tc.name, tc.labels...)
		if got != tc.want || ok != tc.ok {
			t.Errorf("metricSum(%s, %v) = %v, %v; want %v, %v", tc.name, tc.labels, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRedisCommandCalls(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_ping:calls=12,usec=30,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=100,usec=900,usec_per_call=9.00,rejected_calls=1,failed_calls=2\r\n" +
		"cmdstat_info:calls=3,usec=100,usec_per_call=33.33,rejected_calls=0,failed_calls=0\r\n"
	got, err := redisCommandCalls(info)
	if err != nil || got != 115 {
		t.Errorf("redisCommandCalls = %d, %v; want 115 (rejected_calls and failed_calls are not calls=)", got, err)
	}
	if _, err := redisCommandCalls("# Commandstats\r\n"); err == nil {
		t.Error("no cmdstat line: no error")
	}
}

func TestDSNWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/bench_1?sslmode=disable"},
		{"postgresql://u:p%40ss@h/db", "postgresql://u:p%40ss@h/bench_1"},
		{"postgres://h:5432", "postgres://h:5432/bench_1"},
		{"host=127.0.0.1 user=postgres dbname=test", "host=127.0.0.1 user=postgres dbname=test dbname='bench_1'"},
	} {
		got, err := dsnWithDatabase(tc.in, "bench_1")
		if err != nil || got != tc.want {
			t.Errorf("dsnWithDatabase(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestIdleSchedule(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	span, margin := 3*time.Minute, 5*time.Minute
	for _, tc := range []struct{ now, want string }{
		{"2026-11-30T03:00:00Z", "0 0 1 1 *"},
		{"2026-12-31T23:58:00Z", "0 0 1 7 *"}, // 1 January falls in the window
		{"2027-01-01T00:03:00Z", "0 0 1 7 *"}, // ... or was just caught up at start
		{"2027-06-30T23:59:00Z", "0 0 1 1 *"},
		{"2027-03-15T12:01:00Z", "0 0 1 1 *"},
	} {
		got, err := idleSchedule(at(tc.now), span, margin)
		if err != nil || got != tc.want {
			t.Errorf("idleSchedule(%s) = %q, %v; want %q", tc.now, got, err, tc.want)
		}
	}
}

func TestEverySecond(t *testing.T) {
	from := time.UnixMilli(10_400)
	got := everySecond([]string{"a", "b"}, from, time.UnixMilli(12_000))
	want := []runKey{{"a", 10_000}, {"b", 10_000}, {"a", 11_000}, {"b", 11_000}, {"a", 12_000}, {"b", 12_000}}
	if !slices.Equal(got, want) {
		t.Errorf("everySecond = %v, want %v", got, want)
	}
}

func TestDaemonEnv(t *testing.T) {
	t.Setenv("ANARCHON_CONFIG", "/etc/x.yaml")
	t.Setenv("BASH_ENV", "/tmp/rc")
	t.Setenv("LC_ALL", "de_DE.UTF-8")
	env := daemonEnv()
	for _, kv := range env {
		if strings.HasPrefix(kv, "ANARCHON_") || strings.HasPrefix(kv, "BASH_ENV=") || kv == "LC_ALL=de_DE.UTF-8" {
			t.Errorf("daemonEnv keeps %q", kv)
		}
	}
	if !slices.Contains(env, "LC_ALL=C") {
		t.Error("daemonEnv: no LC_ALL=C")
	}
}

// TestCrontabLoads checks that the crontabs the measurements write are
// valid anarchon configs with what was asked, for every backend's block.
func TestCrontabLoads(t *testing.T) {
	dir := t.TempDir()
	stores := []*daemonStore{
		{namespace: "anarchon-bench-1", backend: map[string]any{"type": "sqlite", "sqlite": map[string]any{"path": filepath.Join(dir, "a.db")}}},
		{namespace: "anarchon-bench-2", backend: map[string]any{"type": "postgres", "postgres": map[string]any{"dsn": "postgres://postgres@127.0.0.1:5432/anarchon_bench_2?sslmode=disable"}}},
		{namespace: "anarchon-bench-3", backend: map[string]any{"type": "redis", "redis": map[string]any{"url": "redis://127.0.0.1:6379/0", "strategy": "stream-id"}}},
		{namespace: "anarchon-bench-4", backend: map[string]any{"type": "nats", "nats": map[string]any{"url": "nats://127.0.0.1:4222", "stream": "ANARCHON_BENCH_4"}}},
		{namespace: "anarchon-bench-5", backend: map[string]any{"type": "rabbitmq", "rabbitmq": map[string]any{"url": "amqp://guest:guest@127.0.0.1:5672/", "slotTtlMs": 300000}}},
		{namespace: "anarchon-bench-6", backend: map[string]any{"type": "postgres", "postgres": map[string]any{"dsn": "postgres://postgres@127.0.0.1:5432/anarchon_bench_6?sslmode=disable", "synchronousCommit": "off"}}},
	}
	probe := lagProbeArgv("/bin/bash", filepath.Join(dir, "it's a.rec"))
	for i, st := range stores {
		path := filepath.Join(dir, "crontab.yaml")
		jobs := numberedJobs("lag", 3, lagSchedule, probe)
		for k := range jobs {
			jobs[k].Overlap = lagOverlap
		}
		if i == 0 {
			jobs = numberedJobs("idle", 10000, "0 0 1 1 *", []string{"true"})
		}
		if err := writeCrontab(path, benchCrontab("bench-1", "warn", "127.0.0.1:19999", st, jobs)); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("crontab mode %v, %v; want 0600", fi.Mode().Perm(), err)
		}
		cfg, err := config.Load(path, config.LoadOptions{Environ: []string{}})
		if err != nil {
			t.Fatalf("%s: %v", st.backend["type"], err)
		}
		if cfg.Backend.Type != st.backend["type"] || cfg.Namespace != st.namespace || cfg.Instance != "bench-1" ||
			cfg.Metrics.Listen != "127.0.0.1:19999" || cfg.Log.Level != "warn" || cfg.Log.Format != "json" ||
			cfg.ShutdownGrace != daemonShutdownGrace || len(cfg.Jobs) != len(jobs) {
			t.Errorf("%s: config %+v", st.backend["type"], cfg)
			continue
		}
		if pg, ok := st.backend["postgres"].(map[string]any); ok {
			if want, _ := pg["synchronousCommit"].(string); cfg.Backend.Store.(pgclaim.Settings).SynchronousCommit != want {
				t.Errorf("postgres synchronousCommit %q, want %q", cfg.Backend.Store.(pgclaim.Settings).SynchronousCommit, want)
			}
		}
		j := cfg.Jobs[len(cfg.Jobs)-1]
		want := jobs[len(jobs)-1]
		wantOverlap := cmp.Or(want.Overlap, "skip")
		if j.Name != want.Name || j.Schedule != want.Schedule || !slices.Equal(j.Args, want.Args) || j.Overlap != wantOverlap {
			t.Errorf("%s: last job %s %q %q %s, want %s %q %q %s", st.backend["type"], j.Name, j.Schedule, j.Args, j.Overlap,
				want.Name, want.Schedule, want.Args, wantOverlap)
		}
	}
	// No jobs: "jobs: []" loads.
	path := filepath.Join(dir, "empty.yaml")
	if err := writeCrontab(path, benchCrontab("bench-0", "info", "127.0.0.1:19998", stores[0], nil)); err != nil {
		t.Fatal(err)
	}
	if cfg, err := config.Load(path, config.LoadOptions{Environ: []string{}}); err != nil || len(cfg.Jobs) != 0 {
		t.Errorf("empty crontab: %v", err)
	}
}

func TestMonitorClient(t *testing.T) {
	for _, tc := range []struct {
		line, want string
		ok         bool
	}{
		{`+1700000000.123456 [0 127.0.0.1:54398] "PING"` + "\r\n", "127.0.0.1:54398", true},
		{`+1700000000.123456 [0 lua] "HSET" "k" "f" "v"` + "\r\n", "lua", true},
		{`+1700000000.123456 [3 unix:/run/redis.sock] "GET" "a b]"` + "\r\n", "unix:/run/redis.sock", true},
		{"+OK\r\n", "", false},
		{"-ERR no\r\n", "", false},
	} {
		got, ok := monitorClient(tc.line)
		if got != tc.want || ok != tc.ok {
			t.Errorf("monitorClient(%q) = %q, %v; want %q, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseProcNetTCP(t *testing.T) {
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 6314 1 00000000cae14855 100 0 0 10 0
   1: 0100007F:D4FE 0100007F:18EB 01 00000000:00000000 00:00000000 00000000     0        0 696612 1 0000000026037c79 20 4 30 10 -1
`
	tcp6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:9C40 00000000000000000000000001000000:18EB 01 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 20 4 30 10 -1
`
	got := append(parseProcNetTCP([]byte(tcp)), parseProcNetTCP([]byte(tcp6))...)
	want := []procTCPEntry{{6379, 0, 6314}, {54526, 6379, 696612}, {40000, 6379, 777}}
	if !slices.Equal(got, want) {
		t.Errorf("parseProcNetTCP = %v, want %v", got, want)
	}
}

func TestProcTCPPortsOfSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/net/tcp"); err != nil {
		t.Skip("no /proc:", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, rport, _ := net.SplitHostPort(ln.Addr().String())
	_, lport, _ := net.SplitHostPort(c.LocalAddr().String())
	rp, _ := strconv.Atoi(rport)
	lp, _ := strconv.Atoi(lport)
	ports, err := procTCPPorts(os.Getpid(), rp)
	if err != nil || len(ports) != 1 || !ports[lp] {
		t.Errorf("procTCPPorts(self, %d) = %v, %v; want {%d}", rp, ports, err, lp)
	}
}

// TestSectionDefaults: postgres-async is measured by the claim sections by
// default, but by start lag and scale only when their lists name it.
func TestSectionDefaults(t *testing.T) {
	rs, err := selectRows(*backendFlag)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rs, func(r row) bool { return r.name == "postgres-async" })
	if i < 1 || rs[i-1].name != "postgres" {
		t.Fatalf("default rows %v: want postgres-async right after postgres", rowNames())
	}
	async, pg := rs[i], rs[i-1]
	if sectionMeasures("", async) || !sectionMeasures("", pg) {
		t.Error("an empty section list must take postgres and leave postgres-async out")
	}
	if !sectionMeasures("sqlite,postgres-async", async) || sectionMeasures("sqlite,postgres-async", pg) {
		t.Error("a section list must take what it names and nothing else")
	}
}
