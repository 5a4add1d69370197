package rabbitclaim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/faultproxy"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/store"
	"github.com/anarchon/anarchon/internal/testserver"
)

// testSlotTTL is the gates' x-expires in tests: short, so that what a test
// leaves behind expires, long enough for the slowest case.
const testSlotTTL = 60 * time.Second

// brokerURL is the broker of the tests: ANARCHON_TEST_RABBITMQ_URL or the
// local default. It skips (or fails, see testserver) when nothing answers.
func brokerURL(t testing.TB) string {
	t.Helper()
	srv := testserver.For("rabbitmq")
	u := srv.URL
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("ANARCHON_TEST_RABBITMQ_URL %q: %v", secret.Redact(u), err)
	}
	addr := pu.Host
	if pu.Port() == "" {
		addr = net.JoinHostPort(pu.Hostname(), "5672")
	}
	srv.Require(t, addr)
	return u
}

// withHost returns u with its host:port replaced by addr.
func withHost(t testing.TB, u, addr string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = addr
	return pu.String()
}

// testNS is one test's namespace. Every Backend opened in it records the
// gates it declares; the namespace's cleanup deletes them and the history
// stream after the Backends are closed.
type testNS struct {
	name string
	url  string

	mu    sync.Mutex
	gates map[string]struct{}
}

// namespaces maps a namespace to its testNS, for Harness.Open.
var namespaces sync.Map

func newNS(t testing.TB, u string) *testNS {
	t.Helper()
	n := &testNS{name: fmt.Sprintf("anarchon-test-%08x", rand.Uint32()), url: u, gates: map[string]struct{}{}}
	namespaces.Store(n.name, n)
	t.Cleanup(func() {
		namespaces.Delete(n.name)
		n.deleteQueues(t)
	})
	return n
}

func (n *testNS) declared(queue string) {
	n.mu.Lock()
	n.gates[queue] = struct{}{}
	n.mu.Unlock()
}

// deleteQueues deletes the namespace's gates and history stream.
func (n *testNS) deleteQueues(t testing.TB) {
	conn, err := amqp.Dial(n.url)
	if err != nil {
		t.Errorf("cleanup of namespace %s: %v", n.name, err)
		return
	}
	defer conn.Close()
	n.mu.Lock()
	queues := make([]string, 0, len(n.gates)+1)
	for g := range n.gates {
		queues = append(queues, g)
	}
	n.mu.Unlock()
	queues = append(queues, rabbitclaim.HistoryQueue(n.name))
	var ch *amqp.Channel
	for _, q := range queues {
		if ch == nil || ch.IsClosed() {
			if ch, err = conn.Channel(); err != nil {
				t.Errorf("cleanup of namespace %s: %v", n.name, err)
				return
			}
		}
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			t.Errorf("cleanup: delete queue %s: %v", q, err)
		}
	}
}

// open opens a Backend in the namespace (its own connection), closed at
// the end of the test.
func (n *testNS) open(t testing.TB, edit ...func(*rabbitclaim.Options)) *rabbitclaim.Backend {
	t.Helper()
	o := rabbitclaim.Options{URL: n.url, Namespace: n.name, SlotTTL: testSlotTTL,
		Instance: "test-" + claim.NewToken().Short()}
	for _, e := range edit {
		e(&o)
	}
	b, err := rabbitclaim.New(context.Background(), o)
	if err != nil {
		t.Fatalf("open rabbitmq backend in %s: %v", n.name, err)
	}
	rabbitclaim.SetHooks(b, n.declared, nil)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

func TestConformance(t *testing.T) {
	u := brokerURL(t)
	claimtest.Exercise(t, claimtest.Harness{
		New: func(t *testing.T) claim.Backend { return newNS(t, u).open(t) },
		// A second instance on its own connection: the races' claimers
		// then meet only in the broker's gate.
		Open: func(t *testing.T, b claim.Backend) claim.Backend {
			n, ok := namespaces.Load(b.(*rabbitclaim.Backend).Namespace())
			if !ok {
				t.Fatalf("namespace of %T not found", b)
			}
			if strings.Contains(t.Name(), "/Record/") {
				return flushing{n.(*testNS).open(t)}
			}
			return n.(*testNS).open(t)
		},
		// Errors the backend documents as "not published": the daemon
		// re-sends them with the same token. A healthy broker gives none.
		Transient: rabbitclaim.IsTransient,
		// The history stream's name taken by a classic queue.
		Permanent: func(t *testing.T) (claim.Backend, error) {
			n := newNS(t, u)
			conn, err := amqp.Dial(u)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ch.QueueDeclare(rabbitclaim.HistoryQueue(n.name), true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			b, err := rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: u, Namespace: n.name})
			if err == nil {
				t.Cleanup(func() { b.Close() })
			}
			return b, err
		},
	})
}

