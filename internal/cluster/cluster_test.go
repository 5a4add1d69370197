package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
)

func job(name, cmd string) config.Job {
	return config.Job{Name: name, Schedule: "* * * * *", Command: cmd, Shell: "/bin/sh", Timezone: "UTC",
		Overlap: "skip", OnDrift: config.OnDriftRun, Lease: 30 * time.Second, MaxAttempts: 3}
}

func TestJobHashNamesTheFieldsThatDiffer(t *testing.T) {
	a := job("a", "echo 1")
	if again := job("a", "echo 1"); JobHash(again) != JobHash(a) {
		t.Fatal("a job's hash is not stable")
	}
	for _, c := range []struct {
		change func(j *config.Job)
		want   string
	}{
		{func(j *config.Job) { j.Command = "echo 2" }, "command/args/shell"},
		{func(j *config.Job) { j.Args = []string{"x"} }, "command/args/shell"},
		{func(j *config.Job) { j.Schedule = "*/2 * * * *" }, "schedule/timezone"},
		{func(j *config.Job) { j.Env = map[string]string{"A": "1"} }, "env/inheritEnv"},
		{func(j *config.Job) { j.User = "nobody" }, "user/group/workdir"},
		{func(j *config.Job) { j.OnDrift = config.OnDriftPause }, "overlap/catchUp/onDrift"},
		{func(j *config.Job) { j.Timeout = time.Minute }, "leaseMs/heartbeatMs/timeout/killGraceMs/maxAttempts"},
		{func(j *config.Job) { j.MaxLate = time.Second }, "maxLateMs/claimAheadMs/claimSpreadMs/outputTailBytes"},
		{func(j *config.Job) { j.Retry.Attempts = 2 }, "retry/onFailure/onSuccess/onMissed/hookTimeoutMs"},
		{func(j *config.Job) { j.OnFailure = "mail" }, "retry/onFailure/onSuccess/onMissed/hookTimeoutMs"},
		{func(j *config.Job) { j.Jitter = time.Second }, "jitterMs/tags/perInstance/keepRuns"},
		{func(j *config.Job) { j.Tags = []string{"gpu"} }, "jitterMs/tags/perInstance/keepRuns"},
	} {
		b := a
		c.change(&b)
		if got := Compare(JobHash(a), JobHash(b)); !slices.Equal(got, []string{c.want}) {
			t.Errorf("a change of %s: Compare says %v", c.want, got)
		}
	}
	// Env and inheritEnv are sets: their order does not matter.
	x, y := a, a
	x.InheritEnv, y.InheritEnv = []string{"A", "B"}, []string{"B", "A"}
	if JobHash(x) != JobHash(y) {
		t.Error("inheritEnv's order changes the hash")
	}
	if got := Compare(JobHash(a), JobHash(a)+".abcdef0"); len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("group %d", len(Groups)+1)) {
		t.Errorf("a hash of a newer version with more groups: %v", got)
	}
}

func rec(name, host, version string, seen time.Time, jobs ...config.Job) claim.Instance {
	h, all := JobHashes(jobs)
	return claim.Instance{Name: name, Host: host, PID: 1, Version: version, LastSeen: seen,
		ExpiresAt: seen.Add(15 * time.Second), Retain: time.Hour, Jobs: h, JobsHash: all}
}

