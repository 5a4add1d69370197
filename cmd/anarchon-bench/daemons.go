package main

// What the daemon measurements (lag.go, scale.go) share: building
// anarchond once, writing crontabs, starting and stopping daemon processes,
// reading /proc and /metrics, and each backend's fresh namespace for
// daemons, with the store-side operation counter where the store has one.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/anarchon/anarchon/internal/rabbitclaim"
	"github.com/anarchon/anarchon/internal/schedule"
	"github.com/anarchon/anarchon/internal/testserver"
)

// daemonProgress receives one line per step of the daemon measurements (they
// take minutes).
var daemonProgress io.Writer = os.Stderr

func daemonLogf(format string, args ...any) {
	fmt.Fprintf(daemonProgress, "anarchon-bench: "+format+"\n", args...)
}

// Timeouts of the daemon measurements' steps.
const (
	daemonReadyTimeout  = 2 * time.Minute // /readyz answers 200 (10,000 jobs parse, a slow store)
	daemonReloadTimeout = 30 * time.Second
	daemonStopTimeout   = 60 * time.Second // after SIGTERM; then SIGKILL
	daemonShutdownGrace = 10 * time.Second // the crontab's shutdownGraceMs
	metricsTimeout      = 5 * time.Second
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// ---------------------------------------------------------------------------
// Building anarchond.

var daemonBuild struct {
	mu       sync.Mutex
	dir, bin string
}

// anarchondBinary builds ./cmd/anarchond of the module the bench runs in
// (found with `go env GOMOD`), and ./cmd/anarchon-supervise beside it, once
// per process, into a temporary directory, and returns anarchond's path.
// Every later call returns the same binary, so that every measurement of one
// run uses the same build even while the source tree changes.
// removeDaemonBuild removes it.
func anarchondBinary(ctx context.Context) (string, error) {
	daemonBuild.mu.Lock()
	defer daemonBuild.mu.Unlock()
	if daemonBuild.bin != "" {
		if _, err := os.Stat(daemonBuild.bin); err == nil {
			return daemonBuild.bin, nil
		}
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside the anarchon module; run the bench from the repository")
	}
	dir, err := os.MkdirTemp("", "anarchon-bench-build-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "anarchond")
	// anarchon-supervise beside anarchond, as installed: the daemons start
	// their jobs under it.
	for _, name := range []string{"anarchond", "anarchon-supervise"} {
		daemonLogf("building %s (go build ./cmd/%s in %s)...", name, name, filepath.Dir(gomod))
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Dir = filepath.Dir(gomod)
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("go build ./cmd/%s: %w: %s", name, err, strings.TrimSpace(string(out)))
		}
	}
	daemonBuild.dir, daemonBuild.bin = dir, bin
	return bin, nil
}

// removeDaemonBuild removes the binary anarchondBinary built (call it once
// the daemon measurements are over; the next call builds again).
func removeDaemonBuild() {
	daemonBuild.mu.Lock()
	defer daemonBuild.mu.Unlock()
	if daemonBuild.dir != "" {
		os.RemoveAll(daemonBuild.dir)
	}
	daemonBuild.dir, daemonBuild.bin = "", ""
}

// ---------------------------------------------------------------------------
// Crontabs.

// crontabFile is the subset of the config file the measurements write (see
// docs/configuration.md); yaml.v3 writes it, so every string is quoted as
// YAML needs.
type crontabFile struct {
	Instance        string         `yaml:"instance"`
	Namespace       string         `yaml:"namespace"`
	ShutdownGraceMs int64          `yaml:"shutdownGraceMs"`
	Metrics         crontabMetrics `yaml:"metrics"`
	Log             crontabLog     `yaml:"log"`
	Backend         map[string]any `yaml:"backend"`
	Defaults        map[string]any `yaml:"defaults,omitempty"`
	Jobs            []crontabJob   `yaml:"jobs"`
}

type crontabMetrics struct {
	Listen string `yaml:"listen"`
}

type crontabLog struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// crontabJob is one job run as an argv (args:, no shell of the daemon's).
type crontabJob struct {
	Name     string   `yaml:"name"`
	Schedule string   `yaml:"schedule"`
	Args     []string `yaml:"args,flow"`
	Overlap  string   `yaml:"overlap,omitempty"` // empty: the default, skip
}

// benchCrontab is the crontab of one bench daemon: JSON logs at level, the
// metrics on metricsAddr, the store's backend block, and jobs.
func benchCrontab(instance, level, metricsAddr string, st *daemonStore, jobs []crontabJob) crontabFile {
	if jobs == nil {
		jobs = []crontabJob{} // "jobs: []", not "jobs: null"
	}
	f := crontabFile{
		Instance: instance, Namespace: st.namespace, ShutdownGraceMs: daemonShutdownGrace.Milliseconds(),
		Metrics: crontabMetrics{Listen: metricsAddr},
		Log:     crontabLog{Level: level, Format: "json"},
		Backend: st.backend, Jobs: jobs,
	}
	if *aheadFlag >= 0 {
		f.Defaults = map[string]any{"claimAheadMs": *aheadFlag}
	}
	return f
}

// numberedJobs is n jobs named prefix-0000... on schedule, each running
// args.
func numberedJobs(prefix string, n int, sched string, args []string) []crontabJob {
	jobs := make([]crontabJob, n)
	for i := range jobs {
		jobs[i] = crontabJob{Name: numberedJobName(prefix, i), Schedule: sched, Args: args}
	}
	return jobs
}

func numberedJobName(prefix string, i int) string { return fmt.Sprintf("%s-%04d", prefix, i) }

func crontabJobNames(jobs []crontabJob) []string {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	return names
}

// writeCrontab writes c to path, mode 0600 (anarchond refuses a crontab
// that group or others can write), through a rename so that a daemon never
// reads half a file.
func writeCrontab(path string, c crontabFile) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// everySecond lists the pairs (job, s) for every whole second s from
// from (rounded down) to to: the runs that jobs scheduled every second may
// have claimed in between (for the RabbitMQ cleanup, which deletes one
// gate queue per run).
func everySecond(jobs []string, from, to time.Time) []runKey {
	var out []runKey
	for s := from.Truncate(time.Second); !s.After(to); s = s.Add(time.Second) {
		for _, j := range jobs {
			out = append(out, runKey{j, s.UnixMilli()})
		}
	}
	return out
}

// idleSchedules are yearly schedules, at least two months apart.
var idleSchedules = []string{"0 0 1 1 *", "0 0 1 7 *", "0 12 15 3 *"}

// idleSchedule returns a schedule with no slot from margin before now to
// span plus margin after it: the jobs of the idle measurement are never
// due during it, nor among the slots a daemon catches up at start (those
// of the last maxLate, 60 s by default, inside margin).
func idleSchedule(now time.Time, span, margin time.Duration) (string, error) {
	for _, expr := range idleSchedules {
		s, err := schedule.Parse(expr, time.UTC)
		if err != nil {
			return "", err
		}
		if len(schedule.Between(s, now.Add(-margin), now.Add(span+margin), 1)) == 0 {
			return expr, nil
		}
	}
	return "", fmt.Errorf("no idle schedule among %q fits %v around %v", idleSchedules, span, now)
}

// ---------------------------------------------------------------------------
// Daemon processes.

// daemonEnv is the environment of the bench's daemons, and so of their
// jobs, and of the forker's jobs: the bench's own without ANARCHON_*
// (which would override the crontab) and BASH_ENV/ENV (a file bash would
// read at start), with LC_ALL=C (bash writes $EPOCHREALTIME with the
// locale's decimal point).
func daemonEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "ANARCHON_") || strings.HasPrefix(kv, "BASH_ENV=") ||
			strings.HasPrefix(kv, "ENV=") || strings.HasPrefix(kv, "LC_ALL=")
	})
	return append(env, "LC_ALL=C")
}

