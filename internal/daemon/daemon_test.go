package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	_ "github.com/anarchon/anarchon/internal/sqliteclaim"
	"github.com/anarchon/anarchon/internal/supervise"
)

// The test binary is also the jobs' supervisor.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(supervise.Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

const crontab = `metrics: {listen: "127.0.0.1:0"}
watch: true
backend:
  sqlite: {path: cron.db}
defaults: {maxLateMs: 2000}
jobs:
  - name: tick
    schedule: "* * * * * *"
    command: echo "$ANARCHON_SLOT_MS" >> ticks.log
    workdir: "@DIR@"
`

// notifications collects what the daemon tells systemd.
func notifications(t *testing.T) <-chan string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	ch := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			ch <- string(buf[:n])
		}
	}()
	return ch
}

// await reads notifications until one starts with prefix.
func await(t *testing.T, ch <-chan string, prefix string) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case s := <-ch:
			if strings.HasPrefix(s, prefix) {
				return s
			}
		case <-deadline:
			t.Fatalf("no %q notification", prefix)
			return ""
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// awaitMetric polls /metrics until it holds line.
func awaitMetric(t *testing.T, base, line string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := get(t, base+"/metrics")
		if strings.Contains(body, line) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %q", line)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The daemon in-process: systemd notifications, metrics and health, and
// reloads by SIGHUP and by the file changing, a bad one keeping the old
// crontab running.
func TestDaemonNotifiesServesAndReloads(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(wd) })
	file := filepath.Join(dir, "cron.yaml")
	write := func(body string) {
		t.Helper()
		// Written beside and renamed over, as editors do.
		tmp := file + ".tmp"
		body = strings.ReplaceAll(body, "@DIR@", dir) // a job runs in its home without workdir
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(crontab)
	load := func() (*config.Config, error) { return config.Load(file, config.LoadOptions{Environ: []string{}}) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	notes := notifications(t)
	core, logs := observer.New(zap.InfoLevel)
	exe, _ := os.Executable()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, Options{Log: zap.New(core), Clock: clock.Real{}, Environ: os.Environ(),
			Supervisor: []string{exe, "supervise", "--"}, Reload: load})
	}()

	if s := await(t, notes, "READY=1"); !strings.Contains(s, "STATUS=scheduling 1 job(s) on sqlite") {
		t.Errorf("READY notification %q", s)
	}
	serving := logs.FilterMessage("serving /metrics, /healthz and /readyz").All()
	if len(serving) != 1 {
		t.Fatal("the metrics address was not logged")
	}
	base := "http://" + serving[0].ContextMap()["addr"].(string)
	awaitMetric(t, base, `anarchon_claims_total{job="tick",outcome="won"}`)
	awaitMetric(t, base, `anarchon_runs_total{job="tick",status="succeeded"}`)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, base+path); code != 200 {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	_, body := get(t, base+"/metrics")
	for _, name := range []string{"anarchon_claim_duration_seconds", "anarchon_schedule_lag_seconds",
		"anarchon_run_duration_seconds", "anarchon_lease_renewals_total", "anarchon_fenced_total",
		"anarchon_clock_skew_seconds", "anarchon_config_reloads_total", "go_goroutines"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	// SIGHUP with a new job: RELOADING, then READY with two jobs.
	write(strings.Replace(crontab, "watch: true", "watch: false", 1) + `  - name: tock
    schedule: "* * * * * *"
    command: "true"
`)
	// The file watch may have reloaded already; SIGHUP reloads again.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	await(t, notes, "RELOADING=1\nMONOTONIC_USEC=")
	await(t, notes, "READY=1\nSTATUS=scheduling 2 job(s)")
	awaitMetric(t, base, `anarchon_claims_total{job="tock",outcome="won"}`)

	// A bad file is refused by the watch (still on from the first
	// crontab): counted, logged with its place, the old jobs keep running.
	write("jobs:\n  - name: tick\n    schedule: \"*/61 * * * *\"\n    command: \"true\"\n")
	await(t, notes, "READY=1\nSTATUS=reload refused")
	awaitMetric(t, base, `anarchon_config_reloads_total{result="error"} 1`)
	if n := logs.FilterMessage("reload refused: the old crontab keeps running").Len(); n != 1 {
		t.Errorf("%d refusal log entries, want 1", n)
	}
	before := len(strings.Split(readFile(t, "ticks.log"), "\n"))
	deadline := time.Now().Add(10 * time.Second)
	for len(strings.Split(readFile(t, "ticks.log"), "\n")) < before+2 {
		if time.Now().After(deadline) {
			t.Fatal("the old crontab stopped running after a bad reload")
		}
		time.Sleep(50 * time.Millisecond)
	}

	cancel()
	await(t, notes, "STOPPING=1")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("Run did not return")
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestJobEnvironHidesSystemd(t *testing.T) {
	got := jobEnviron([]string{"PATH=/bin", "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=30000000", "WATCHDOG_PID=1", "HOME=/root"})
	if strings.Join(got, " ") != "PATH=/bin HOME=/root" {
		t.Fatalf("jobEnviron = %v", got)
	}
}