func TestAnalyze(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recs := []claim.Instance{
		rec("c", "h3", "1.2.0", now.Add(-time.Second), job("x", "new"), job("y", "y")),
		rec("a", "h1", "1.2.0", now.Add(-time.Second), job("x", "old"), job("y", "y")),
		rec("b", "h2", "1.1.9", now.Add(-2*time.Second), job("x", "old")),
		rec("gone", "h4", "1.0.0", now.Add(-time.Minute), job("x", "other")),         // expired: not counted
		rec("pruned", "h5", "1.0.0", now.Add(-2*time.Hour), job("x", "other again")), // past retention
	}
	v := Analyze(recs, now)
	var names []string
	for _, m := range v.Members {
		names = append(names, m.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c", "gone"}) {
		t.Fatalf("members %v", names)
	}
	if m, _ := v.Member("gone"); m.Alive || m.Outdated || m.Drift != nil {
		t.Errorf("the expired record: %+v", m)
	}
	if len(v.Drift) != 2 {
		t.Fatalf("drift %+v", v.Drift)
	}
	x, ok := v.JobDrift("x")
	if !ok || !slices.Equal(x.Fields, []string{"command/args/shell"}) || len(x.Variants) != 2 ||
		!slices.Equal(x.Variants[0].Instances, []string{"a", "b"}) || !slices.Equal(x.Variants[1].Instances, []string{"c"}) {
		t.Errorf("drift of x: %+v", x)
	}
	y, _ := v.JobDrift("y")
	if !slices.Equal(y.Missing, []string{"b"}) || !slices.Equal(y.Fields, []string{FieldDefined}) {
		t.Errorf("drift of y, which b lacks: %+v", y)
	}
	if m, _ := v.Member("b"); !m.Outdated || !slices.Equal(m.Drift, []string{"x", "y"}) {
		t.Errorf("b: %+v", m)
	}
	if m, _ := v.Member("c"); m.Outdated || !slices.Equal(m.Drift, []string{"x", "y"}) || v.Newest != "1.2.0" {
		t.Errorf("c: %+v, newest %s", m, v.Newest)
	}
	// Alike again: no drift.
	same := Analyze([]claim.Instance{recs[1], rec("c", "h3", "1.2.0", now, job("x", "old"), job("y", "y"))}, now)
	if len(same.Drift) != 0 {
		t.Errorf("alike crontabs drift: %+v", same.Drift)
	}
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1.2.3", "v1.2.3", 0}, {"1.10.0", "1.9.9", 1}, {"1.2.3-rc1", "1.2.3", -1},
		{"dev", "1.0.0", -1}, {"dev", "dev", 0}, {"2.0", "1.99.99", 1},
	} {
		if got := compareVersions(c.a, c.b); got != c.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestCheckName(t *testing.T) {
	now := time.Now()
	self := claim.Instance{Name: "web-1a2b", Host: "web", PID: 200}
	alive := func(pids ...int) func(int) bool { return func(p int) bool { return slices.Contains(pids, p) } }
	other := rec("web-1a2b", "db", "1.0.0", now.Add(-time.Second))
	if err := CheckName([]claim.Instance{other}, self, now, alive()); err == nil ||
		!strings.Contains(err.Error(), "host db") || !strings.Contains(err.Error(), "host web") || !strings.Contains(err.Error(), "set instance") {
		t.Errorf("the name live on another host: %v", err)
	}
	old := rec("web-1a2b", "web", "1.0.0", now.Add(-time.Second))
	old.PID = 100
	if err := CheckName([]claim.Instance{old}, self, now, alive()); err != nil {
		t.Errorf("a restart (the old record alive, its process gone) is refused: %v", err)
	}
	if err := CheckName([]claim.Instance{old}, self, now, alive(100)); err == nil || !strings.Contains(err.Error(), "pid 100") {
		t.Errorf("a second daemon of one name on one host: %v", err)
	}
	expired := rec("web-1a2b", "db", "1.0.0", now.Add(-time.Minute))
	if err := CheckName([]claim.Instance{expired}, self, now, alive()); err != nil {
		t.Errorf("an expired record of the name refuses it: %v", err)
	}
}

// beaters are n instances beating on one in-memory store.
func beaters(t *testing.T, clk *clock.Fake, crontabs ...[]config.Job) ([]*Beater, []*observer.ObservedLogs, map[string]float64) {
	t.Helper()
	store := memclaim.New(clk)
	metric := map[string]float64{}
	var out []*Beater
	var logs []*observer.ObservedLogs
	for i, jobs := range crontabs {
		core, l := observer.New(zap.InfoLevel)
		name := string(rune('a' + i))
		b := NewBeater(Options{Registry: store, Clock: clk, Log: zap.New(core),
			Self: claim.Instance{Name: name, Host: "host-" + name, PID: 1000 + i, Version: "1.0.0", Retain: time.Hour},
			Hooks: Hooks{Drift: func(job string, on bool) {
				if i == 0 {
					metric[job] = map[bool]float64{true: 1, false: 0}[on]
				}
			}}}, jobs)
		if err := b.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		out, logs = append(out, b), append(logs, l)
	}
	return out, logs, metric
}

func TestBeaterDriftWarnsOnceAndEnds(t *testing.T) {
	clk := clock.NewFake(time.Now())
	bs, logs, metric := beaters(t, clk, []config.Job{job("x", "old")}, []config.Job{job("x", "new")})
	for range 3 { // several beats: still one warn each
		clk.Advance(Interval)
		for _, b := range bs {
			b.beat(context.Background())
		}
	}
	for i, l := range logs {
		w := l.FilterMessageSnippet("crontab drift:").All()
		if len(w) != 1 {
			t.Fatalf("instance %d logged %d drift warnings, want 1", i, len(w))
		}
		f := w[0].ContextMap()
		if f["job"] != "x" || !strings.Contains(f["instances"].(string), "a: ") || !strings.Contains(f["instances"].(string), "b: ") ||
			!strings.Contains(strings.Join(toStrings(f["fields"]), ","), "command/args/shell") {
			t.Errorf("instance %d: drift warning %v", i, f)
		}
		if !bs[i].Drifting("x") {
			t.Errorf("instance %d: x not drifting", i)
		}
	}
	if metric["x"] != 1 {
		t.Errorf("drift metric of x: %v", metric["x"])
	}
	bs[1].SetJobs([]config.Job{job("x", "old")})
	bs[1].beat(context.Background())
	bs[0].beat(context.Background())
	if bs[0].Drifting("x") || metric["x"] != 0 || logs[0].FilterMessageSnippet("crontab drift over").Len() != 1 {
		t.Errorf("alike again: drifting %v, metric %v, logs %v", bs[0].Drifting("x"), metric["x"], logs[0].All())
	}
}

func toStrings(v any) []string {
	var out []string
	if s, ok := v.([]any); ok {
		for _, x := range s {
			out = append(out, x.(string))
		}
	}
	if s, ok := v.([]string); ok {
		out = s
	}
	return out
}

// failing is a registry that fails until healed.
type failing struct {
	claim.Registry
	err error
}

func (f *failing) Beat(ctx context.Context, i claim.Instance, ttl time.Duration) (claim.Instance, error) {
	if f.err != nil {
		return claim.Instance{}, f.err
	}
	return f.Registry.Beat(ctx, i, ttl)
}

func TestBeaterFailureLoggedOnce(t *testing.T) {
	clk := clock.NewFake(time.Now())
	core, logs := observer.New(zap.InfoLevel)
	reg := &failing{Registry: memclaim.New(clk), err: errors.New("store down")}
	b := NewBeater(Options{Registry: reg, Clock: clk, Log: zap.New(core), Self: claim.Instance{Name: "a", Retain: time.Hour}}, nil)
	for range 3 {
		b.beat(context.Background())
	}
	reg.err = nil
	b.beat(context.Background())
	b.beat(context.Background())
	if n := logs.FilterMessageSnippet("cannot write or read").Len(); n != 1 {
		t.Errorf("%d failure warnings, want 1", n)
	}
	if n := logs.FilterMessageSnippet("again").Len(); n != 1 {
		t.Errorf("%d recovery messages, want 1", n)
	}
	if m, ok := b.View().Member("a"); !ok || !m.Alive {
		t.Errorf("after the recovery the view lacks this instance: %+v", b.View())
	}
}

func TestLeaveMarksTheRecordGone(t *testing.T) {
	clk := clock.NewFake(time.Now())
	bs, _, _ := beaters(t, clk, nil, nil)
	bs[0].Leave(context.Background())
	bs[1].beat(context.Background())
	if m, ok := bs[1].View().Member("a"); !ok || m.Alive {
		t.Errorf("a left, yet the view says %+v (listed %v)", m, ok)
	}
	if m, _ := bs[1].View().Member("b"); !m.Alive {
		t.Errorf("b is not alive: %+v", m)
	}
}

// Two live daemons under one name overwrite each other's record: the one
// that reads the other's record right after its own beat says so.
func TestTwinLogged(t *testing.T) {
	clk := clock.NewFake(time.Now())
	store := memclaim.New(clk)
	core, logs := observer.New(zap.InfoLevel)
	b := NewBeater(Options{Registry: &twin{Registry: store}, Clock: clk, Log: zap.New(core),
		Self: claim.Instance{Name: "a", Host: "h1", PID: 1, Retain: time.Hour}}, nil)
	b.beat(context.Background())
	if logs.FilterMessageSnippet("another live instance writes its heartbeat under this instance's name").Len() != 1 {
		t.Fatalf("no error about the twin: %v", logs.All())
	}
}

// twin writes another host's record under the same name after each beat.
type twin struct{ claim.Registry }

func (w *twin) Beat(ctx context.Context, i claim.Instance, ttl time.Duration) (claim.Instance, error) {
	got, err := w.Registry.Beat(ctx, i, ttl)
	other := i
	other.Host, other.PID = "h2", 2
	if _, err := w.Registry.Beat(ctx, other, ttl); err != nil {
		return got, err
	}
	return got, err
}

// unreadable is a registry whose reads fail.
type unreadable struct{ claim.Registry }

func (unreadable) Instances(context.Context) ([]claim.Instance, time.Time, error) {
	return nil, time.Time{}, errors.New("store down")
}

// A store that does not answer at start does not stop the start: the
// check is skipped, and its recovery is logged once the beats get through.
func TestStartWithoutAnAnswer(t *testing.T) {
	clk := clock.NewFake(time.Now())
	core, logs := observer.New(zap.InfoLevel)
	b := NewBeater(Options{Registry: unreadable{memclaim.New(clk)}, Clock: clk, Log: zap.New(core),
		Self: claim.Instance{Name: "a", Retain: time.Hour}}, nil)
	if err := b.Start(context.Background()); err != nil {
		t.Fatalf("Start without an answer: %v", err)
	}
	if logs.FilterMessageSnippet("check of a duplicate instance name is skipped").Len() != 1 {
		t.Fatalf("logs: %v", logs.All())
	}
}
