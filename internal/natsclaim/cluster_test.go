package natsclaim_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/natsclaim"
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/scheduler"
)

// TestNATSCluster runs the backend on a local cluster of three
// nats-server processes: the stream it creates has three replicas, more
// replicas than servers are refused, validate reports the topology, and
// with the stream leader killed (kill -9) no run executes twice and the
// jobs resume soon after JetStream elects a new leader.
func TestNATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of three nats-server processes")
	}
	c := startNATSCluster(t, 3)
	t.Run("replicas above the cluster's size are refused", func(t *testing.T) { testReplicasRefused(t, c) })
	t.Run("a stream with fewer replicas is used with a warning", func(t *testing.T) { testFewerReplicasWarned(t, c) })
	t.Run("a dead server of the URL list is named", func(t *testing.T) { testDeadServerNamed(t, c) })
	t.Run("a 1-replica stream's server killed and restarted", func(t *testing.T) { testOneReplicaOutage(t, c) })
	t.Run("the stream leader killed", func(t *testing.T) { testLeaderKilled(t, c) })
}

// TestNATSSingleServerKilled: with the only server killed (kill -9)
// nothing runs until it is back, then nothing is lost within maxLate and
// nothing runs twice (its stream and de-duplication survive on disk).
func TestNATSSingleServerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server process")
	}
	testServerRestarted(t, startNATSCluster(t, 1), natsclaim.Options{Stream: "ANARCHON_SOLO", Namespace: "solo"})
}

func testReplicasRefused(t *testing.T, c *natsCluster) {
	o := natsclaim.Options{URL: c.nodes[0].url(), Stream: "ANARCHON_R5", Namespace: "r5", Replicas: 5}
	_, err := natsclaim.New(t.Context(), o)
	if err == nil || !claim.IsPermanent(err) {
		t.Fatalf("replicas 5 on a cluster of 3: want a refusal (claim.PermanentError), got %v", err)
	}
	for _, want := range []string{"backend.nats.replicas is 5", "cluster anarchon-test of 3 servers", "at most 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the refusal is not one line:\n%v", err)
	}
	if _, err := natsclaim.Inspect(t.Context(), o); !claim.IsPermanent(err) || !strings.Contains(err.Error(), "3 servers") {
		t.Errorf("validate (Inspect) must refuse replicas 5 on a cluster of 3 too, got %v", err)
	}
	if _, err := rawJS(t, c.nodes[0].url()).Stream(t.Context(), o.Stream); err == nil {
		t.Error("the refused backend created its stream")
	}
}

func testFewerReplicasWarned(t *testing.T, c *natsCluster) {
	const stream, ns = "ANARCHON_R1", "r1"
	js := rawJS(t, c.nodes[0].url())
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: stream, Subjects: []string{ns + ".>"}, Duplicates: time.Hour, Storage: jetstream.FileStorage, Replicas: 1,
	}); err != nil {
		t.Fatalf("create a 1-replica stream: %v", err)
	}
	core, logs := observer.New(zap.WarnLevel)
	o := natsclaim.Options{URL: c.nodes[1].url(), Stream: stream, Namespace: ns, Log: zap.New(core)}
	open(t, o)
	fix := "nats stream edit " + stream + " --replicas 3"
	warned := false
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "1 replica(s), fewer than the 3 wanted") && strings.Contains(e.Message, fix) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no start-up warning naming %q; warnings: %v", fix, logs.All())
	}
	r, err := natsclaim.Inspect(t.Context(), natsclaim.Options{URL: c.nodes[2].url(), Stream: stream})
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	note := r.String()
	t.Logf("validate prints:\n%s", note)
	for _, want := range []string{"cluster anarchon-test of 3 servers (n1, n2, n3)", "stream " + stream + ": 1 replica(s), leader n", "warning: ", fix} {
		if !strings.Contains(note, want) {
			t.Errorf("validate's note does not say %q:\n%s", want, note)
		}
	}
}

func testDeadServerNamed(t *testing.T, c *natsCluster) {
	dead := fmt.Sprintf("nats://127.0.0.1:%d", freePorts(t, 1)[0])
	core, logs := observer.New(zap.WarnLevel)
	r, err := natsclaim.Inspect(t.Context(), natsclaim.Options{URL: dead + "," + c.nodes[0].url(), Stream: "ANARCHON_NONE", Log: zap.New(core)})
	if err != nil {
		t.Fatalf("a URL list with one dead server must connect: %v", err)
	}
	if len(r.Down) != 1 || !strings.Contains(r.Down[0], dead) || !strings.Contains(r.String(), "server "+dead+" does not answer") {
		t.Errorf("the dead server is not reported: %q\n%s", r.Down, r)
	}
	if ws := logs.FilterMessageSnippet("does not answer").All(); len(ws) != 1 || ws[0].ContextMap()["down"] != dead {
		t.Errorf("want one warning naming %s, got %v", dead, logs.All())
	}
	dead2 := fmt.Sprintf("nats://127.0.0.1:%d", freePorts(t, 1)[0])
	_, err = natsclaim.New(t.Context(), natsclaim.Options{URL: dead + "," + dead2, Stream: "ANARCHON_NONE", Namespace: "none"})
	if err == nil || !strings.Contains(err.Error(), "none of the 2 servers") || !strings.Contains(err.Error(), dead+": dial") || !strings.Contains(err.Error(), dead2+": dial") {
		t.Errorf("all servers dead: want an error naming each, got %v", err)
	}
}