// Environment of the process race's children.
const (
	raceURLEnv   = "RABBITCLAIM_RACE_URL"
	raceNSEnv    = "RABBITCLAIM_RACE_NAMESPACE"
	raceGatesEnv = "RABBITCLAIM_RACE_GATES" // a directory: each child lists its gates there
)

// TestProcessRace: 3 processes × 4 goroutines claim the same 100 slots, each
// process on its own connection. The children list the gates they declared
// in files, so that the namespace's cleanup deletes them.
func TestProcessRace(t *testing.T) {
	u := brokerURL(t)
	n := newNS(t, u)
	dir := t.TempDir()
	t.Cleanup(func() { // before the namespace's cleanup
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Error(err)
				continue
			}
			for _, q := range strings.Fields(string(data)) {
				n.declared(q)
			}
		}
	})
	claimtest.ProcessRace(t, claimtest.ProcessOptions{
		Env: []string{raceURLEnv + "=" + u, raceNSEnv + "=" + n.name, raceGatesEnv + "=" + dir},
	})
}

// TestHelperProcess is a race process of TestProcessRace; on its own it
// does nothing.
func TestHelperProcess(t *testing.T) {
	claimtest.HelperProcess(t, claimtest.HelperOptions{
		Open: func(ctx context.Context) (claim.Backend, error) {
			b, err := rabbitclaim.New(ctx, rabbitclaim.Options{URL: os.Getenv(raceURLEnv),
				Namespace: os.Getenv(raceNSEnv), SlotTTL: testSlotTTL})
			if err != nil {
				return nil, err
			}
			f, err := os.CreateTemp(os.Getenv(raceGatesEnv), "gates-")
			if err != nil {
				b.Close()
				return nil, err
			}
			var mu sync.Mutex
			seen := map[string]bool{}
			rabbitclaim.SetHooks(b, func(q string) {
				mu.Lock()
				defer mu.Unlock()
				if !seen[q] {
					seen[q] = true
					fmt.Fprintln(f, q) // unbuffered: on disk before the child exits
				}
			}, nil)
			return b, nil
		},
		Transient: rabbitclaim.IsTransient,
	})
}

// request is a claim of (job, slot) by a fresh token with maxLate 1h.
func request(job string, slot time.Time) claim.Request {
	return claim.Request{Job: job, Slot: slot.UnixMilli(), Token: claim.NewToken(),
		Instance: "inst-" + claim.NewToken().Short(), MaxLate: time.Hour, Now: time.Now()}
}

// other is r by another instance, with a fresh token.
func other(r claim.Request) claim.Request {
	r.Token, r.Instance = claim.NewToken(), "inst-"+claim.NewToken().Short()
	return r
}

func mustClaim(t testing.TB, b *rabbitclaim.Backend, r claim.Request) claim.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := b.Claim(ctx, r)
	if err != nil {
		t.Fatalf("claim %s@%d (token %s): %v", r.Job, r.Slot, r.Token.Short(), err)
	}
	return res
}

