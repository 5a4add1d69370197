package natsclaim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/faultproxy"
	"github.com/anarchon/anarchon/internal/natsclaim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/testserver"
)

// natsURL is the server the tests use (ANARCHON_TEST_NATS_URL).
func natsURL() string { return testserver.For("nats").URL }

// hostPort is the first server's host:port of a NATS URL.
func hostPort(t testing.TB, raw string) string {
	t.Helper()
	first := strings.TrimSpace(strings.Split(raw, ",")[0])
	u, err := url.Parse(first)
	if err != nil {
		t.Fatalf("ANARCHON_TEST_NATS_URL %q: %v", secret.Redact(raw), err)
	}
	if u.Port() == "" {
		return u.Hostname() + ":4222"
	}
	return u.Host
}

// requireNATS skips (or fails, under ANARCHON_TEST_REQUIRE) without a server.
func requireNATS(t testing.TB) string {
	t.Helper()
	u := natsURL()
	testserver.For("nats").Require(t, hostPort(t, u))
	return u
}

// place is one test's own stream and namespace; their subjects never
// overlap another test's.
type place struct {
	url, stream, ns string
}

// newPlace names a fresh stream and namespace and deletes the stream when
// the test ends.
func newPlace(t testing.TB) place {
	t.Helper()
	u := requireNATS(t)
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	p := place{url: u, stream: "ANARCHON_TEST_" + strings.ToUpper(suffix), ns: "anarchon-test-" + suffix}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		js := rawJS(t, u)
		if err := js.DeleteStream(ctx, p.stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("delete stream %s: %v", p.stream, err)
		}
		for _, bucket := range []string{natsclaim.ControlBucket(p.stream), natsclaim.InstanceBucket(p.stream)} {
			if err := js.DeleteKeyValue(ctx, bucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
				t.Errorf("delete bucket %s: %v", bucket, err)
			}
		}
	})
	return p
}

// options are the backend options of p.
func (p place) options() natsclaim.Options {
	return natsclaim.Options{URL: p.url, Stream: p.stream, Namespace: p.ns, DuplicateWindow: time.Hour}
}