// haJobs are n jobs that run every second, with the crontab's defaults.
func haJobs(t *testing.T, n int) []config.Job {
	t.Helper()
	var b strings.Builder
	b.WriteString("namespace: ha\nbackend: {type: nats}\njobs:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: j%02d, schedule: \"* * * * * *\", command: \"true\"}\n", i)
	}
	cfg, err := config.Parse("ha.yaml", []byte(b.String()), config.LoadOptions{
		Environ: []string{}, Hostname: func() (string, error) { return "ha", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Jobs
}

// haRun is one execution: which instance ran which slot, and when.
type haRun struct {
	instance, job string
	slot, at      time.Time
}

// haRuns records the executions of every instance.
type haRuns struct {
	mu   sync.Mutex
	runs []haRun
}

func (h *haRuns) add(r haRun) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs = append(h.runs, r)
}

func (h *haRuns) all() []haRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.runs)
}

// await waits until every job has run n slots after from.
func (h *haRuns) await(t *testing.T, jobs []config.Job, from time.Time, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		per := map[string]int{}
		for _, r := range h.all() {
			if r.slot.After(from) {
				per[r.job]++
			}
		}
		short := ""
		for _, j := range jobs {
			if per[j.Name] < n {
				short = j.Name
				break
			}
		}
		if short == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s ran %d slots after %s within %v, want %d", short, per[short], from.Format("15:04:05.000"), within, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// haExec is an instance's executor: it records the run and its result.
type haExec struct {
	instance string
	b        *natsclaim.Backend
	runs     *haRuns
}

func (e *haExec) Run(ctx context.Context, x runner.Execution) runner.Report {
	now := time.Now()
	e.runs.add(haRun{instance: e.instance, job: x.Job.Name, slot: x.Slot, at: now})
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := e.b.Finish(fctx, x.Fence, claim.Finish{Status: claim.StatusSucceeded, StartedAt: now, FinishedAt: time.Now()})
	return runner.Report{Status: claim.StatusSucceeded, Recorded: err == nil, Err: err}
}

// haInstance is one in-process daemon: a backend connected to a server
// of its own, and a scheduler on it.
type haInstance struct {
	name, node string
	b          *natsclaim.Backend
	stop       context.CancelFunc
	done       chan struct{} // closed when its scheduler's Run has returned
}

// haInstances is how many daemons a scenario runs.
const haInstances = 3

// startInstances opens haInstances backends with o, each connected to its
// own server (round the cluster), at once: they race to create the
// stream. Then it starts a scheduler on each.
func startInstances(t *testing.T, c *natsCluster, o natsclaim.Options, jobs []config.Job, runs *haRuns) []*haInstance {
	t.Helper()
	ins := make([]*haInstance, haInstances)
	errs := make([]error, haInstances)
	var wg sync.WaitGroup
	for i := range ins {
		n := c.nodes[i%len(c.nodes)]
		ins[i] = &haInstance{name: fmt.Sprintf("i%d", i+1), node: n.name}
		wg.Go(func() {
			o := o
			o.URL, o.Name = n.url(), ins[i].name
			o.Log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(o.Name)
			ins[i].b, errs[i] = natsclaim.New(t.Context(), o)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open instance %s: %v", ins[i].name, err)
		}
		t.Cleanup(func() { ins[i].b.Close() })
	}
	adopted := make(chan struct{}, len(ins))
	for _, in := range ins {
		s, err := scheduler.New(scheduler.Options{
			Backend: in.b, Clock: clock.Real{}, Instance: in.name,
			Log:      zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)).Named(in.name),
			Executor: &haExec{instance: in.name, b: in.b, runs: runs},
			Hooks:    scheduler.Hooks{Adopted: func(int) { adopted <- struct{}{} }},
		}, jobs)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		in.stop, in.done = cancel, make(chan struct{})
		go func() {
			defer close(in.done)
			if err := s.Run(ctx); err != nil {
				t.Errorf("instance %s: %v", in.name, err)
			}
		}()
		t.Cleanup(func() { cancel(); <-in.done })
	}
	for range ins {
		select {
		case <-adopted:
		case <-time.After(30 * time.Second):
			t.Fatal("a scheduler did not start within 30s")
		}
	}
	return ins
}