// benchDaemon is one running anarchond.
type benchDaemon struct {
	name    string
	dir     string // holds crontab.yaml and daemon.log
	cfg     string
	log     string
	addr    string // metrics
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // valid after exited
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startDaemon writes the crontab made by mk (given the metrics address)
// into dir/<name>/crontab.yaml and starts `anarchond run` on it, its
// output into daemon.log beside it. The process gets SIGTERM if the bench
// dies.
func startDaemon(bin, dir, name string, mk func(addr string) crontabFile) (*benchDaemon, error) {
	d := &benchDaemon{name: name, dir: filepath.Join(dir, name), exited: make(chan struct{})}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return nil, err
	}
	d.cfg, d.log = filepath.Join(d.dir, "crontab.yaml"), filepath.Join(d.dir, "daemon.log")
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	d.addr = addr
	if err := writeCrontab(d.cfg, mk(addr)); err != nil {
		return nil, err
	}
	logf, err := os.Create(d.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own copy
	d.cmd = exec.Command(bin, "run", "--config", d.cfg)
	d.cmd.Dir = d.dir
	d.cmd.Env = daemonEnv()
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	return d, nil
}

func (d *benchDaemon) pid() int { return d.cmd.Process.Pid }

// logTail is the end of the daemon's output, for errors.
func (d *benchDaemon) logTail() string {
	b, _ := os.ReadFile(d.log)
	const keep = 1500
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return strings.TrimSpace(string(b))
}

// failed describes a daemon that exited or did not do what was asked.
func (d *benchDaemon) failed(what string) error {
	select {
	case <-d.exited:
		return fmt.Errorf("%s: %s: exited (%v); its log ends: %s", d.name, what, d.waitErr, d.logTail()) //nolint:errorlint // waitErr is nil after a clean exit
	default:
		return fmt.Errorf("%s: %s; its log ends: %s", d.name, what, d.logTail())
	}
}

// waitReady waits until /readyz answers 200: the store answered and the
// crontab is scheduled.
func (d *benchDaemon) waitReady(ctx context.Context) error {
	c := http.Client{Timeout: time.Second}
	return d.poll(ctx, 50*time.Millisecond, daemonReadyTimeout, "not ready", "/readyz not 200", func() (bool, error) {
		if resp, err := c.Get("http://" + d.addr + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body) // drained so that the connection is reused
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		}
		return false, nil // not listening yet: asked again
	})
}