// open opens a backend, closed at the end of the test.
func open(t testing.TB, o natsclaim.Options) *natsclaim.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := natsclaim.New(ctx, o)
	if err != nil {
		t.Fatalf("open nats backend on stream %s: %v", o.Stream, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// rawJS is a JetStream client of its own, closed at the end of the test.
func rawJS(t testing.TB, u string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(u)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestConformance(t *testing.T) {
	claimtest.Exercise(t, claimtest.Harness{
		New: func(t *testing.T) claim.Backend {
			return open(t, newPlace(t).options())
		},
		Open: func(t *testing.T, b claim.Backend) claim.Backend {
			nb := b.(*natsclaim.Backend)
			return open(t, natsclaim.Options{URL: natsURL(), Stream: nb.Stream(), Namespace: nb.Namespace(), DuplicateWindow: time.Hour})
		},
		Controller: true,
		Registry:   true,
		// The stream pre-created with other subjects.
		Permanent: func(t *testing.T) (claim.Backend, error) {
			p := newPlace(t)
			createStream(t, p, jetstream.StreamConfig{Subjects: []string{p.ns + "-other.>"}, Duplicates: time.Hour})
			b, err := natsclaim.New(t.Context(), p.options())
			if err == nil {
				t.Cleanup(func() { b.Close() })
			}
			return b, err
		},
	})
}

// req is a claim of (job, slot) by a fresh token, slot = now.
func req(job string) claim.Request {
	now := time.Now()
	return claim.Request{Job: job, Slot: now.Truncate(time.Second).UnixMilli(), Token: claim.NewToken(),
		Instance: "i-" + claim.NewToken().Short(), MaxLate: time.Minute, Now: now}
}

func other(r claim.Request) claim.Request {
	r.Token, r.Instance = claim.NewToken(), "i-"+claim.NewToken().Short()
	return r
}

func mustClaim(t *testing.T, b claim.Backend, r claim.Request, want claim.Outcome, what string) {
	t.Helper()
	res, err := b.Claim(t.Context(), r)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if res.Outcome != want || (want == claim.Won && res.Attempt != 1) {
		t.Fatalf("%s: want %s, got %s(%d)", what, want, res.Outcome, res.Attempt)
	}
}

func TestStreamCreated(t *testing.T) {
	p := newPlace(t)
	o := p.options()
	o.DuplicateWindow = 90 * time.Second
	b := open(t, o)
	if b.DuplicateWindow() != 90*time.Second {
		t.Fatalf("DuplicateWindow() = %v, want 90s", b.DuplicateWindow())
	}
	s, err := rawJS(t, p.url).Stream(t.Context(), p.stream)
	if err != nil {
		t.Fatalf("the backend must create the missing stream: %v", err)
	}
	cfg := s.CachedInfo().Config
	if len(cfg.Subjects) != 1 || cfg.Subjects[0] != p.ns+".>" {
		t.Errorf("subjects %v, want [%s.>]", cfg.Subjects, p.ns)
	}
	if cfg.Duplicates != 90*time.Second {
		t.Errorf("duplicate window %v, want 90s", cfg.Duplicates)
	}
	if cfg.MaxAge != natsclaim.DefaultMaxAge {
		t.Errorf("max age %v, want %v", cfg.MaxAge, natsclaim.DefaultMaxAge)
	}
	if cfg.Storage != jetstream.FileStorage || cfg.Retention != jetstream.LimitsPolicy || cfg.Discard != jetstream.DiscardOld {
		t.Errorf("storage %v, retention %v, discard %v: want file, limits, old", cfg.Storage, cfg.Retention, cfg.Discard)
	}
	// A second instance finds it and accepts it, unchanged.
	open(t, o)
	// A window above the default max age makes the max age follow it.
	p2 := newPlace(t)
	o2 := p2.options()
	o2.DuplicateWindow = 8 * 24 * time.Hour
	open(t, o2)
	s2, err := rawJS(t, p2.url).Stream(t.Context(), p2.stream)
	if err != nil {
		t.Fatal(err)
	}
	if c := s2.CachedInfo().Config; c.Duplicates != 8*24*time.Hour || c.MaxAge != 8*24*time.Hour {
		t.Errorf("window 8d: stream has duplicate window %v, max age %v; want both 8d", c.Duplicates, c.MaxAge)
	}
}

func TestStreamCreatedByManyAtOnce(t *testing.T) {
	p := newPlace(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			b, err := natsclaim.New(t.Context(), p.options())
			if err == nil {
				b.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("instances starting together on a missing stream must all create it or find it: %v", err)
	}
}

// TestSubjectsTakenByAnotherStream: the stream is missing but another
// stream already takes the namespace's subjects; start-up names it.
func TestSubjectsTakenByAnotherStream(t *testing.T) {
	p := newPlace(t)
	createStream(t, p, jetstream.StreamConfig{Duplicates: time.Hour})
	o := p.options()
	o.Stream = p.stream + "_OTHER"
	_, err := natsclaim.New(t.Context(), o)
	want := fmt.Sprintf("create stream %s: stream %s already takes subjects %s.>: set backend.nats.stream to %s", o.Stream, p.stream, p.ns, p.stream)
	if err == nil || !strings.Contains(err.Error(), want) || !claim.IsPermanent(err) {
		t.Fatalf("want a refusal (claim.IsPermanent) saying %q, got %v", want, err)
	}
	if _, err := rawJS(t, p.url).Stream(t.Context(), o.Stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream %s must not exist after the refusal: %v", o.Stream, err)
	}
}

// createStream makes the stream of p as an operator would.
func createStream(t *testing.T, p place, cfg jetstream.StreamConfig) {
	t.Helper()
	cfg.Name = p.stream
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{p.ns + ".>"}
	}
	if _, err := rawJS(t, p.url).CreateStream(t.Context(), cfg); err != nil {
		t.Fatalf("create stream %s: %v", p.stream, err)
	}
}

func TestExistingStreamRefused(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(p place) jetstream.StreamConfig
		opts func(o *natsclaim.Options)
		want string
	}{{
		name: "SmallerDuplicateWindow",
		cfg:  func(place) jetstream.StreamConfig { return jetstream.StreamConfig{Duplicates: 2 * time.Minute} },
		want: "has a duplicate window of 2m0s, below backend.nats.duplicateWindowMs 1h0m0s: update the stream or lower the setting",
	}, {
		name: "SmallerMaxAgeThanConfigured",
		cfg: func(place) jetstream.StreamConfig {
			return jetstream.StreamConfig{Duplicates: time.Hour, MaxAge: 2 * time.Hour}
		},
		opts: func(o *natsclaim.Options) { o.MaxAge = 24 * time.Hour },
		want: "has a max age of 2h0m0s, below the configured 24h0m0s",
	}, {
		name: "SubjectsDoNotCover",
		cfg: func(p place) jetstream.StreamConfig {
			return jetstream.StreamConfig{Subjects: []string{p.ns + ".*.claims"}, Duplicates: time.Hour}
		},
		want: "which do not cover",
	}, {
		name: "NoAck",
		cfg:  func(place) jetstream.StreamConfig { return jetstream.StreamConfig{Duplicates: time.Hour, NoAck: true} },
		want: "does not acknowledge publishes",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPlace(t)
			cfg := c.cfg(p)
			createStream(t, p, cfg)
			o := p.options()
			if c.opts != nil {
				c.opts(&o)
			}
			_, err := natsclaim.New(t.Context(), o)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "stream "+p.stream) {
				t.Fatalf("want a start-up error naming stream %s and %q, got %v", p.stream, c.want, err)
			}
			t.Logf("error: %v", err)
			// The stream is left as the operator made it.
			s, err := rawJS(t, p.url).Stream(t.Context(), p.stream)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.CachedInfo().Config; cfg.Duplicates != 0 && got.Duplicates != cfg.Duplicates {
				t.Fatalf("the backend changed the stream's duplicate window to %v", got.Duplicates)
			}
		})
	}
}

