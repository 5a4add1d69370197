package rabbitclaim_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
)

// TestRabbitClusterNodeKilled runs three instances on a local cluster of
// three RabbitMQ nodes, each instance given every node's URL with its own
// node first, 20 jobs a second. The first node is killed (kill -9): its
// instance reconnects to another node, gates hosted on the dead node are
// refused (their slots missed), new gates are created on the live nodes,
// and no slot is won twice; from a few slots after the kill on, every
// job's every slot is won again.
func TestRabbitClusterNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of three RabbitMQ nodes")
	}
	c := startRabbitCluster(t, 3)
	l := newRabbitLoad(t, c, 20)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); l.run(ctx) }()
	defer func() { cancel(); <-done }()

	started := time.Now().Truncate(time.Second).Add(time.Second)
	l.await(t, started, "every job won 3 slots", func(s rabbitSlots) bool { return s.full(started, 3) })
	killed := time.Now()
	l.mu.Lock()
	l.killed = killed
	l.mu.Unlock()
	c.kill(c.nodes[0])
	t.Logf("kill -9 node %s (instance i1's first URL) at %s", c.nodes[0].name, killed.Format("15:04:05.000"))
	l.await(t, killed, "every job won 10 slots after the kill, i1 among the winners", func(s rabbitSlots) bool {
		return s.full(killed, 10) && s.wonBy("i1", killed) > 0
	})
	// The claims of the slots up to now end within maxLate: let them.
	until := time.Now()
	time.Sleep(rabbitMaxLate + time.Second)
	cancel()
	<-done
	// validate says which node is down.
	note, err := rabbitclaim.Check(t.Context(), c.urls(0))
	if err != nil || !strings.Contains(note, "2 of 3 nodes answer") {
		t.Errorf("check after the kill: %v\n%s", err, note)
	}
	s := l.slots()
	if twice := s.twice(); len(twice) > 0 {
		t.Errorf("slots won twice: %v", twice)
	}
	resumed := s.resumed(killed, until)
	t.Logf("after the kill: %d (job, slot) with no winner (missed) before the slot at %s (%v after the kill), every one won from then to %s; before the kill: %d with no winner",
		s.unwon(killed, until), resumed.Format("15:04:05"), resumed.Sub(killed).Round(time.Millisecond),
		until.Format("15:04:05"), s.unwon(started, killed))
	l.mu.Lock()
	t.Logf("the claims' answers after the kill: %v", l.answers)
	l.mu.Unlock()
}

// rabbitLoad claims every job's slot each second from each instance, as
// a daemon would, re-sending a claim that got no answer until its slot is
// too late.
type rabbitLoad struct {
	jobs []string
	ins  map[string]*rabbitclaim.Backend

	mu  sync.Mutex
	won map[claimKey][]string // (job, slot) -> the instances that won it
	// answers counts the final answer of each claim after killed
	// ("no answer" when re-sent until late).
	answers map[string]int
	killed  time.Time
}

type claimKey struct {
	job  string
	slot int64
}

const rabbitMaxLate = 5 * time.Second

func newRabbitLoad(t *testing.T, c *rabbitCluster, jobs int) *rabbitLoad {
	t.Helper()
	l := &rabbitLoad{ins: map[string]*rabbitclaim.Backend{}, won: map[claimKey][]string{}, answers: map[string]int{}}
	for i := range jobs {
		l.jobs = append(l.jobs, fmt.Sprintf("j%02d", i))
	}
	for i := range c.nodes {
		name := fmt.Sprintf("i%d", i+1)
		b, err := rabbitclaim.New(t.Context(), rabbitclaim.Options{
			URL: c.urls(i), Namespace: "ha", Instance: name,
			Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name),
		})
		if err != nil {
			t.Fatalf("open instance %s: %v", name, err)
		}
		t.Cleanup(func() { b.Close() })
		l.ins[name] = b
	}
	return l
}