// poll calls check every interval until it answers true or an error,
// the daemon exits (an error naming onExit), ctx ends, or timeout passes
// (an error naming late and the timeout).
func (d *benchDaemon) poll(ctx context.Context, every, timeout time.Duration, onExit, late string, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok, err := check(); ok || err != nil {
			return err
		}
		select {
		case <-d.exited:
			return d.failed(onExit)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
		if time.Now().After(deadline) {
			return d.failed(fmt.Sprintf("%s within %v", late, timeout))
		}
	}
}

// metrics reads the daemon's /metrics.
func (d *benchDaemon) metrics(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("/metrics: %s", resp.Status)
	}
	return string(b), err
}

// metric reads one metric's sum over the series having every label
// (`key="value"`).
func (d *benchDaemon) metric(ctx context.Context, name string, labels ...string) (float64, error) {
	text, err := d.metrics(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", d.name, err)
	}
	v, _ := metricSum(text, name, labels...)
	return v, nil
}

// reload replaces the daemon's crontab with c and sends SIGHUP, then waits
// until anarchon_config_reloads_total{result="ok"} went up. The new jobs'
// first slots are the ones after the instant the scheduler had reached:
// no catch-up of the last maxLate, as at start.
func (d *benchDaemon) reload(ctx context.Context, c crontabFile) error {
	before, err := d.metric(ctx, "anarchon_config_reloads_total", `result="ok"`)
	if err != nil {
		return err
	}
	if err := writeCrontab(d.cfg, c); err != nil {
		return err
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return d.failed("SIGHUP: " + err.Error())
	}
	return d.poll(ctx, 20*time.Millisecond, daemonReloadTimeout, "reload", "no reload", func() (bool, error) {
		if n, err := d.metric(ctx, "anarchon_config_reloads_total", `result="ok"`); err == nil && n > before {
			return true, nil
		}
		if n, err := d.metric(ctx, "anarchon_config_reloads_total", `result="error"`); err == nil && n > 0 {
			return false, d.failed("reload refused")
		}
		return false, nil
	})
}