func TestExistingStreamAccepted(t *testing.T) {
	// A larger window, wider subjects and a shorter max age than the
	// default (but above the window) are fine.
	p := newPlace(t)
	createStream(t, p, jetstream.StreamConfig{Subjects: []string{p.ns + ".>"}, Duplicates: 2 * time.Hour, MaxAge: 24 * time.Hour})
	b := open(t, p.options())
	if b.DuplicateWindow() != 2*time.Hour {
		t.Fatalf("DuplicateWindow() = %v, want the stream's 2h", b.DuplicateWindow())
	}
	mustClaim(t, b, req("job"), claim.Won, "a claim on an operator's stream")
}

// TestNamespacesShareStream: two namespaces on one operator's stream each
// win their own run of the same job and slot.
func TestNamespacesShareStream(t *testing.T) {
	p := newPlace(t)
	ns2 := p.ns + "-two"
	createStream(t, p, jetstream.StreamConfig{Subjects: []string{p.ns + ".>", ns2 + ".>"}, Duplicates: time.Hour})
	b1 := open(t, p.options())
	o2 := p.options()
	o2.Namespace = ns2
	b2 := open(t, o2)
	r := req("shared")
	mustClaim(t, b1, r, claim.Won, "namespace 1")
	mustClaim(t, b2, other(r), claim.Won, "namespace 2, same job and slot")
	mustClaim(t, b2, other(r), claim.Lost, "namespace 2, another token")
	runs, err := b2.ListRuns(t.Context(), claim.ListQuery{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("status of namespace 2 shows its own run only: %+v, %v", runs, err)
	}
}

func TestOptionsRefused(t *testing.T) {
	p := newPlace(t)
	for _, o := range []natsclaim.Options{
		{URL: p.url, Stream: "A.B", Namespace: p.ns},
		{URL: p.url, Stream: p.stream, Namespace: "a.b"},
		{URL: p.url, Stream: p.stream, Namespace: p.ns, DuplicateWindow: time.Hour, MaxAge: time.Minute},
		{URL: "", Stream: p.stream, Namespace: p.ns},
	} {
		if _, err := natsclaim.New(t.Context(), o); err == nil {
			t.Errorf("New(%+v) must fail", o)
		}
	}
}

func TestLatePublishesNothing(t *testing.T) {
	p := newPlace(t)
	b := open(t, p.options())
	r := req("late")
	r.Now = r.SlotTime().Add(2 * time.Minute)
	mustClaim(t, b, r, claim.Late, "a slot 2m old with maxLate 1m")
	s, err := rawJS(t, p.url).Stream(t.Context(), p.stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 0 {
		t.Fatalf("a late answer publishes nothing: the stream has %d messages", n)
	}
}

// TestResentClaimAfterLostAck: the claim lands but its ack is lost; the
// connection is cut and comes back; the daemon re-sends with the same
// token and must win, and nobody else may.
func TestResentClaimAfterLostAck(t *testing.T) {
	p := newPlace(t)
	b, proxy, u, logs := openProxied(t, p)
	direct := open(t, p.options())

	r := req("cut")
	proxy.SetMode(faultproxy.Blackhole)
	mustFail(t, b, r, "a claim whose ack is lost (no decision arrived)")
	s, err := rawJS(t, p.url).Stream(t.Context(), p.stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("the claim must have landed (blackhole drops only replies): stream has %d messages", n)
	}
	proxy.SetMode(faultproxy.Cut)
	time.Sleep(200 * time.Millisecond)
	proxy.SetMode(faultproxy.Pass)

	// The scheduler re-sends with the same token until it gets an answer.
	deadline := time.Now().Add(20 * time.Second)
	var res claim.Result
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		res, err = b.Claim(ctx, r)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-sent claim after the connection came back: %v", err)
		}
		// While reconnecting a publish fails at once (no reconnect
		// buffer); the scheduler pauses between re-sends too.
		time.Sleep(20 * time.Millisecond)
	}
	if res.Outcome != claim.Won {
		t.Fatalf("the re-sent claim (same token) must win its own landed claim, got %s", res.Outcome)
	}
	mustClaim(t, b, other(r), claim.Lost, "another token on the reconnected backend")
	mustClaim(t, direct, other(r), claim.Lost, "another token on another connection")

	// nats.go calls its handlers asynchronously: the re-sent claim can be
	// answered before the reconnection is logged.
	awaitLog(t, logs, "nats reconnected", 1)
	lost := logs.FilterMessage("nats connection lost; reconnecting").Len()
	back := logs.FilterMessage("nats reconnected").Len()
	if lost != 1 || back != 1 {
		t.Fatalf("one disconnect and one reconnect must be logged once each: got %d and %d", lost, back)
	}
	for _, e := range logs.All() {
		t.Logf("log: %s %v", e.Message, e.ContextMap())
		if e.Message == "nats connection lost; reconnecting" && e.ContextMap()["url"] == "" {
			t.Errorf("the disconnect log names no server")
		}
		for _, f := range e.Context {
			if u.User != nil {
				if pw, ok := u.User.Password(); ok && strings.Contains(f.String, pw) {
					t.Fatalf("log %q leaks the password", e.Message)
				}
			}
		}
	}
}