// stopAll stops every instance's scheduler and waits for it.
func stopAll(ins []*haInstance) {
	for _, in := range ins {
		in.stop()
	}
	for _, in := range ins {
		<-in.done
	}
}

// awayFrom is an instance that was not connected to the server killed.
func awayFrom(ins []*haInstance, killed string) *haInstance {
	for _, in := range ins {
		if in.node != killed {
			return in
		}
	}
	return ins[0] // a single server: every instance reconnected to it
}

// resumeBound is how soon after the new stream leader's election the
// jobs must run again.
const resumeBound = 3 * time.Second

func testLeaderKilled(t *testing.T, c *natsCluster) {
	const stream = "ANARCHON_HA"
	jobs := haJobs(t, 20)
	runs := &haRuns{}
	ins := startInstances(t, c, natsclaim.Options{Stream: stream, Namespace: "ha"}, jobs, runs)
	js := rawJS(t, c.urls(""))
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("the backend created the stream with %d replicas on a cluster of 3, want 3", r)
	}
	started := time.Now()
	runs.await(t, jobs, started, 3, 30*time.Second)

	leader, _ := streamLeader(js, stream)
	if leader == "" {
		t.Fatal("the stream has no leader")
	}
	killed := time.Now()
	c.kill(leader)
	t.Logf("kill -9 %s, the stream leader, at %s", leader, killed.Format("15:04:05.000"))
	survivors := rawJS(t, c.urls(leader))
	elected, newLeader := awaitNewLeader(t, survivors, stream, leader, 60*time.Second)
	t.Logf("%s elected stream leader %v after the kill", newLeader, elected.Sub(killed).Round(time.Millisecond))

	// Resumed: the first run of a slot that came due after the kill.
	dueAfter := killed.Add(time.Second)
	runs.await(t, jobs, dueAfter, 1, 30*time.Second)
	resumed := firstRunOf(runs.all(), dueAfter)
	runs.await(t, jobs, resumed, 5, 30*time.Second)
	stopped := time.Now()
	stopAll(ins)

	late := resumed.Sub(elected)
	t.Logf("jobs resumed %v after the new leader's election (%v after the kill); longest pause between runs %v",
		late.Round(time.Millisecond), resumed.Sub(killed).Round(time.Millisecond), longestPause(runs.all(), started, stopped).Round(time.Millisecond))
	if late > resumeBound {
		t.Errorf("the jobs resumed %v after the new stream leader was elected, want within %v", late, resumeBound)
	}
	account(t, awayFrom(ins, leader).b, jobs, runs.all(), started.Truncate(time.Second).Add(2*time.Second), stopped.Add(-2*time.Second))
}

// outage is how long a killed server whose stream has no other replica
// stays down.
const outage = 10 * time.Second

func testOneReplicaOutage(t *testing.T, c *natsCluster) {
	testServerRestarted(t, c, natsclaim.Options{Stream: "ANARCHON_R1HA", Namespace: "r1ha", Replicas: 1})
}

// testServerRestarted shows what a stream of one replica costs (on a
// cluster, or a single server): with its server killed nothing runs until
// that server is back; then the claims re-sent meanwhile (within maxLate)
// run, none twice.
func testServerRestarted(t *testing.T, c *natsCluster, o natsclaim.Options) {
	jobs := haJobs(t, 20)
	runs := &haRuns{}
	ins := startInstances(t, c, o, jobs, runs)
	js := rawJS(t, c.urls(""))
	started := time.Now()
	runs.await(t, jobs, started, 3, 30*time.Second)
	holder, ok := streamLeader(js, o.Stream)
	switch {
	case !ok:
		t.Fatal("the stream does not answer")
	case holder == "":
		holder = c.nodes[0].name // a single server's stream names none
	}
	killed := time.Now()
	c.kill(holder)
	time.Sleep(outage) // the fault's length
	restarted := time.Now()
	c.restart(holder)
	back := awaitStream(t, rawJS(t, c.urls("")), o.Stream, 60*time.Second)
	t.Logf("kill -9 %s, the stream's only server, at %s; restarted %v later; the stream answers %v after the kill",
		holder, killed.Format("15:04:05.000"), restarted.Sub(killed).Round(time.Millisecond), back.Sub(killed).Round(time.Millisecond))

	dueAfter := killed.Add(time.Second)
	runs.await(t, jobs, dueAfter, 1, 30*time.Second)
	resumed := firstRunOf(runs.all(), dueAfter)
	runs.await(t, jobs, resumed, 5, 30*time.Second)
	stopped := time.Now()
	stopAll(ins)
	if resumed.Before(restarted) {
		t.Errorf("a slot due after the kill ran at %s, before the stream's only server was restarted", resumed.Format("15:04:05.000"))
	}
	t.Logf("jobs resumed %v after the stream answered again (%v after the kill); longest pause between runs %v",
		resumed.Sub(back).Round(time.Millisecond), resumed.Sub(killed).Round(time.Millisecond), longestPause(runs.all(), started, stopped).Round(time.Millisecond))
	if late := resumed.Sub(back); late > resumeBound {
		t.Errorf("the jobs resumed %v after the stream answered again, want within %v", late, resumeBound)
	}
	account(t, awayFrom(ins, holder).b, jobs, runs.all(), started.Truncate(time.Second).Add(2*time.Second), stopped.Add(-2*time.Second))
}

