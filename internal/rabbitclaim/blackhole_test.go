package rabbitclaim_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/faultproxy"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
)

// The blackhole tests heal the way a network that comes back does: the
// proxy passes traffic again on the same TCP connection, which nobody
// closed. The replies dropped meanwhile are gone for good, so amqp091 calls
// that were waiting for them (they take no context) would wait forever
// unless the backend ends them itself.

// proxied starts a fault proxy in front of the broker of u and returns it
// with the URL that goes through it. It is closed after the test's
// Backends (cleanups run last-registered first).
func proxied(t *testing.T, u string) (*faultproxy.Proxy, string) {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start("127.0.0.1:0", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, withHost(t, u, p.Addr())
}

// logOnFailure is a logger whose entries the test prints if it fails. It
// never writes to t from the Backend's goroutines, which may log after the
// test ended.
func logOnFailure(t *testing.T) *zap.Logger {
	core, logs := observer.New(zap.DebugLevel)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, e := range logs.All() {
			fields := make([]string, 0, len(e.Context))
			for _, f := range e.Context {
				fields = append(fields, fmt.Sprintf("%s=%v", f.Key, fieldValue(f)))
			}
			t.Logf("%s %s %s %v", e.Time.Format("15:04:05.000"), e.Level, e.Message, fields)
		}
	})
	return zap.New(core)
}

func fieldValue(f zap.Field) any {
	switch {
	case f.String != "":
		return f.String
	case f.Interface != nil:
		return f.Interface
	}
	return f.Integer
}

// errList collects failures seen by background goroutines, reported by the
// test's goroutine: a goroutine that returns after the test ended must not
// touch t.
type errList struct {
	mu   sync.Mutex
	errs []string
}

func (e *errList) add(format string, args ...any) {
	e.mu.Lock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
	e.mu.Unlock()
}

func (e *errList) report(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.errs {
		t.Error(s)
	}
}

// goroutineDump is every goroutine's stack, for a failure message.
func goroutineDump() string {
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 1)
	return buf.String()
}

// awaitGoroutines waits until at most limit goroutines run, for up to d.
func awaitGoroutines(t *testing.T, limit int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		n := runtime.NumGoroutine()
		if n <= limit {
			t.Logf("goroutines: %d (limit %d)", n, limit)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines %v after the heal, want at most %d (the baseline + slack):\n%s",
				n, d, limit, goroutineDump())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBlackholeClaimsRecover: claims are being sent when the broker's
// replies start being dropped (4s) on a connection that stays open. Every
// claim returns by its deadline (+ slack) with a transient error, unknown,
// or an answer; once the network is back, claims of new slots are won
// again within 5s, and the goroutines (the stuck calls', the claim
// workers', the dead connection's) return to the baseline: no call, slot
// or goroutine is left waiting for a reply that will never come.
func TestBlackholeClaimsRecover(t *testing.T) {
	u := brokerURL(t)
	p, pURL := proxied(t, u)
	n := newNS(t, u)
	b := n.open(t, func(o *rabbitclaim.Options) { o.URL, o.Log = pURL, logOnFailure(t) })
	job := "bh-claims"
	base := time.Now().Truncate(time.Second)
	var slot atomic.Int64
	next := func() claim.Request { return request(job, base.Add(time.Duration(slot.Add(1))*time.Second)) }
	wantOutcome(t, mustClaim(t, b, next()), claim.Won, "a claim before the blackhole")
	time.Sleep(200 * time.Millisecond) // the claimed record's write
	baseline := runtime.NumGoroutine()

	const (
		claimTimeout = time.Second // the scheduler's, with a 1s heartbeat
		slack        = time.Second
		claimers     = 4
	)
	var errs errList
	var sent, unknown, transient atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := next()
				ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
				start := time.Now()
				res, err := b.Claim(ctx, r)
				took := time.Since(start)
				cancel()
				sent.Add(1)
				switch {
				case took > claimTimeout+slack:
					errs.add("claimer %d: claim of slot %d returned after %v, want within its %v deadline + %v",
						i, r.Slot, took.Round(time.Millisecond), claimTimeout, slack)
				case err != nil && !rabbitclaim.IsTransient(err):
					errs.add("claimer %d: claim of slot %d: want a transient error or an answer, got %v", i, r.Slot, err)
				case err != nil:
					transient.Add(1)
				case res.Outcome == claim.Unknown:
					unknown.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // claims flowing
	p.SetMode(faultproxy.Blackhole)
	time.Sleep(4 * time.Second) // the fault
	p.SetMode(faultproxy.Pass)
	healed := time.Now()
	close(stop)

	// Claims of new slots are won again.
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), claimTimeout)
		res, err := b.Claim(ctx, next())
		cancel()
		if err == nil && res.Outcome == claim.Won {
			t.Logf("first claim won %v after the heal (try %d)", time.Since(healed).Round(time.Millisecond), i+1)
			break
		}
		if time.Since(healed) > 5*time.Second {
			t.Fatalf("no claim won within 5s of the heal; the last one: %s, %v\n%s", res.Outcome, err, goroutineDump())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The claims sent during the blackhole have all returned.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(claimTimeout + slack):
		errs.report(t)
		t.Fatalf("claims sent during the blackhole still blocked %v after the heal:\n%s",
			time.Since(healed).Round(time.Millisecond), goroutineDump())
	}
	errs.report(t)
	t.Logf("%d claims during the run: %d transient errors, %d unknown", sent.Load(), transient.Load(), unknown.Load())
	if transient.Load()+unknown.Load() == 0 {
		t.Fatal("no claim met the blackhole: the test did not test it")
	}
	awaitGoroutines(t, baseline+3, 10*time.Second)
	wantOutcome(t, mustClaim(t, b, next()), claim.Won, "a claim at the end")
}