// openProxied opens a backend whose connection goes through a fault proxy,
// logging to an observer.
func openProxied(t *testing.T, p place) (*natsclaim.Backend, *faultproxy.Proxy, *url.URL, *observer.ObservedLogs) {
	t.Helper()
	proxy, err := faultproxy.Start("127.0.0.1:0", hostPort(t, p.url))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u, err := url.Parse(strings.TrimSpace(strings.Split(p.url, ",")[0]))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	core, logs := observer.New(zap.InfoLevel)
	o := p.options()
	o.URL, o.Log = u.String(), zap.New(core)
	return open(t, o), proxy, u, logs
}

// mustFail claims r on b within a second and wants an error: no decision
// can reach b.
func mustFail(t *testing.T, b *natsclaim.Backend, r claim.Request, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := b.Claim(ctx, r); err == nil {
		t.Fatalf("%s must return an error", what)
	} else {
		t.Logf("%s: %v", what, err)
	}
}

// awaitLog waits until msg has been logged n times.
func awaitLog(t *testing.T, logs *observer.ObservedLogs, msg string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for logs.FilterMessage(msg).Len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%q was not logged %d times within 20s", msg, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClaimDuringDisconnectIsNeverDeliveredLater: a claim sent while the
// connection is down fails, and is not kept to be sent after the
// reconnection: the caller has given it up (re-sent until the slot is
// late, then abandoned), and a copy arriving later would win a slot past
// maxLate, or one another instance has claimed since, with nobody
// running it. nats.go keeps such publishes in a reconnect buffer by
// default; the backend turns it off.
func TestClaimDuringDisconnectIsNeverDeliveredLater(t *testing.T) {
	p := newPlace(t)
	b, proxy, _, logs := openProxied(t, p)
	direct := open(t, p.options())
	mustClaim(t, b, req("warm"), claim.Won, "a claim before the cut")

	proxy.SetMode(faultproxy.Cut)
	awaitLog(t, logs, "nats connection lost; reconnecting", 1)
	r := req("during-cut")
	mustFail(t, b, r, "a claim sent while disconnected")
	proxy.SetMode(faultproxy.Pass)
	awaitLog(t, logs, "nats reconnected", 1)
	// A round trip on the reconnected connection: anything it had kept
	// from the cut was sent before it, and the server has processed it.
	mustClaim(t, b, req("after-cut"), claim.Won, "a claim after the reconnection")
	mustClaim(t, direct, other(r), claim.Won, "another instance's claim of the slot after the reconnection")
	mustClaim(t, b, r, claim.Lost, "the given-up claim, sent again")
}

// TestDedupOutlivesDeletedMessage: docs/spec.md#s8 — the de-duplication entry
// outlives a deleted message; the claim is then lost for everyone, the
// first winner's re-send included, and never won twice.
func TestDedupOutlivesDeletedMessage(t *testing.T) {
	t.Run("Created", func(t *testing.T) { testDedupOutlivesDeletedMessage(t, false) })
	// An operator's stream with AllowDirect: GetMsg is a direct get, and
	// its "not found" is asked again of the leader.
	t.Run("AllowDirect", func(t *testing.T) { testDedupOutlivesDeletedMessage(t, true) })
}

func testDedupOutlivesDeletedMessage(t *testing.T, allowDirect bool) {
	p := newPlace(t)
	if allowDirect {
		createStream(t, p, jetstream.StreamConfig{Duplicates: time.Hour, AllowDirect: true})
	}
	b := open(t, p.options())
	if allowDirect {
		// The re-send path reads the stored claim with a direct get.
		r := req("direct")
		mustClaim(t, b, r, claim.Won, "the first claim")
		mustClaim(t, b, r, claim.Won, "the re-sent claim, same token")
		mustClaim(t, b, other(r), claim.Lost, "another token")
		// The leader's read, used when a direct get says "not found".
		m, err := b.LeaderGetMsg(t.Context(), 1)
		if err != nil || !strings.Contains(string(m.Data), string(r.Token)) || m.Subject != p.ns+".direct.claims" || m.Sequence != 1 {
			t.Fatalf("leader get of seq 1: %+v, %v", m, err)
		}
		if _, err := b.LeaderGetMsg(t.Context(), 99); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("leader get of a missing seq: want jetstream.ErrMsgNotFound, got %v", err)
		}
	}
	r := req("deleted")
	mustClaim(t, b, r, claim.Won, "the first claim")
	s, err := rawJS(t, p.url).Stream(t.Context(), p.stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(t.Context(), p.ns+".deleted.claims")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(t.Context(), m.Sequence); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, b, other(r), claim.Lost, "another token after the claim message was deleted")
	mustClaim(t, b, r, claim.Lost, "the winner's re-send after its message was deleted")
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 && !allowDirect || info.State.Msgs != 1 && allowDirect {
		t.Fatalf("nothing may be stored again for the run: stream has %d messages", info.State.Msgs)
	}
}

