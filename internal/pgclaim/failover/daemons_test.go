package failover

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/daemon"
)

// crontab is every daemon's: every-second jobs that append "job slot
// attempt instance token" to runs.log and then run for a second, so that
// runs are in flight at the kill (overlap: allow, since each outlives
// its slot). The DSN names both servers, as docs/backends.md says.
const crontab = `instance: %[1]s
namespace: ha
metrics: {listen: "127.0.0.1:0"}
stateDir: %[2]s
shutdownGraceMs: 5000
backend:
  type: postgres
  postgres:
    dsn: "%[3]s"
defaults:
  maxLateMs: %[4]d
  leaseMs: %[6]d
  overlap: allow
jobs:
%[5]s`

// jobLine appends one line per run to runs.log.
const jobLine = `  - name: %s
    schedule: "* * * * * *"
    command: echo "$ANARCHON_JOB $ANARCHON_SLOT_MS $ANARCHON_ATTEMPT $ANARCHON_INSTANCE $ANARCHON_TOKEN" >> %s; sleep 1
`

// fleet is the daemons of one run, in this process.
type fleet struct {
	t       *testing.T
	dir     string
	dsn     string
	jobs    int
	maxLate time.Duration
	lease   time.Duration
	runs    string // runs.log
	mu      sync.Mutex
	members []*member
}

// member is one daemon.
type member struct {
	name   string
	logs   *observer.ObservedLogs
	cancel context.CancelFunc
	ended  chan struct{} // closed when daemon.Run returned err
	err    error
	// reported: stop has logged err.
	reported bool
}

func newFleet(t *testing.T, dsn string, jobs int, maxLate, lease time.Duration) *fleet {
	dir := t.TempDir()
	f := &fleet{t: t, dir: dir, dsn: dsn, jobs: jobs, maxLate: maxLate, lease: lease, runs: filepath.Join(dir, "runs.log")}
	t.Cleanup(f.stop)
	return f
}

// start starts the daemon name and waits until it schedules its jobs.
func (f *fleet) start(name string) {
	t := f.t
	t.Helper()
	var jobs strings.Builder
	for i := range f.jobs {
		fmt.Fprintf(&jobs, jobLine, jobName(i), f.runs)
	}
	state := filepath.Join(f.dir, "state-"+name)
	file := filepath.Join(f.dir, name+".yaml")
	text := fmt.Sprintf(crontab, name, state, f.dsn, f.maxLate.Milliseconds(), jobs.String(), f.lease.Milliseconds())
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatalf("crontab of %s: %v", name, err)
	}
	core, logs := observer.New(zap.InfoLevel)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, logs: logs, cancel: cancel, ended: make(chan struct{})}
	go func() {
		defer close(m.ended)
		m.err = daemon.Run(ctx, cfg, daemon.Options{Log: zap.New(core), Clock: clock.Real{}, Environ: os.Environ(),
			Supervisor: []string{exe, "supervise", "--"}})
	}()
	f.mu.Lock()
	f.members = append(f.members, m)
	f.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for logs.FilterMessage("anarchond started").Len() == 0 {
		select {
		case <-m.ended:
			t.Fatalf("daemon %s ended before it started: %v", name, m.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon %s did not start within 30 s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func jobName(i int) string { return fmt.Sprintf("j%02d", i+1) }

// stop stops every daemon gracefully and waits for it; their logs stay.
func (f *fleet) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		m.cancel()
	}
	for _, m := range f.members {
		select {
		case <-m.ended:
			if m.err != nil && !m.reported {
				f.t.Logf("daemon %s: %v", m.name, m.err)
			}
			m.reported = true
		case <-time.After(30 * time.Second):
			f.t.Errorf("daemon %s did not stop within 30 s", m.name)
		}
	}
}

// entries are the log entries of every daemon with message msg.
func (f *fleet) entries(msg string) []observer.LoggedEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []observer.LoggedEntry
	for _, m := range f.members {
		out = append(out, m.logs.FilterMessage(msg).All()...)
	}
	return out
}

// firstStartOfSlotAfter is when the first job of a slot after t0 started,
// on any daemon.
func (f *fleet) firstStartOfSlotAfter(t0 time.Time) (time.Time, bool) {
	var first time.Time
	for _, e := range f.entries("job started") {
		slot, ok := e.ContextMap()["slot"].(string)
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, slot)
		if err == nil && at.After(t0) && (first.IsZero() || e.Time.Before(first)) {
			first = e.Time
		}
	}
	return first, !first.IsZero()
}

// warnings are the daemons' warnings and errors whose message starts with
// prefix.
func (f *fleet) warnings(prefix string) []observer.LoggedEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []observer.LoggedEntry
	for _, m := range f.members {
		out = append(out, m.logs.Filter(func(e observer.LoggedEntry) bool {
			return e.Level >= zap.WarnLevel && strings.HasPrefix(e.Message, prefix)
		}).All()...)
	}
	return out
}

// logWarnings logs how many times the daemons warned each message.
func (f *fleet) logWarnings() {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]int{}
	for _, m := range f.members {
		for _, e := range m.logs.All() {
			if e.Level >= zap.WarnLevel {
				seen[e.Message]++
			}
		}
	}
	for k, v := range seen {
		f.t.Logf("%4d × %s", v, k)
	}
}