// stop sends SIGTERM and waits for the exit (SIGKILL after
// daemonStopTimeout). A daemon that did not exit 0 is an error.
func (d *benchDaemon) stop() error {
	select {
	case <-d.exited:
		return d.failed("stopped before it was asked to")
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(daemonStopTimeout):
		_ = d.cmd.Process.Kill()
		<-d.exited
		return d.failed(fmt.Sprintf("still running %v after SIGTERM: killed", daemonStopTimeout))
	}
	if d.waitErr != nil {
		return d.failed("exit status")
	}
	return nil
}

// stopAll stops the daemons at once.
func stopAll(ds []*benchDaemon) error {
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { errs[i] = d.stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sleepCtx sleeps d, or less if ctx ends (then it returns ctx's error).
func sleepOrDone(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ---------------------------------------------------------------------------
// /proc and /metrics.

// procRSS is the process's resident set (VmRSS of /proc/<pid>/status).
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(b)
}

// parseVmRSS reads the "VmRSS:  1234 kB" line of /proc/<pid>/status, in
// bytes.
func parseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q: want <n> kB", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS line %q: %w", sc.Text(), err)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("no VmRSS line (a kernel thread, or a zombie)")
}

// procCPUTicks is the CPU time the process used, user plus system, in
// clock ticks (utime + stime of /proc/<pid>/stat; children not counted).
func procCPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	u, s, err := parseStatCPU(b)
	return u + s, err
}

// parseStatCPU reads utime and stime, fields 14 and 15 of /proc/<pid>/stat
// (proc(5)). Field 2, the command name in parentheses, may itself hold
// spaces and parentheses: the fields are counted from its last ')'.
func parseStatCPU(stat []byte) (utime, stime int64, err error) {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("stat: no ')' after the command name")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	const first = 3
	if len(f) < 15-first+1 {
		return 0, 0, fmt.Errorf("stat: %d fields after the command name, want at least %d", len(f), 15-first+1)
	}
	if utime, err = strconv.ParseInt(f[14-first], 10, 64); err == nil {
		stime, err = strconv.ParseInt(f[15-first], 10, 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("stat: utime/stime: %w", err)
	}
	return utime, stime, nil
}

// metricSum sums the values of metric name's series, in the Prometheus
// text format, over the series whose labels include each of labels
// (written `key="value"`). ok is false when no series matched.
func metricSum(text, name string, labels ...string) (sum float64, ok bool) {
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		rest, found := strings.CutPrefix(line, name)
		if !found || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // another metric, e.g. name_bucket
		}
		var series, value string
		if j := strings.LastIndexByte(rest, '}'); rest[0] == '{' && j >= 0 {
			series, value = rest[:j+1], rest[j+1:]
		} else {
			series, value = "", rest
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(series, l) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		f := strings.Fields(value) // the value, maybe a timestamp after it
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum, ok = sum+v, true
	}
	return sum, ok
}

// ---------------------------------------------------------------------------
// Stores for daemons.

// daemonStore is a fresh namespace of one backend for daemons: the
// crontab's backend block, the store-side operation counter where the
// store has one, and the cleanup.
type daemonStore struct {
	name      string         // the row name: sqlite, redis-lease, ...
	namespace string         // the crontab's namespace
	backend   map[string]any // the crontab's backend block
	// countOps reads a counter of the store's operations that the daemon's
	// operations increase (nil: the store cannot count them); opsScope
	// says what else it counts.
	countOps func(ctx context.Context) (int64, error)
	opsScope string
	// watchOps, if set, counts the operations of process pid alone, on the
	// store's side, from now until stop is called; watchScope says how.
	watchOps   func(ctx context.Context, pid int) (stop func() (int64, error), err error)
	watchScope string
	// cleanup removes the namespace; runs are the runs that may have been
	// claimed in it (RabbitMQ deletes one gate queue per run).
	cleanup func(ctx context.Context, runs []runKey) error
	// extraCleanup removes what the store's extra added (storeExtra).
	extraCleanup func(ctx context.Context, runs []runKey) error
}