// awaitStream polls the stream's info until it answers, and returns when.
func awaitStream(t *testing.T, js jetstream.JetStream, stream string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if _, ok := streamLeader(js, stream); ok {
			return time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the stream %s does not answer within %v", stream, within)
	return time.Time{}
}

// awaitNewLeader polls the stream's info until a server other than old
// leads it, and returns when it saw that and the leader.
func awaitNewLeader(t *testing.T, js jetstream.JetStream, stream, old string, within time.Duration) (time.Time, string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if l, _ := streamLeader(js, stream); l != "" && l != old {
			return time.Now(), l
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no new stream leader within %v of killing %s", within, old)
	return time.Time{}, ""
}

// firstRunOf is the time of the first execution of a slot after from.
func firstRunOf(runs []haRun, from time.Time) time.Time {
	var first time.Time
	for _, r := range runs {
		if r.slot.After(from) && (first.IsZero() || r.at.Before(first)) {
			first = r.at
		}
	}
	return first
}

// longestPause is the longest time between two executions (of any job,
// on any instance) from start to end.
func longestPause(runs []haRun, start, end time.Time) time.Duration {
	ats := []time.Time{start, end}
	for _, r := range runs {
		ats = append(ats, r.at)
	}
	slices.SortFunc(ats, time.Time.Compare)
	var longest time.Duration
	for i := 1; i < len(ats); i++ {
		longest = max(longest, ats[i].Sub(ats[i-1]))
	}
	return longest
}

// account checks every slot of every job from first to last: each ran
// once, or was not run and the store says why (a note, or a claim whose
// answer never reached its instance before the slot was late); none ran
// twice.
func account(t *testing.T, b *natsclaim.Backend, jobs []config.Job, runs []haRun, first, last time.Time) {
	t.Helper()
	ran := map[string]map[int64][]string{}
	for _, r := range runs {
		if ran[r.job] == nil {
			ran[r.job] = map[int64][]string{}
		}
		ran[r.job][r.slot.UnixMilli()] = append(ran[r.job][r.slot.UnixMilli()], r.instance)
	}
	var expected, once, twice, lost, unaccounted int
	all := storedRuns(t, b)
	for _, j := range jobs {
		stored := all[j.Name]
		for slot := first; !slot.After(last); slot = slot.Add(time.Second) {
			expected++
			ms := slot.UnixMilli()
			switch by := ran[j.Name][ms]; {
			case len(by) == 1:
				once++
			case len(by) > 1:
				twice++
				t.Errorf("%s@%s ran %d times: %v", j.Name, slot.Format("15:04:05"), len(by), by)
			case stored[ms] != nil:
				lost++
				t.Logf("%s@%s not run: the store has it %s (%s) by %s", j.Name, slot.Format("15:04:05"),
					stored[ms].Status, stored[ms].Reason, stored[ms].Instance)
			default:
				unaccounted++
				t.Errorf("%s@%s was not run and the store has no record of it", j.Name, slot.Format("15:04:05"))
			}
		}
	}
	t.Logf("runs expected %d (%d jobs, slots %s to %s): once %d, twice %d, lost %d, unaccounted %d",
		expected, len(jobs), first.Format("15:04:05"), last.Format("15:04:05"), once, twice, lost, unaccounted)
}

// storedRuns is what the stream holds of the runs, by job and slot.
func storedRuns(t *testing.T, b *natsclaim.Backend) map[string]map[int64]*claim.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := b.ListRuns(ctx, claim.ListQuery{Limit: 10000})
	if err != nil {
		t.Fatalf("list the runs: %v", err)
	}
	out := map[string]map[int64]*claim.Run{}
	for i, r := range rs {
		if out[r.Job] == nil {
			out[r.Job] = map[int64]*claim.Run{}
		}
		out[r.Job][r.Slot] = &rs[i]
	}
	return out
}