// run claims each second's slot until ctx ends.
func (l *rabbitLoad) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	next := time.Now().Truncate(time.Second).Add(time.Second)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		slot := next
		for name, b := range l.ins {
			for _, job := range l.jobs {
				wg.Go(func() { l.claim(ctx, name, b, job, slot) })
				// The next slot's gate, declared ahead as the scheduler
				// does (PrepareLead, here a second), on the node the
				// instance is connected to.
				wg.Go(func() { _ = b.Prepare(ctx, job, slot.Add(time.Second).UnixMilli()) })
			}
		}
		next = next.Add(time.Second)
	}
}

// claim sends one instance's claim of (job, slot), re-sent on no answer.
func (l *rabbitLoad) claim(ctx context.Context, name string, b *rabbitclaim.Backend, job string, slot time.Time) {
	req := claim.Request{Job: job, Slot: slot.UnixMilli(), Token: claim.NewToken(), Instance: name, MaxLate: rabbitMaxLate}
	for time.Since(slot) <= rabbitMaxLate && ctx.Err() == nil {
		req.Now = time.Now()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		res, err := b.Claim(cctx, req)
		cancel()
		if err == nil {
			l.answer(name, req, string(res.Outcome))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	l.answer(name, req, "no answer")
}

// answer records a claim's final answer.
func (l *rabbitLoad) answer(name string, req claim.Request, outcome string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if outcome == string(claim.Won) {
		k := claimKey{req.Job, req.Slot}
		l.won[k] = append(l.won[k], name)
	}
	if !l.killed.IsZero() && req.Slot > l.killed.UnixMilli() {
		l.answers[outcome]++
	}
}

// await waits up to a minute for cond over the slots won since from.
func (l *rabbitLoad) await(t *testing.T, from time.Time, what string, cond func(rabbitSlots) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond(l.slots()) {
		if time.Now().After(deadline) {
			t.Fatalf("not within a minute of %s: %s", from.Format("15:04:05.000"), what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rabbitSlots is a copy of the slots won, for the checks.
type rabbitSlots struct {
	jobs []string
	won  map[claimKey][]string
}

func (l *rabbitLoad) slots() rabbitSlots {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := rabbitSlots{jobs: l.jobs, won: make(map[claimKey][]string, len(l.won))}
	for k, v := range l.won {
		s.won[k] = append([]string(nil), v...)
	}
	return s
}

// full reports whether every job has n slots after from won.
func (s rabbitSlots) full(from time.Time, n int) bool {
	per := map[string]int{}
	for k := range s.won {
		if k.slot > from.UnixMilli() {
			per[k.job]++
		}
	}
	for _, j := range s.jobs {
		if per[j] < n {
			return false
		}
	}
	return true
}

// wonBy counts the slots after from that instance won.
func (s rabbitSlots) wonBy(instance string, from time.Time) int {
	n := 0
	for k, by := range s.won {
		for _, i := range by {
			if i == instance && k.slot > from.UnixMilli() {
				n++
			}
		}
	}
	return n
}

// twice lists the slots won by more than one claim.
func (s rabbitSlots) twice() []string {
	var out []string
	for k, by := range s.won {
		if len(by) > 1 {
			out = append(out, fmt.Sprintf("%s@%d by %v", k.job, k.slot, by))
		}
	}
	sort.Strings(out)
	return out
}

// resumed is the slot after the last slot in (from, until) that a job did
// not win.
func (s rabbitSlots) resumed(from, until time.Time) time.Time {
	resumed := from.Truncate(time.Second).Add(time.Second)
	for slot := resumed; slot.Before(until); slot = slot.Add(time.Second) {
		if s.unwon(slot.Add(-time.Millisecond), slot.Add(time.Millisecond)) > 0 {
			resumed = slot.Add(time.Second)
		}
	}
	return resumed
}

// unwon counts the (job, slot) with no winner, slots in (from, to).
func (s rabbitSlots) unwon(from, to time.Time) int {
	n := 0
	for slot := from.Truncate(time.Second).Add(time.Second); slot.Before(to); slot = slot.Add(time.Second) {
		for _, j := range s.jobs {
			if len(s.won[claimKey{j, slot.UnixMilli()}]) == 0 {
				n++
			}
		}
	}
	return n
}