// benchVariants are the bench's own configurations of a registered store
// (testserver.Targets), by row name: the target and the section keys that
// differ from it.
var benchVariants = map[string]struct {
	of   string
	keys map[string]any
}{
	"postgres-async": {"postgres", map[string]any{"synchronousCommit": "off"}},
}

// storeExtra adds to a daemon store what the bench measures with beside
// the test's own place (testserver.Place): a counter of the store's
// operations, and what the cleanup removes beside the place
// (st.extraCleanup). It may move the place to another address on the same
// server, which it returns; a server that does not answer is an
// unreachable error.
type storeExtra func(ctx context.Context, st *daemonStore, url, id string) (string, error)

// storeExtras are the stores' extras, by store name.
var storeExtras = map[string]storeExtra{
	"postgres": postgresExtra,
	"redis":    redisExtra,
	"nats":     natsExtra,
	"rabbitmq": rabbitExtra,
}

// newDaemonStore makes a fresh namespace on backend (a row name of
// backends.go): the store's own place for a test (testserver), with the
// bench's extras. An unreachable server is an unreachable error.
func newDaemonStore(ctx context.Context, backend string) (*daemonStore, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	name, keys := backend, map[string]any(nil)
	if v, ok := benchVariants[backend]; ok {
		name, keys = v.of, v.keys
	}
	t, err := testserver.Find(name)
	if err != nil {
		return nil, fmt.Errorf("unknown backend %q (known: %s)", backend, strings.Join(rowNames(), ","))
	}
	url := serverURL(t)
	if t.Server != nil {
		if err := t.Server.Answering(testserver.HostPort(url)); err != nil {
			return nil, unreachable{err}
		}
	}
	id := "anarchon_bench_" + suffix()
	st := &daemonStore{name: backend, extraCleanup: func(context.Context, []runKey) error { return nil }}
	if extra := storeExtras[t.Driver.Name]; extra != nil {
		if url, err = extra(ctx, st, url, id); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "anarchon-bench-daemons-")
	if err != nil {
		return nil, errors.Join(err, st.extraCleanup(ctx, nil))
	}
	place, err := t.Isolate(ctx, url, id, dir)
	if err != nil {
		return nil, errors.Join(err, st.extraCleanup(ctx, nil), os.RemoveAll(dir))
	}
	st.namespace, st.backend = cmp.Or(place.Namespace, id), place.Backend(keys)
	st.cleanup = func(ctx context.Context, runs []runKey) error {
		return errors.Join(place.Cleanup(ctx), st.extraCleanup(ctx, runs), os.RemoveAll(dir))
	}
	return st, nil
}

// serverURL is the address of t's server the bench uses: its flag's value.
func serverURL(t testserver.Target) string {
	if f := serverFlags[t.Driver.Name]; f != nil {
		return *f
	}
	return t.URL
}