// TestBlackholeFinishRecorded: a run is claimed, then the broker's replies
// are dropped (4s): a Finish then fails by its deadline, its record's
// confirm lost. Once the network is back (same TCP connection), a Finish
// re-sent as the runner does (2s per call) succeeds within 10s, and status
// shows the run finished, once, although its record may now be in the
// stream twice.
func TestBlackholeFinishRecorded(t *testing.T) {
	u := brokerURL(t)
	p, pURL := proxied(t, u)
	n := newNS(t, u)
	b := n.open(t, func(o *rabbitclaim.Options) { o.URL, o.Log = pURL, logOnFailure(t) })
	r := request("bh-finish", time.Now())
	wantOutcome(t, mustClaim(t, b, r), claim.Won, "the claim")
	runs, err := b.ListRuns(t.Context(), claim.ListQuery{Job: r.Job})
	if err != nil || len(runs) != 1 || runs[0].Status != claim.StatusRunning {
		t.Fatalf("status before the blackhole: want the run running, got %+v, %v", runs, err)
	}

	p.SetMode(faultproxy.Blackhole)
	started := time.Now()
	fin := claim.Finish{Status: claim.StatusSucceeded, OutputTail: "done\n",
		StartedAt: started.Add(-time.Second), FinishedAt: started}
	const perCall = 2 * time.Second // the runner's, with a 1s heartbeat
	ctx, cancel := context.WithTimeout(t.Context(), perCall)
	err = b.Finish(ctx, r.Fence(1), fin)
	cancel()
	if took := time.Since(started); err == nil || took > perCall+time.Second {
		t.Fatalf("a Finish during the blackhole: want an error within %v (+1s), got %v after %v", perCall, err, took)
	}
	t.Logf("Finish during the blackhole: %v", err)
	time.Sleep(4*time.Second - time.Since(started)) // the rest of the fault
	p.SetMode(faultproxy.Pass)
	healed := time.Now()

	for i := 1; ; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), perCall)
		err := b.Finish(ctx, r.Fence(1), fin)
		cancel()
		if err == nil {
			t.Logf("Finish recorded %v after the heal (call %d)", time.Since(healed).Round(time.Millisecond), i)
			break
		}
		if time.Since(healed) > 10*time.Second {
			t.Fatalf("Finish not recorded within 10s of the heal (%d calls); the last: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	runs, err = b.ListRuns(ctx, claim.ListQuery{Job: r.Job})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != claim.StatusSucceeded || runs[0].Token != r.Token ||
		runs[0].Instance != r.Instance || runs[0].OutputTail != "done\n" {
		t.Fatalf("status after the heal: want the one run succeeded, got %+v", runs)
	}
}

// TestFinishDuringBlackholeBounded: while the broker's replies are dropped,
// every Finish and ListRuns returns an error by its deadline (+ slack),
// also when earlier records are still waiting for their confirms; and
// Close does not hang.
func TestFinishDuringBlackholeBounded(t *testing.T) {
	u := brokerURL(t)
	p, pURL := proxied(t, u)
	n := newNS(t, u)
	b := n.open(t, func(o *rabbitclaim.Options) { o.URL, o.Log = pURL, logOnFailure(t) })
	r := request("bh-bounded", time.Now())
	wantOutcome(t, mustClaim(t, b, r), claim.Won, "the claim")

	p.SetMode(faultproxy.Blackhole)
	const (
		timeout = time.Second
		slack   = 500 * time.Millisecond
	)
	now := time.Now()
	fin := claim.Finish{Status: claim.StatusFailed, ExitCode: 3, StartedAt: now, FinishedAt: now}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		start := time.Now()
		err := b.Finish(ctx, r.Fence(1), fin)
		took := time.Since(start)
		cancel()
		if err == nil || took > timeout+slack {
			t.Fatalf("Finish %d during the blackhole: want an error within %v (+%v), got %v after %v",
				i+1, timeout, slack, err, took)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	start := time.Now()
	_, err := b.ListRuns(ctx, claim.ListQuery{Job: r.Job})
	took := time.Since(start)
	cancel()
	if err == nil || took > timeout+slack {
		t.Fatalf("ListRuns during the blackhole: want an error within %v (+%v), got %v after %v", timeout, slack, err, took)
	}
	start = time.Now()
	b.Close()
	took = time.Since(start)
	if took > 5*time.Second {
		t.Fatalf("Close during the blackhole took %v, want at most 5s", took)
	}
	t.Logf("Close during the blackhole took %v", took.Round(time.Millisecond))
}