// resend re-sends r (same token) until it is answered, as the scheduler
// does after transient errors: each try within 5s, all within 20s.
func resend(t testing.TB, b *rabbitclaim.Backend, r claim.Request) claim.Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		res, err := b.Claim(ctx, r)
		cancel()
		if err == nil {
			return res
		}
		if !rabbitclaim.IsTransient(err) {
			t.Fatalf("re-send of %s@%d: %v", r.Job, r.Slot, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-send of %s@%d: no answer within 20s: %v", r.Job, r.Slot, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endBlackhole ends a blackhole the way a real one ends, with the dead
// connection dropped (here at once rather than after the heartbeat
// timeout), and lets new connections through. Passing traffic again on
// the blackholed connection would resume a byte stream with a hole in it.
func endBlackhole(p *faultproxy.Proxy) {
	p.SetMode(faultproxy.Cut)
	p.SetMode(faultproxy.Pass)
}

func wantOutcome(t testing.TB, res claim.Result, want claim.Outcome, what string) {
	t.Helper()
	if res.Outcome != want {
		t.Fatalf("%s: want %s, got %s(%d)", what, want, res.Outcome, res.Attempt)
	}
	if want == claim.Won && res.Attempt != 1 {
		t.Fatalf("%s: want won(1), got won(%d)", what, res.Attempt)
	}
}

// adminChannel opens a channel on a connection of its own to the broker at
// u, closed when the test ends: the operator's side of a test.
func adminChannel(t testing.TB, u string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// inspect passive-declares queue on a fresh connection (a 404 closes the
// channel). Note that a passive declare counts as use and restarts the
// queue's x-expires.
func inspect(t testing.TB, u, queue string) (amqp.Queue, error) {
	t.Helper()
	return adminChannel(t, u).QueueDeclarePassive(queue, true, false, false, false, nil)
}

func fmtExit(p *int) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func isNotFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}

// TestGateNeverConsumed: many claimers on two connections, one slot; one
// wins, and the gate still holds exactly that one message, with no
// consumer: nothing ever reads a gate.
func TestGateNeverConsumed(t *testing.T) {
	u := brokerURL(t)
	n := newNS(t, u)
	bs := []*rabbitclaim.Backend{n.open(t), n.open(t)}
	r := request("gate", time.Now())
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			res, err := bs[i%2].Claim(t.Context(), other(r))
			switch {
			case err != nil:
				t.Errorf("claim %d: %v", i, err)
			case res.Outcome == claim.Won:
				wins.Add(1)
			case res.Outcome != claim.Lost:
				t.Errorf("claim %d: %s, want won or lost", i, res.Outcome)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("20 claimers of one slot: %d won, want 1", wins.Load())
	}
	for range 5 {
		wantOutcome(t, mustClaim(t, bs[0], other(r)), claim.Lost, "a claim after the race")
	}
	q, err := inspect(t, u, rabbitclaim.GateQueue(n.name, r.Job, r.Slot))
	if err != nil {
		t.Fatalf("passive declare of the gate: %v", err)
	}
	if q.Messages != 1 || q.Consumers != 0 {
		t.Fatalf("gate after 25 claims: %d messages, %d consumers; want 1 message (the winner's) and no consumer",
			q.Messages, q.Consumers)
	}
}

// TestGateArgumentConflict: an instance with another slotTtlMs meets the
// gate declared by the first: a clear error naming the queue and x-expires,
// not transient (re-sending cannot help).
func TestGateArgumentConflict(t *testing.T) {
	u := brokerURL(t)
	n := newNS(t, u)
	a := n.open(t)
	b := n.open(t, func(o *rabbitclaim.Options) { o.SlotTTL = 2 * testSlotTTL })
	r := request("conflict", time.Now())
	wantOutcome(t, mustClaim(t, a, r), claim.Won, "the first instance's claim")
	_, err := b.Claim(t.Context(), other(r))
	if err == nil {
		t.Fatal("a claim with another slot TTL on an existing gate: want an error")
	}
	queue := rabbitclaim.GateQueue(n.name, r.Job, r.Slot)
	for _, want := range []string{queue, "x-expires", "exists with different arguments", "delete it or use another namespace"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !errors.Is(err, rabbitclaim.ErrQueueConflict) || rabbitclaim.IsTransient(err) || !claim.IsPermanent(err) {
		t.Errorf("error %v: want ErrQueueConflict, permanent, not transient", err)
	}
	t.Logf("conflict error: %v", err)
	// The 406 closed only that claim's channel: the Backend goes on.
	wantOutcome(t, mustClaim(t, b, request("conflict2", time.Now())), claim.Won, "the next claim on the same Backend")
}

// TestReturnIsUnknown: the gate is deleted between the declare and the
// publish, so the mandatory publish is returned (312 NO_ROUTE) and then
// acked: unknown, never won. A re-send of that token stays unknown without
// touching the broker.
func TestReturnIsUnknown(t *testing.T) {
	u := brokerURL(t)
	n := newNS(t, u)
	b := n.open(t)
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := request("returned", time.Now())
	queue := rabbitclaim.GateQueue(n.name, r.Job, r.Slot)
	var deleted atomic.Bool
	rabbitclaim.SetHooks(b, n.declared, func(q string) {
		if q != queue || !deleted.CompareAndSwap(false, true) {
			return
		}
		ch, err := conn.Channel()
		if err != nil {
			t.Errorf("admin channel: %v", err)
			return
		}
		defer ch.Close()
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			t.Errorf("delete the gate between declare and publish: %v", err)
		}
	})
	wantOutcome(t, mustClaim(t, b, r), claim.Unknown, "a claim whose gate vanished before the publish")
	if _, err := inspect(t, u, queue); !isNotFound(err) {
		t.Fatalf("the returned claim must not be in any queue: passive declare of the gate: %v", err)
	}
	wantOutcome(t, mustClaim(t, b, r), claim.Unknown, "the same claim re-sent (same token)")
	if _, err := inspect(t, u, queue); !isNotFound(err) {
		t.Fatalf("a re-send of a returned claim must not re-create the gate: passive declare: %v", err)
	}
	runs, err := b.ListRuns(t.Context(), claim.ListQuery{Job: r.Job})
	if err != nil || len(runs) != 0 {
		t.Fatalf("an unknown claim records no run: got %+v, %v", runs, err)
	}
}

// TestRecoveryAfterCut: the connection to the broker is cut; claims fail
// as transient (not published) or answer unknown (in flight), never won or
// lost; once the network is back the Backend reconnects by itself, and
// logs the loss and the restoration once each.
func TestRecoveryAfterCut(t *testing.T) {
	u := brokerURL(t)
	pu, _ := url.Parse(u)
	p, err := faultproxy.Start("127.0.0.1:0", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() }) // after the Backends' Close
	n := newNS(t, u)
	core, logs := observer.New(zap.InfoLevel)
	b := n.open(t, func(o *rabbitclaim.Options) {
		o.URL = withHost(t, u, p.Addr())
		o.Log = zap.New(core)
	})
	job := "cut"
	wantOutcome(t, mustClaim(t, b, request(job, time.Now())), claim.Won, "a claim before the cut")

	p.SetMode(faultproxy.Cut)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		res, err := b.Claim(ctx, request(job, time.Now().Add(time.Duration(i+1)*time.Second)))
		cancel()
		if err != nil {
			if !rabbitclaim.IsTransient(err) {
				t.Fatalf("a claim during the cut: want a transient error, got %v", err)
			}
			if strings.Contains(err.Error(), "guest:guest") {
				t.Fatalf("error shows the password: %v", err)
			}
			t.Logf("claim during the cut: %v", err)
			break
		}
		if res.Outcome != claim.Unknown {
			t.Fatalf("a claim during the cut: want an error or unknown, got %s", res.Outcome)
		}
		if time.Now().After(deadline) {
			t.Fatal("claims during the cut never failed")
		}
	}

	p.SetMode(faultproxy.Pass)
	r := request(job, time.Now().Add(time.Minute))
	wantOutcome(t, resend(t, b, r), claim.Won, "the first claim answered after the network came back")
	wantOutcome(t, mustClaim(t, b, other(r)), claim.Lost, "another instance's claim of that slot")
	lost := logs.FilterMessage("rabbitmq connection lost; reconnecting").Len()
	restored := logs.FilterMessage("rabbitmq connection restored").Len()
	if lost != 1 || restored != 1 {
		t.Fatalf("logged %d 'connection lost' and %d 'connection restored', want 1 each", lost, restored)
	}
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if strings.Contains(f.String, "guest:guest") {
				t.Fatalf("log %q shows the password: %v", e.Message, f)
			}
		}
	}
}