// postgresExtra: a fresh database, dropped afterwards, so that its
// pg_stat_database row counts the daemons' transactions alone (the
// counter is read from a connection to the DSN's own database, which is
// not counted there). If the database cannot be created (no CREATEDB), the
// place stays in the DSN's database, whose transactions are then counted
// with everyone else's.
func postgresExtra(ctx context.Context, st *daemonStore, dsn, name string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", unreachable{err}
	}
	count := func(db string) func(context.Context) (int64, error) {
		return func(ctx context.Context) (int64, error) {
			var n int64
			err := conn.QueryRow(ctx, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", db).Scan(&n)
			return n, err
		}
	}
	st.extraCleanup = func(ctx context.Context, _ []runKey) error { return conn.Close(ctx) }
	dbIdent := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+dbIdent); err == nil {
		st.extraCleanup = func(ctx context.Context, _ []runKey) error {
			_, err := conn.Exec(ctx, "DROP DATABASE "+dbIdent+" WITH (FORCE)")
			return errors.Join(err, conn.Close(ctx))
		}
		fresh, err := dsnWithDatabase(dsn, name)
		if err != nil {
			return "", errors.Join(err, st.extraCleanup(ctx, nil))
		}
		st.countOps = count(name)
		st.opsScope = "pg_stat_database xact_commit+xact_rollback of the fresh database " + name +
			" (only the daemon connects to it; backends flush their counts up to ~10 s late)"
		return fresh, nil
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return "", errors.Join(err, conn.Close(ctx))
	}
	st.countOps = count(db)
	st.opsScope = "pg_stat_database xact_commit+xact_rollback of database " + db +
		" (CREATE DATABASE refused: every session's transactions on it are counted, this bench's reads included)"
	return dsn, nil
}

// dsnWithDatabase is dsn (a postgres:// URL or a key=value DSN) naming
// database db instead of its own.
func dsnWithDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("postgres DSN: %w", err)
		}
		u.Path, u.RawPath = "/"+db, ""
		return u.String(), nil
	}
	// key=value: a later keyword overrides an earlier one.
	q := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(db)
	return strings.TrimSpace(dsn + " dbname='" + q + "'"), nil
}

// redisExtra: the counter is INFO commandstats' total of calls:
// server-wide, so every other client's commands are in it (and one INFO
// per reading, which the measurement subtracts); and, on TCP, the
// daemon's own commands from MONITOR.
func redisExtra(ctx context.Context, st *daemonStore, rawURL, _ string) (string, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return "", fmt.Errorf("redis URL (one server): %w", err)
	}
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return "", unreachable{err}
	}
	st.extraCleanup = func(context.Context, []runKey) error { return c.Close() }
	st.countOps = func(ctx context.Context) (int64, error) {
		s, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, err
		}
		return redisCommandCalls(s)
	}
	st.opsScope = "Redis INFO commandstats, total calls: server-wide, every other client's commands included"
	if opt.Network == "tcp" {
		_, port, err := net.SplitHostPort(opt.Addr)
		if err == nil {
			p, err := strconv.Atoi(port)
			if err == nil {
				st.watchOps = func(ctx context.Context, pid int) (func() (int64, error), error) {
					return watchRedisOps(ctx, opt, pid, p)
				}
				st.watchScope = "Redis MONITOR lines of the daemon's own connections (found by their ports in /proc/<pid>/net/tcp): one per command the daemon sent"
			}
		}
	}
	return rawURL, nil
}

// redisCommandCalls sums calls= over the cmdstat_ lines of INFO
// commandstats.
func redisCommandCalls(info string) (int64, error) {
	var total int64
	seen := false
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, stats, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("commandstats %q: %w", line, err)
				}
				total += n
				seen = true
			}
		}
	}
	if !seen {
		return 0, errors.New("INFO commandstats: no cmdstat_ line")
	}
	return total, nil
}

// natsExtra: the counter is the JetStream account's API total ($JS.API
// requests: stream info and the like; a claim is a publish into the
// stream, not an API request): account-wide, every other client of the
// account included (and one request per reading, which the measurement
// subtracts).
func natsExtra(_ context.Context, st *daemonStore, rawURL, _ string) (string, error) {
	nc, err := nats.Connect(rawURL, nats.Name("anarchon-bench counter"))
	if err != nil {
		return "", unreachable{err}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return "", err
	}
	st.extraCleanup = func(context.Context, []runKey) error { nc.Close(); return nil }
	st.countOps = func(ctx context.Context) (int64, error) {
		ai, err := js.AccountInfo(ctx)
		if err != nil {
			return 0, err
		}
		return int64(ai.API.Total), nil
	}
	st.opsScope = "JetStream account API total: account-wide, every other client's API requests included; stream publishes (claims) not counted"
	return rawURL, nil
}