func TestResultsListed(t *testing.T) {
	p := newPlace(t)
	b := open(t, p.options())
	ctx := t.Context()
	base := time.Now().Truncate(time.Second).Add(-time.Minute)
	mk := func(job string, off time.Duration, fin *claim.Finish) claim.Request {
		r := req(job)
		r.Slot, r.Now = base.Add(off).UnixMilli(), base.Add(off)
		mustClaim(t, b, r, claim.Won, "claim "+job)
		mustClaim(t, b, other(r), claim.Lost, "another claim of "+job)
		if fin != nil {
			if err := b.Finish(ctx, r.Fence(1), *fin); err != nil {
				t.Fatalf("finish %s: %v", job, err)
			}
			// A re-sent Finish is stored once.
			if err := b.Finish(ctx, r.Fence(1), *fin); err != nil {
				t.Fatalf("re-sent finish %s: %v", job, err)
			}
		}
		return r
	}
	fin := func(st claim.Status, code int, tail string) *claim.Finish {
		return &claim.Finish{Status: st, ExitCode: code, OutputTail: tail, StartedAt: base, FinishedAt: base.Add(1500 * time.Millisecond)}
	}
	a1 := mk("a", 0, fin(claim.StatusSucceeded, 0, "ok\n"))
	bb := mk("b", time.Second, fin(claim.StatusFailed, 2, "boom\n"))
	a2 := mk("a", 2*time.Second, fin(claim.StatusInterrupted, -1, "cut"))
	a3 := mk("a", 3*time.Second, nil) // still running

	runs, err := b.ListRuns(ctx, claim.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		r      claim.Request
		status claim.Status
		exit   *int
	}{{a3, claim.StatusRunning, nil}, {a2, claim.StatusInterrupted, nil}, {bb, claim.StatusFailed, ptr(2)}, {a1, claim.StatusSucceeded, ptr(0)}}
	if len(runs) != len(want) {
		t.Fatalf("want %d runs, got %d: %+v", len(want), len(runs), runs)
	}
	for i, w := range want {
		g := runs[i]
		if g.Job != w.r.Job || g.Slot != w.r.Slot || g.Status != w.status || g.Instance != w.r.Instance ||
			g.Token != w.r.Token || g.Attempt != 1 || fmtExit(g.ExitCode) != fmtExit(w.exit) {
			t.Errorf("run %d: got %s@%d %s instance %s token %s attempt %d exit %s; want %s@%d %s instance %s token %s attempt 1 exit %s",
				i, g.Job, g.Slot, g.Status, g.Instance, g.Token.Short(), g.Attempt, fmtExit(g.ExitCode),
				w.r.Job, w.r.Slot, w.status, w.r.Instance, w.r.Token.Short(), fmtExit(w.exit))
		}
	}
	if r := runs[0]; r.StartedAt.IsZero() || !r.FinishedAt.IsZero() || r.Duration() != 0 {
		t.Errorf("a running run has a start (the claim's store time) and no end: %+v", r)
	}
	if r := runs[2]; r.Duration() != 1500*time.Millisecond || r.OutputTail != "boom\n" {
		t.Errorf("the failed run: duration %v tail %q", r.Duration(), r.OutputTail)
	}
	runs, err = b.ListRuns(ctx, claim.ListQuery{Job: "a", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Slot != a3.Slot || runs[1].Slot != a2.Slot {
		t.Fatalf("--job a --limit 2: want a@%d, a@%d; got %+v", a3.Slot, a2.Slot, runs)
	}
	s, err := rawJS(t, p.url).Stream(ctx, p.stream)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.CachedInfo().State; st.Consumers != 0 || st.Msgs != 7 {
		t.Fatalf("after status: want no consumers left and 7 messages (4 claims, 3 results each stored once), got %d consumers, %d messages",
			st.Consumers, st.Msgs)
	}
}

func ptr(i int) *int { return &i }

func fmtExit(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// TestListReachesBack: a rare job's runs lie behind many of a busy job's;
// status of the rare job widens its read until it finds them.
func TestListReachesBack(t *testing.T) {
	p := newPlace(t)
	b := open(t, p.options())
	ctx := t.Context()
	base := time.Now().Truncate(time.Second).Add(-30 * time.Minute)
	claimFinish := func(job string, i int) claim.Request {
		r := req(job)
		r.Slot, r.Now, r.MaxLate = base.Add(time.Duration(i)*time.Second).UnixMilli(), time.Now(), time.Hour
		mustClaim(t, b, r, claim.Won, "claim "+job)
		if err := b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded, StartedAt: r.SlotTime(), FinishedAt: r.SlotTime()}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	var rare []claim.Request
	for i := range 3 {
		rare = append(rare, claimFinish("rare", i))
	}
	for i := range 600 {
		claimFinish("busy", 10+i)
	}
	runs, err := b.ListRuns(ctx, claim.ListQuery{Job: "rare"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].Slot != rare[2].Slot || runs[2].Slot != rare[0].Slot {
		t.Fatalf("status --job rare must find its 3 runs behind 1200 newer messages, got %+v", runs)
	}
	runs, err = b.ListRuns(ctx, claim.ListQuery{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 5 || runs[0].Job != "busy" || runs[0].Slot != base.Add(609*time.Second).UnixMilli() {
		t.Fatalf("status --limit 5: want the 5 newest busy runs, got %+v", runs)
	}
	runs, err = b.ListRuns(ctx, claim.ListQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 603 {
		t.Fatalf("status --limit 1000 must see all 603 runs, got %d", len(runs))
	}
}

// TestFinishOnAnotherBackend: the result is recorded through a backend that
// did not win the claim (a restarted process): status takes the instance
// from the claim.
func TestFinishOnAnotherBackend(t *testing.T) {
	p := newPlace(t)
	b1, b2 := open(t, p.options()), open(t, p.options())
	r := req("elsewhere")
	mustClaim(t, b1, r, claim.Won, "claim")
	fin := claim.Finish{Status: claim.StatusSucceeded, StartedAt: r.Now, FinishedAt: r.Now.Add(time.Second)}
	if err := b2.Finish(t.Context(), r.Fence(1), fin); err != nil {
		t.Fatal(err)
	}
	runs, err := b1.ListRuns(t.Context(), claim.ListQuery{Job: r.Job})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Instance != r.Instance || runs[0].Status != claim.StatusSucceeded {
		t.Fatalf("want the run succeeded by %s, got %+v", r.Instance, runs)
	}
}

// TestHugeOutputTail: a tail above the server's max payload is cut from
// its start so that the result is still recorded.
func TestHugeOutputTail(t *testing.T) {
	p := newPlace(t)
	b := open(t, p.options())
	r := req("huge")
	mustClaim(t, b, r, claim.Won, "claim")
	tail := strings.Repeat("é", 1<<20) + "the end\n"
	fin := claim.Finish{Status: claim.StatusFailed, ExitCode: 1, OutputTail: tail, StartedAt: r.Now, FinishedAt: r.Now}
	if err := b.Finish(t.Context(), r.Fence(1), fin); err != nil {
		t.Fatalf("finish with a 2 MiB tail: %v", err)
	}
	runs, err := b.ListRuns(t.Context(), claim.ListQuery{Job: r.Job})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || !strings.HasSuffix(runs[0].OutputTail, "é"+"the end\n") || len(runs[0].OutputTail) >= len(tail) {
		t.Fatalf("want the tail's end, cut to fit; got %d runs, tail of %d bytes", len(runs), len(runs[0].OutputTail))
	}
}

func TestConnectErrorHidesCredentials(t *testing.T) {
	requireNATS(t)
	for _, u := range []string{"nats://user:s3cretpw@127.0.0.1:1", "nats://s3cretpw@127.0.0.1:1", "nats://user:s3cretpw@127.0.0.1:x"} {
		_, err := natsclaim.New(t.Context(), natsclaim.Options{URL: u, Stream: "X", Namespace: "x"})
		if err == nil {
			t.Fatalf("connect to %s must fail", secret.Redact(u))
		}
		if strings.Contains(err.Error(), "s3cretpw") {
			t.Fatalf("the error leaks the secret: %v", err)
		}
		t.Logf("%v", err)
	}
}

// TestInProcessRecognised: the 10158 answer of clustered servers, as
// PublishMsg returns it, is recognised for a brief re-publish (a single
// server never answers it, so only the error's shape is tested).
func TestInProcessRecognised(t *testing.T) {
	apiErr := &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}
	if !natsclaim.IsInProcess(fmt.Errorf("nats: %w", apiErr)) {
		t.Fatal("10158 wrapped as PublishMsg wraps it must be recognised")
	}
	if natsclaim.IsInProcess(fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: 10060})) || natsclaim.IsInProcess(context.DeadlineExceeded) {
		t.Fatal("other errors are not 10158")
	}
}

// TestLostNamesTheWinner: the answer to a lost claim names the instance
// whose claim was stored (read back by the loser), for the work spread.
func TestLostNamesTheWinner(t *testing.T) {
	b := open(t, newPlace(t).options())
	r := req("named")
	mustClaim(t, b, r, claim.Won, "the first claim")
	res, err := b.Claim(t.Context(), other(r))
	if err != nil || res.Outcome != claim.Lost || res.Holder != r.Instance {
		t.Fatalf("another instance's claim: %+v %v, want lost naming %s", res, err, r.Instance)
	}
	res, err = b.Claim(t.Context(), r)
	if err != nil || res.Outcome != claim.Won || res.Holder != "" {
		t.Fatalf("the winner's re-sent claim: %+v %v, want won naming nobody", res, err)
	}
}

func TestSingleServerRefusesReplicas(t *testing.T) {
	p := newPlace(t)
	o := p.options()
	o.Replicas = 3
	_, err := natsclaim.New(t.Context(), o)
	if !claim.IsPermanent(err) || !strings.Contains(err.Error(), "is a single server, not a cluster") ||
		!strings.Contains(err.Error(), "set backend.nats.replicas to 1") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("replicas 3 on a single server: want a one-line refusal naming the single server and the fix, got %v", err)
	}
	if _, err := natsclaim.Inspect(t.Context(), o); !claim.IsPermanent(err) {
		t.Errorf("validate (Inspect) must refuse it too, got %v", err)
	}
}

func TestInspectSingleServer(t *testing.T) {
	p := newPlace(t)
	r, err := natsclaim.Inspect(t.Context(), natsclaim.Options{URL: p.url, Stream: p.stream})
	if err != nil {
		t.Fatal(err)
	}
	if note := r.String(); !strings.HasPrefix(note, "nats: single server ") ||
		!strings.Contains(note, "stream "+p.stream+": not created yet; anarchond creates it with 1 replica(s) (chosen for a single server)") {
		t.Errorf("before the stream exists, validate prints:\n%s", note)
	}
	open(t, p.options())
	r, err = natsclaim.Inspect(t.Context(), p.options())
	if err != nil {
		t.Fatal(err)
	}
	if note := r.String(); !strings.Contains(note, "stream "+p.stream+": 1 replica(s), leader "+r.Topology.Server) || strings.Contains(note, "warning") {
		t.Errorf("with the stream created, validate prints:\n%s", note)
	}
	s, err := rawJS(t, p.url).Stream(t.Context(), p.stream)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; c.Replicas != 1 || c.Placement != nil {
		t.Errorf("on a single server the backend created %d replicas placed %+v, want 1 and no placement", c.Replicas, c.Placement)
	}
}