// TestLostAnswerIsUnknown: the claim reaches the gate but its confirm is
// lost (the proxy drops the replies just before the publish). The claim
// answers unknown with no error; another instance then loses (the claim
// did land); a re-send of the same token answers unknown, never lost or
// won, because the gate cannot say whose claim it holds.
func TestLostAnswerIsUnknown(t *testing.T) {
	u := brokerURL(t)
	pu, _ := url.Parse(u)
	p, err := faultproxy.Start("127.0.0.1:0", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() }) // after the Backends' Close
	n := newNS(t, u)
	b := n.open(t, func(o *rabbitclaim.Options) { o.URL = withHost(t, u, p.Addr()) })
	direct := n.open(t)
	r := request("blackhole", time.Now())
	queue := rabbitclaim.GateQueue(n.name, r.Job, r.Slot)
	var once atomic.Bool
	rabbitclaim.SetHooks(b, n.declared, func(q string) {
		if q == queue && once.CompareAndSwap(false, true) {
			p.SetMode(faultproxy.Blackhole)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	res, err := b.Claim(ctx, r)
	cancel()
	if err != nil {
		t.Fatalf("a claim whose confirm was lost: want unknown with no error, got %v", err)
	}
	wantOutcome(t, res, claim.Unknown, "a claim whose confirm was lost")
	endBlackhole(p)

	wantOutcome(t, mustClaim(t, direct, other(r)), claim.Lost, "another instance: the lost-answer claim is in the gate")
	wantOutcome(t, resend(t, b, r), claim.Unknown, "the re-send of the claim whose answer was lost")
	q, err := inspect(t, u, queue)
	if err != nil || q.Messages != 1 {
		t.Fatalf("the gate must hold the one claim: %+v, %v", q, err)
	}
}

// TestResentMaybeWinsEmptyGate: a claim whose confirm was lost answers
// unknown; when its copy turns out not to be in the gate (here: purged, as
// if it never arrived), a re-send of the same token wins: an ack proves
// the gate was empty, so the re-send is the one claim in it.
func TestResentMaybeWinsEmptyGate(t *testing.T) {
	u := brokerURL(t)
	pu, _ := url.Parse(u)
	p, err := faultproxy.Start("127.0.0.1:0", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() }) // after the Backends' Close
	n := newNS(t, u)
	b := n.open(t, func(o *rabbitclaim.Options) { o.URL = withHost(t, u, p.Addr()) })
	r := request("maybe", time.Now())
	queue := rabbitclaim.GateQueue(n.name, r.Job, r.Slot)
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var once atomic.Bool
	rabbitclaim.SetHooks(b, n.declared, func(q string) {
		if q == queue && once.CompareAndSwap(false, true) {
			p.SetMode(faultproxy.Blackhole)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	res, err := b.Claim(ctx, r)
	cancel()
	if err != nil || res.Outcome != claim.Unknown {
		t.Fatalf("first copy: want unknown, got %+v %v", res, err)
	}
	endBlackhole(p)
	// Empty the gate as if the first copy never reached it.
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueuePurge(queue, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	wantOutcome(t, resend(t, b, r), claim.Won, "re-send of an unknown claim that never reached the (empty) gate")
	wantOutcome(t, mustClaim(t, b, r), claim.Won, "a further re-send after the win")
}

// TestStatus: ListRuns joins claimed and finished records: a run claimed
// and not finished is running; a result for a run this Backend did not
// claim is recorded with the Backend's instance; interrupted has no exit
// code; newest slot first, job filter, limit.
func TestStatus(t *testing.T) {
	u := brokerURL(t)
	n := newNS(t, u)
	a := n.open(t)
	b := n.open(t, func(o *rabbitclaim.Options) { o.Instance = "finisher" })
	base := time.Now().Truncate(time.Second).Add(-time.Minute)
	job := "status"
	var reqs []claim.Request
	for i := range 4 {
		r := request(job, base.Add(time.Duration(i)*10*time.Second))
		wantOutcome(t, mustClaim(t, a, r), claim.Won, fmt.Sprintf("claim %d", i))
		reqs = append(reqs, r)
	}
	wantOutcome(t, mustClaim(t, a, request("otherjob", base)), claim.Won, "a claim of another job")
	now := time.Now()
	ok := claim.Finish{Status: claim.StatusSucceeded, OutputTail: "ok\n", StartedAt: now, FinishedAt: now.Add(time.Second)}
	if err := a.Finish(t.Context(), reqs[0].Fence(1), ok); err != nil {
		t.Fatal(err)
	}
	// Finished by another Backend (a daemon restarted since the claim):
	// still recorded, with that Backend's instance.
	intr := claim.Finish{Status: claim.StatusInterrupted, ExitCode: -1, StartedAt: now, FinishedAt: now.Add(2 * time.Second)}
	if err := b.Finish(t.Context(), reqs[2].Fence(1), intr); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(t.Context(), reqs[1].Fence(1), claim.Finish{Status: claim.StatusRunning}); err == nil {
		t.Fatal("finish with status running: want an error")
	}

	runs, err := b.ListRuns(t.Context(), claim.ListQuery{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Fatalf("want 4 runs of %s, got %d: %+v", job, len(runs), runs)
	}
	for i, r := range runs {
		want := reqs[3-i]
		if r.Slot != want.Slot || r.Token != want.Token {
			t.Fatalf("run %d is slot %d token %s, want slot %d token %s (newest first)",
				i, r.Slot, r.Token.Short(), want.Slot, want.Token.Short())
		}
	}
	check := func(r claim.Run, status claim.Status, instance string, exit *int) {
		t.Helper()
		if r.Status != status || r.Instance != instance || r.Attempt != 1 || fmtExit(r.ExitCode) != fmtExit(exit) {
			t.Errorf("run %s@%d: %s attempt %d instance %q exit %s, want %s attempt 1 instance %q exit %s",
				r.Job, r.Slot, r.Status, r.Attempt, r.Instance, fmtExit(r.ExitCode), status, instance, fmtExit(exit))
		}
	}
	zero := 0
	check(runs[3], claim.StatusSucceeded, reqs[0].Instance, &zero)
	check(runs[2], claim.StatusRunning, reqs[1].Instance, nil)
	check(runs[1], claim.StatusInterrupted, "finisher", nil)
	check(runs[0], claim.StatusRunning, reqs[3].Instance, nil)
	if !runs[0].FinishedAt.IsZero() || runs[0].StartedAt.IsZero() {
		t.Errorf("a running run has a start and no finish: %+v", runs[0])
	}
	if runs[3].Duration() != time.Second {
		t.Errorf("duration %v, want 1s", runs[3].Duration())
	}

	limited, err := a.ListRuns(t.Context(), claim.ListQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(limited) != 2 || limited[0].Slot != reqs[3].Slot || limited[1].Slot != reqs[2].Slot {
		t.Fatalf("limit 2 over every job: want the 2 newest slots, got %+v", limited)
	}
	all, err := a.ListRuns(t.Context(), claim.ListQuery{})
	if err != nil || len(all) != 5 {
		t.Fatalf("every job: want 5 runs, got %d, %v", len(all), err)
	}
}

// TestHistoryStreamChecks: a queue of the history's name that is not a
// stream is a clear error at start; a stream with other retention
// arguments is kept (logged).
func TestHistoryStreamChecks(t *testing.T) {
	u := brokerURL(t)
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	n := newNS(t, u)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(rabbitclaim.HistoryQueue(n.name), true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: u, Namespace: n.name})
	if !errors.Is(err, rabbitclaim.ErrQueueConflict) || !strings.Contains(err.Error(), "not a stream") {
		t.Fatalf("a classic queue named like the history stream: want ErrQueueConflict saying it is not a stream, got %v", err)
	}
	t.Logf("not a stream: %v", err)

	n2 := newNS(t, u)
	core, logs := observer.New(zap.InfoLevel)
	b1 := n2.open(t, func(o *rabbitclaim.Options) { o.HistoryMaxAge = 48 * time.Hour })
	b2 := n2.open(t, func(o *rabbitclaim.Options) { o.Log = zap.New(core) }) // default 7D
	if logs.FilterMessageSnippet("history stream exists with other retention arguments").Len() != 1 {
		t.Fatalf("want one warning about the stream's other arguments, got %v", logs.All())
	}
	r := request("hist", time.Now())
	wantOutcome(t, mustClaim(t, b1, r), claim.Won, "claim")
	if err := b2.Finish(t.Context(), r.Fence(1), claim.Finish{Status: claim.StatusSucceeded,
		StartedAt: time.Now(), FinishedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if runs, err := b2.ListRuns(t.Context(), claim.ListQuery{Job: r.Job}); err != nil || len(runs) != 1 {
		t.Fatalf("status on the kept stream: %+v %v", runs, err)
	}
}

// TestPasswordNeverShown: connection errors name the URL with the
// password hidden.
func TestPasswordNeverShown(t *testing.T) {
	u := brokerURL(t)
	pu, _ := url.Parse(u)
	pu.User = url.UserPassword("anarchon-nobody", "s3cr3t-pw")
	_, err := rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: pu.String(), Namespace: "anarchon-test-pw"})
	if err == nil {
		t.Fatal("wrong credentials: want an error")
	}
	if strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Fatalf("error shows the password: %v", err)
	}
	t.Logf("wrong credentials: %v", err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: "amqp://u:s3cr3t-pw@" + addr + "/", Namespace: "x"})
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Fatalf("nothing listening: want an error without the password, got %v", err)
	}
	_, err = rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: "amqp://u:s3cr3t-pw@host:notaport/", Namespace: "x"})
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Fatalf("bad URL: want an error without the password, got %v", err)
	}
}

// TestRegistered: backend.type rabbitmq opens this backend from the config.
func TestRegistered(t *testing.T) {
	u := brokerURL(t)
	n := newNS(t, u)
	b, err := store.Open(t.Context(), "rabbitmq", store.OpenParams{Namespace: n.name, Instance: "reg", Retention: 168 * time.Hour,
		Settings: rabbitclaim.Settings{URL: u, SlotTTLMs: testSlotTTL.Milliseconds()}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, ok := b.(claim.Leaser); ok {
		t.Fatal("the rabbitmq backend is claim-only: it must not be a claim.Leaser")
	}
	rb := b.(*rabbitclaim.Backend)
	rabbitclaim.SetHooks(rb, n.declared, nil)
	wantOutcome(t, mustClaim(t, rb, request("reg", time.Now())), claim.Won, "claim")
}