// rabbitExtra: the cleanup deletes the gate queue of every run that may
// have been claimed (the place's cleanup deletes the history stream; the
// gates it misses expire after slotTtlMs). No counter: the broker's
// per-connection statistics need the management plugin.
func rabbitExtra(_ context.Context, st *daemonStore, rawURL, _ string) (string, error) {
	conn, err := amqp.DialConfig(rawURL, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return "", unreachable{err}
	}
	st.extraCleanup = func(_ context.Context, runs []runKey) error {
		defer conn.Close()
		queues := make([]string, 0, len(runs))
		for _, r := range runs {
			queues = append(queues, rabbitclaim.GateQueue(st.namespace, r.job, r.slot))
		}
		return rabbitclaim.DeleteQueues(conn, queues...)
	}
	return rawURL, nil
}

// opsOverhead is how much one reading of the counter adds to it: the
// smallest delta of three back-to-back pairs of readings (Redis counts
// the first INFO in the second; a JetStream account counts the request).
func (st *daemonStore) opsOverhead(ctx context.Context) (int64, error) {
	best := int64(-1)
	for range 3 {
		a, err := st.countOps(ctx)
		if err != nil {
			return 0, err
		}
		b, err := st.countOps(ctx)
		if err != nil {
			return 0, err
		}
		if best < 0 || b-a < best {
			best = b - a
		}
	}
	return max(best, 0), nil
}

// cleanupStore runs st's cleanup with its own timeout.
func cleanupStore(st *daemonStore, runs []runKey) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := st.cleanup(ctx, runs); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Redis: the daemon's own commands, from MONITOR.

// watchRedisOps counts the commands that process pid sends to the Redis
// server at opt.Addr (port redisPort) from now until stop: a MONITOR
// connection of its own reads every command the server executes with the
// client's address, and the commands of the daemon's connections are
// counted. The daemon's connections are found by their local ports among
// its sockets (/proc/<pid>/fd, /proc/<pid>/net/tcp{,6}), read every
// second and at stop; a connection opened and closed between two readings
// would be missed (the daemon pools its connections). Commands a script
// runs are not lines of their client (MONITOR shows them as "lua"): an
// EVALSHA counts once. MONITOR does not show AUTH and HELLO.
func watchRedisOps(ctx context.Context, opt *redis.Options, pid, redisPort int) (stop func() (int64, error), err error) {
	mon, err := startRedisMonitor(ctx, opt)
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		ports = map[int]bool{}
		perr  error
	)
	refresh := func() {
		p, err := procTCPPorts(pid, redisPort)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			perr = err
			return
		}
		for k := range p {
			ports[k] = true
		}
	}
	refresh()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				refresh()
			}
		}
	})
	return func() (int64, error) {
		refresh()
		close(done)
		wg.Wait()
		counts, err := mon.stop()
		mu.Lock()
		defer mu.Unlock()
		var n int64
		for addr, c := range counts {
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				continue // "lua", "unix:..."
			}
			if p, err := strconv.Atoi(port); err == nil && ports[p] {
				n += c
			}
		}
		if len(ports) == 0 {
			err = errors.Join(err, fmt.Errorf("no connection of pid %d to port %d found", pid, redisPort))
		}
		return n, errors.Join(err, perr)
	}, nil
}

// redisMonitor is a MONITOR connection counting the commands per client
// address.
type redisMonitor struct {
	conn   net.Conn
	done   chan struct{}
	counts map[string]int64
	err    error
}

// startRedisMonitor connects (AUTH with the URL's credentials; TLS as the
// URL says), sends MONITOR and starts counting.
func startRedisMonitor(ctx context.Context, opt *redis.Options) (*redisMonitor, error) {
	conn, err := dialRedis(ctx, opt)
	if err != nil {
		return nil, err
	}
	rd := bufio.NewReaderSize(conn, 64<<10)
	if opt.Password != "" {
		args := []string{"AUTH", opt.Password}
		if opt.Username != "" {
			args = []string{"AUTH", opt.Username, opt.Password}
		}
		err = redisCommand(conn, rd, args...)
	}
	if err == nil {
		err = redisCommand(conn, rd, "MONITOR")
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("redis MONITOR: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	m := &redisMonitor{conn: conn, done: make(chan struct{}), counts: map[string]int64{}}
	go m.count(rd)
	return m, nil
}

// dialRedis opens a plain connection to opt's server, over TLS when opt
// says so.
func dialRedis(ctx context.Context, opt *redis.Options) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if opt.TLSConfig != nil {
		return (&tls.Dialer{NetDialer: &d, Config: opt.TLSConfig}).DialContext(ctx, "tcp", opt.Addr)
	}
	return d.DialContext(ctx, "tcp", opt.Addr)
}

// redisCommand sends one command on conn, in RESP, and wants +OK as its
// answer on rd; 10 s at most.
func redisCommand(conn net.Conn, rd *bufio.Reader, args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return err
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+OK") {
		return fmt.Errorf("%s: %s", args[0], strings.TrimSpace(line))
	}
	return nil
}

// count reads the MONITOR lines from rd, counting each by its client's
// address, until the connection fails or is closed; then it closes done.
func (m *redisMonitor) count(rd *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			m.err = err
			return
		}
		if addr, ok := monitorClient(line); ok {
			m.counts[addr]++
		}
	}
}

// stop closes the connection and returns the counts.
func (m *redisMonitor) stop() (map[string]int64, error) {
	m.conn.Close()
	<-m.done
	if m.err != nil && !errors.Is(m.err, net.ErrClosed) {
		return m.counts, fmt.Errorf("redis MONITOR: %w", m.err)
	}
	return m.counts, nil
}

// monitorClient is the client address of one MONITOR line,
// `+1700000000.123456 [0 127.0.0.1:54398] "PING"`: "127.0.0.1:54398"
// ("lua" for the commands of a script).
func monitorClient(line string) (string, bool) {
	if !strings.HasPrefix(line, "+") {
		return "", false
	}
	_, rest, ok := strings.Cut(line, " [")
	if !ok {
		return "", false
	}
	inside, _, ok := strings.Cut(rest, "]")
	if !ok {
		return "", false
	}
	_, addr, ok := strings.Cut(inside, " ")
	return addr, ok && addr != ""
}

// procTCPPorts is the local ports of process pid's TCP connections to
// remote port remotePort: its socket inodes (/proc/<pid>/fd) looked up in
// /proc/<pid>/net/tcp and tcp6.
func procTCPPorts(pid, remotePort int) (map[int]bool, error) {
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if s, ok := strings.CutPrefix(link, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	ports := map[int]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		for _, e := range parseProcNetTCP(b) {
			if inodes[e.inode] && e.remotePort == remotePort {
				ports[e.localPort] = true
			}
		}
	}
	return ports, nil
}

// procTCPEntry is one socket of /proc/net/tcp.
type procTCPEntry struct {
	localPort, remotePort int
	inode                 uint64
}

// parseProcNetTCP reads /proc/net/tcp or tcp6 (proc(5)): after the header,
// "sl local_address rem_address st ... uid timeout inode ...", addresses
// as hex ADDR:PORT.
func parseProcNetTCP(b []byte) []procTCPEntry {
	var out []procTCPEntry
	port := func(addr string) (int, bool) {
		i := strings.LastIndexByte(addr, ':')
		if i < 0 {
			return 0, false
		}
		p, err := strconv.ParseUint(addr[i+1:], 16, 16)
		return int(p), err == nil
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 10 {
			continue
		}
		lp, ok1 := port(f[1])
		rp, ok2 := port(f[2])
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if !ok1 || !ok2 || err != nil {
			continue
		}
		out = append(out, procTCPEntry{localPort: lp, remotePort: rp, inode: inode})
	}
	return out
}
