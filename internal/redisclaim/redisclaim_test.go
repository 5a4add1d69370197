package redisclaim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/redisclaim"
	"github.com/anarchon/anarchon/internal/store"
	"github.com/anarchon/anarchon/internal/testserver"
)

// testURL is the Redis the tests use: ANARCHON_TEST_REDIS_URL, or the local
// server (testserver.For). It may be any URL the backend accepts (a
// Cluster seed list, a Sentinel set).
func testURL() string { return testserver.For("redis").URL }

// requireRedis skips or fails t unless the test server answers.
func requireRedis(t testing.TB) string {
	t.Helper()
	u := testURL()
	first, _, _ := strings.Cut(u, ",")
	p, err := url.Parse(first)
	switch {
	case err != nil:
		t.Fatalf("ANARCHON_TEST_REDIS_URL is not a URL")
	case p.Scheme != "unix":
		port := p.Port()
		if port == "" {
			port = "6379"
		}
		testserver.For("redis").Require(t, net.JoinHostPort(p.Hostname(), port))
	}
	return u
}

// newNamespace returns a namespace of the test's own and deletes its keys
// when the test ends, checking that none are left.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := fmt.Sprintf("anarchon-test-%016x", rand.Uint64())
	c := rawClient(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := deleteNamespace(ctx, c, ns); err != nil {
			t.Errorf("delete the keys of namespace %s: %v", ns, err)
		}
		if left, err := namespaceKeys(ctx, c, ns); err != nil || len(left) > 0 {
			t.Errorf("namespace %s: keys left behind %v (%v)", ns, left, err)
		}
	})
	return ns
}

// rawClient is a plain client on the test server, closed at the end.
func rawClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	c, _, err := redisclaim.NewClient(requireRedis(t), "")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// namespaceKeys lists every key of ns ("{ns:..." and "ns:..."), on every
// master of a cluster.
func namespaceKeys(ctx context.Context, c redis.UniversalClient, ns string) ([]string, error) {
	var keys []string
	scan := func(ctx context.Context, n redis.UniversalClient) error {
		for _, pattern := range []string{"{" + ns + ":*", ns + ":*"} {
			it := n.Scan(ctx, 0, pattern, 1000).Iterator()
			for it.Next(ctx) {
				keys = append(keys, it.Val())
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu = make(chan struct{}, 1)
		err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			mu <- struct{}{}
			defer func() { <-mu }()
			return scan(ctx, n)
		})
		return keys, err
	}
	return keys, scan(ctx, c)
}

// deleteNamespace deletes every key of ns.
func deleteNamespace(ctx context.Context, c redis.UniversalClient, ns string) error {
	keys, err := namespaceKeys(ctx, c, ns)
	if err != nil {
		return err
	}
	for _, k := range keys { // one by one: the keys span cluster slots
		if err := c.Del(ctx, k).Err(); err != nil {
			return err
		}
	}
	return nil
}

// open opens a backend on namespace ns, closed at the end of the test.
func open(t testing.TB, ns string, mod ...func(*redisclaim.Options)) *redisclaim.Backend {
	t.Helper()
	o := redisclaim.Options{URL: requireRedis(t), Namespace: ns}
	for _, m := range mod {
		m(&o)
	}
	b, err := redisclaim.New(t.Context(), o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

// quiet discards go-redis's own log lines (dial retries of the cases that
// connect to closed ports).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

func TestConformance(t *testing.T) {
	requireRedis(t)
	claimtest.Exercise(t, claimtest.Harness{
		New: func(t *testing.T) claim.Backend {
			return open(t, newNamespace(t))
		},
		Open: func(t *testing.T, b claim.Backend) claim.Backend {
			return open(t, b.(*redisclaim.Backend).Namespace())
		},
		// No Transient: a claim race must never see an error.
		Controller: true,
		Registry:   true,
		// An ACL user whose keys are another namespace's.
		Permanent: func(t *testing.T) (claim.Backend, error) {
			ns := newNamespace(t)
			u := aclUser(t, "~other-"+ns+":*", "&*", "+@all")
			b, err := redisclaim.New(t.Context(), redisclaim.Options{URL: u, Namespace: ns})
			if err == nil {
				t.Cleanup(func() { b.Close() })
			}
			return b, err
		},
	})
}

// aclUser creates an ACL user with rules, deleted when t ends, and returns
// the test server's URL with its name and password.
func aclUser(t *testing.T, rules ...string) string {
	t.Helper()
	c := rawClient(t)
	tok := string(claim.NewToken())
	user, pass := "anarchon-acl-"+tok[:12], tok[12:]
	args := append([]any{"ACL", "SETUSER", user, "on", ">" + pass}, anySlice(rules)...)
	if err := c.Do(t.Context(), args...).Err(); err != nil {
		t.Fatalf("create the ACL user: %v", err)
	}
	t.Cleanup(func() { c.Do(context.Background(), "ACL", "DELUSER", user) })
	u, err := url.Parse(requireRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, pass)
	return u.String()
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// raceNamespaceEnv names the namespace of the process race in the children;
// raceStrategyEnv its strategy (empty: lease).
const (
	raceNamespaceEnv = "REDISCLAIM_RACE_NAMESPACE"
	raceStrategyEnv  = "REDISCLAIM_RACE_STRATEGY"
)

// TestProcessRace: 3 processes × 4 goroutines, each process with its own
// connections, claim the same 100 slots: Redis alone picks the winners.
func TestProcessRace(t *testing.T) {
	ns := newNamespace(t)
	claimtest.ProcessRace(t, claimtest.ProcessOptions{
		Processes:  3,
		Goroutines: 4,
		Slots:      100,
		Env:        []string{raceNamespaceEnv + "=" + ns, "ANARCHON_TEST_REDIS_URL=" + testURL()},
		Open:       func(t *testing.T) claim.Backend { return open(t, ns) },
	})
}

// TestHelperProcess is a race process of TestProcessRace; on its own it
// does nothing.
func TestHelperProcess(t *testing.T) {
	claimtest.HelperProcess(t, claimtest.HelperOptions{
		Open: func(ctx context.Context) (claim.Backend, error) {
			o := redisclaim.Options{URL: testURL(), Namespace: os.Getenv(raceNamespaceEnv)}
			if s := os.Getenv(raceStrategyEnv); s != "" && s != redisclaim.StrategyLease {
				o.Strategy = s
				return redisclaim.NewClaimOnly(ctx, o)
			}
			return redisclaim.New(ctx, o)
		},
	})
}

// request is a claim of (job, slot) with a fresh token.
func request(job string, slot int64) claim.Request {
	return claim.Request{Job: job, Slot: slot, Token: claim.NewToken(), Instance: "i-" + claim.NewToken().Short(),
		MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapSkip}
}

func mustWin(t *testing.T, b claim.Backend, r claim.Request, attempt int) claim.Result {
	t.Helper()
	res, err := b.Claim(t.Context(), r)
	if err != nil || res.Outcome != claim.Won || res.Attempt != attempt {
		t.Fatalf("claim %s@%d: want won(%d), got %+v, %v", r.Job, r.Slot, attempt, res, err)
	}
	return res
}

// TestNoScriptFallback: after SCRIPT FLUSH (a restart, a failover to a
// replica that never saw the scripts) every operation still works: EVALSHA
// answers NOSCRIPT and the client falls back to EVAL.
func TestNoScriptFallback(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	flush := func() {
		t.Helper()
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatalf("script flush: %v", err)
		}
	}
	slot := time.Now().UnixMilli()
	a := request("noscript", slot)
	flush()
	mustWin(t, b, a, 1)
	flush()
	if _, _, err := b.Read(ctx, a.Job, a.Slot); err != nil {
		t.Fatalf("read after SCRIPT FLUSH: %v", err)
	}
	flush()
	if _, err := b.Renew(ctx, a.Fence(1), time.Minute); err != nil {
		t.Fatalf("renew after SCRIPT FLUSH: %v", err)
	}
	flush()
	if err := b.Release(ctx, a.Fence(1)); err != nil {
		t.Fatalf("release after SCRIPT FLUSH: %v", err)
	}
	flush()
	bk := request(a.Job, a.Slot)
	mustWin(t, b, bk, 2)
	flush()
	if err := b.Finish(ctx, bk.Fence(2), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
		t.Fatalf("finish after SCRIPT FLUSH: %v", err)
	}
	flush()
	if _, err := b.Prune(ctx, time.Hour); err != nil {
		t.Fatalf("prune after SCRIPT FLUSH: %v", err)
	}
	// The fallback's EVAL cached the script again: EVALSHA finds it.
	flush()
	next := request(a.Job, a.Slot+1000)
	next.Overlap = claim.OverlapAllow
	mustWin(t, b, next, 1)
	var node redis.Scripter = c
	if cc, ok := c.(*redis.ClusterClient); ok { // the node that ran it
		n, err := cc.MasterForKey(ctx, "{"+ns+":noscript}:state")
		if err != nil {
			t.Fatal(err)
		}
		node = n
	}
	if ok, err := node.ScriptExists(ctx, redisclaim.LeaseClaimSHA).Result(); err != nil || !slices.Equal(ok, []bool{true}) {
		t.Fatalf("after the fallback the claim script must be cached: %v %v", ok, err)
	}
	next = request(a.Job, a.Slot+2000)
	next.Overlap = claim.OverlapAllow
	mustWin(t, b, next, 1)
}

// closedAddr returns a local address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestPasswordNeverInErrors: whatever goes wrong while connecting, the
// error names the server but never the password.
func TestPasswordNeverInErrors(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	addr := closedAddr(t)
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	t.Run("cases", func(t *testing.T) {
		testPasswordCases(t, secret, addr, pwFile, log)
	})
	for _, e := range logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, secret) {
			t.Fatalf("a log line quotes the password: %s", line)
		}
	}
	if logs.FilterMessage("connecting to redis").Len() == 0 {
		t.Fatalf("want the connection logged (with the password hidden): %v", logs.All())
	}
}

func testPasswordCases(t *testing.T, secret, addr, pwFile string, log *zap.Logger) {
	for _, tc := range []struct {
		name, url, file string
	}{
		{"closed port", "redis://anarchon:" + secret + "@" + addr + "/0", ""},
		{"closed port, escaped password", "redis://anarchon:" + secret + "%2F%40@" + addr + "/0", ""},
		{"password file", "redis://anarchon@" + addr + "/0", pwFile},
		{"password file over URL password", "redis://anarchon:" + secret + "@" + addr + "/0", pwFile},
		{"bad port", "redis://anarchon:" + secret + "@127.0.0.1:port/0", ""},
		{"unescaped slash", "redis://anarchon:" + secret + "/x@127.0.0.1:6379/0", ""},
		{"bad option", "redis://anarchon:" + secret + "@" + addr + "/0?dial_timeout=soon", ""},
		{"unknown option", "redis://anarchon:" + secret + "@" + addr + "/0?nonsense=1", ""},
		{"password option", "redis://" + addr + "/0?password=" + secret, ""},
		{"cluster", "redis://anarchon:" + secret + "@" + addr + ",redis://" + closedAddr(t), ""},
		{"sentinel", "redis://anarchon:" + secret + "@" + addr + "/0?master_name=mymaster", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			b, err := redisclaim.New(ctx, redisclaim.Options{URL: tc.url, PasswordFile: tc.file,
				Namespace: "anarchon-test-nothing", Log: log})
			if err == nil {
				b.Close()
				t.Fatalf("New(%s) must fail", strings.ReplaceAll(tc.url, secret, "xxxxx"))
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret) {
				t.Fatalf("the error quotes the password: %v", err)
			}
			if !strings.Contains(err.Error(), "redis") {
				t.Fatalf("the error should say what failed: %v", err)
			}
			t.Logf("%v", err)
		})
	}
}

// crc16 is the CRC16/XMODEM of Redis Cluster's key slots.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keySlot is Redis Cluster's slot of key, hash tags included.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16([]byte(key)) % 16384
}

func TestKeySlotReference(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{"123456789": 0x31C3 % 16384, "foo": 12182, "somekey": 11058,
		"{user1000}.following": keySlot("user1000")} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestKeysOfAJobShareOneSlot: every key a job's life writes hashes to one
// cluster slot, so that each script's keys are in one slot; only the index
// of jobs is elsewhere.
func TestKeysOfAJobShareOneSlot(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	now := time.Now().UnixMilli()
	for _, job := range []string{"alpha", "beta-2", "x"} {
		a := request(job, now)
		a.Lease = 50 * time.Millisecond
		mustWin(t, b, a, 1)
		if err := b.Release(ctx, a.Fence(1)); err != nil {
			t.Fatal(err)
		}
		bk := request(job, now)
		mustWin(t, b, bk, 2)
		if _, err := b.Renew(ctx, bk.Fence(2), time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := b.Finish(ctx, bk.Fence(2), claim.Finish{Status: claim.StatusFailed, ExitCode: 1}); err != nil {
			t.Fatal(err)
		}
		live := request(job, now+1000)
		mustWin(t, b, live, 1)
	}
	keys, err := namespaceKeys(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	tag := regexp.MustCompile(`^\{` + regexp.QuoteMeta(ns) + `:([^}]+)\}:(state|slots|live|history)$`)
	perJob := map[string]map[uint16]bool{}
	kinds := map[string][]string{}
	for _, k := range keys {
		if k == ns+":jobs" {
			continue
		}
		m := tag.FindStringSubmatch(k)
		if m == nil {
			t.Fatalf("key %q is neither the jobs index nor {%s:<job>}:<kind>", k, ns)
		}
		if perJob[m[1]] == nil {
			perJob[m[1]] = map[uint16]bool{}
		}
		perJob[m[1]][keySlot(k)] = true
		kinds[m[1]] = append(kinds[m[1]], m[2])
	}
	for job, slots := range perJob {
		if len(slots) != 1 {
			t.Errorf("the keys of job %s hash to %d cluster slots, want 1", job, len(slots))
		}
		if want := "history live slots state"; strings.Join(kinds[job], " ") != want {
			t.Errorf("job %s has keys %v, want %s", job, kinds[job], want)
		}
	}
	if len(perJob) != 3 {
		t.Fatalf("want the keys of 3 jobs, got %v", keys)
	}
}

// history reads a job's history stream: "event/who/attempt" per entry.
func history(t *testing.T, c redis.UniversalClient, ns, job string, who map[claim.Token]string) []string {
	t.Helper()
	msgs, err := c.XRange(t.Context(), "{"+ns+":"+job+"}:history", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, fmt.Sprintf("%s/%s/%s", m.Values["event"], who[claim.Token(fmt.Sprint(m.Values["token"]))], m.Values["attempt"]))
	}
	return out
}

// TestHistory checks the history events of a run's life: claimed,
// released, takeover, finished, and interrupted.
func TestHistory(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	slot := time.Now().UnixMilli()
	a := request("h", slot)
	mustWin(t, b, a, 1)
	if err := b.Release(ctx, a.Fence(1)); err != nil {
		t.Fatal(err)
	}
	bk := request("h", slot)
	mustWin(t, b, bk, 2)
	if err := b.Finish(ctx, bk.Fence(2), claim.Finish{Status: claim.StatusFailed, ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	// A run out of attempts is interrupted by the next claim.
	d := request("h", slot+1000)
	d.Lease, d.MaxAttempts = time.Millisecond, 1
	mustWin(t, b, d, 1)
	time.Sleep(5 * time.Millisecond)
	e := request("h", slot+1000)
	e.MaxAttempts = 1
	if res, err := b.Claim(ctx, e); err != nil || res.Outcome != claim.Done {
		t.Fatalf("claim after the only attempt expired: want done, got %+v %v", res, err)
	}
	who := map[claim.Token]string{a.Token: "a", bk.Token: "b", d.Token: "d", e.Token: "e"}
	got := strings.Join(history(t, c, ns, "h", who), " ")
	if want := "claimed/a/1 released/a/1 takeover/b/2 finished/b/2 claimed/d/1 interrupted/d/1"; got != want {
		t.Fatalf("history: want %s, got %s", want, got)
	}
}

// TestHistoryCapped: the history stream is trimmed to about HistoryMaxLen
// (XADD MAXLEN ~ trims whole stream nodes, stream-node-max-entries each).
func TestHistoryCapped(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns, func(o *redisclaim.Options) { o.HistoryMaxLen = 10 })
	c := rawClient(t)
	ctx := t.Context()
	node := int64(100)
	if v, err := c.ConfigGet(ctx, "stream-node-max-entries").Result(); err == nil {
		if n, err := strconv.ParseInt(v["stream-node-max-entries"], 10, 64); err == nil && n > 0 {
			node = n
		}
	}
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	events := 3 * int(node)
	for i := range events / 2 {
		r := request("capped", base+int64(i))
		r.Overlap = claim.OverlapAllow
		mustWin(t, b, r, 1)
		if err := b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.XLen(ctx, "{"+ns+":capped}:history").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n > 10+node || n < 10 {
		t.Fatalf("after %d events with HistoryMaxLen 10 the stream holds %d, want 10..%d", events, n, 10+node)
	}
}

// TestFinishResent: a Finish re-sent after its answer was lost (go-redis
// retries, the runner retries) succeeds; a different result is fenced.
func TestFinishResent(t *testing.T) {
	b := open(t, newNamespace(t))
	ctx := t.Context()
	a := request("resent", time.Now().UnixMilli())
	mustWin(t, b, a, 1)
	fin := claim.Finish{Status: claim.StatusFailed, ExitCode: 4, OutputTail: "boom\n"}
	for i := range 2 {
		if err := b.Finish(ctx, a.Fence(1), fin); err != nil {
			t.Fatalf("finish #%d: %v", i+1, err)
		}
	}
	other := fin
	other.ExitCode = 5
	if err := b.Finish(ctx, a.Fence(1), other); !errors.Is(err, claim.ErrFenced) {
		t.Fatalf("a different second result must be fenced, got %v", err)
	}
	bk := request("resent", a.Slot)
	if err := b.Finish(ctx, bk.Fence(1), fin); !errors.Is(err, claim.ErrFenced) {
		t.Fatalf("the same result from another token must be fenced, got %v", err)
	}
	intr := request("resent", a.Slot+1000)
	intr.Overlap = claim.OverlapAllow
	mustWin(t, b, intr, 1)
	ifin := claim.Finish{Status: claim.StatusInterrupted, ExitCode: 143}
	for i := range 2 {
		if err := b.Finish(ctx, intr.Fence(1), ifin); err != nil {
			t.Fatalf("interrupted finish #%d: %v", i+1, err)
		}
	}
	run, _, err := b.Read(ctx, intr.Job, intr.Slot)
	if err != nil || run.Status != claim.StatusInterrupted || run.ExitCode != nil {
		t.Fatalf("an interrupted run has no exit code: %+v %v", run, err)
	}
}

// TestPruneForgetsEmptyJob: pruning every run of a job, with its history,
// removes all its keys and its name from the index.
func TestPruneForgetsEmptyJob(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	old := request("gone", time.Now().Add(-time.Minute).UnixMilli())
	mustWin(t, b, old, 1)
	if err := b.Finish(ctx, old.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	kept := request("kept", time.Now().Add(-time.Minute).UnixMilli())
	mustWin(t, b, kept, 1) // running: never pruned
	time.Sleep(5 * time.Millisecond)
	n, err := b.Prune(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("prune: want 1, got %d %v", n, err)
	}
	keys, err := namespaceKeys(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	// kept's only run is running: in :live, not yet in :slots.
	want := []string{"{" + ns + ":kept}:history", "{" + ns + ":kept}:live",
		"{" + ns + ":kept}:state", ns + ":jobs"}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("after pruning job gone: want keys %v, got %v", want, keys)
	}
	jobs, err := c.SMembers(ctx, ns+":jobs").Result()
	if err != nil || !slices.Equal(jobs, []string{"kept"}) {
		t.Fatalf("the index must list only kept: %v %v", jobs, err)
	}
	// The job comes back with its next won claim.
	mustWin(t, b, request("gone", time.Now().UnixMilli()), 1)
	runs, err := b.ListRuns(ctx, claim.ListQuery{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("status after the job came back: want 2 runs, got %+v %v", runs, err)
	}
}

// TestPruneBatches: a backlog larger than one prune batch goes in several.
func TestPruneBatches(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	ctx := t.Context()
	base := time.Now().Add(-3 * time.Hour).UnixMilli()
	const runs = 1203
	// A live run in the middle of the backlog stays.
	var live claim.Request
	for i := range runs {
		r := request("backlog", base+int64(i))
		r.MaxLate, r.Overlap = 4*time.Hour, claim.OverlapAllow
		mustWin(t, b, r, 1)
		if i == runs/2 {
			live = r
			continue
		}
		if err := b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.Prune(ctx, time.Hour)
	if err != nil || n != runs-1 {
		t.Fatalf("prune: want %d, got %d %v", runs-1, n, err)
	}
	got, err := b.ListRuns(ctx, claim.ListQuery{Job: "backlog"})
	if err != nil || len(got) != 1 || got[0].Slot != live.Slot {
		t.Fatalf("only the live run must be left: %+v %v", got, err)
	}
}

// TestBadNames: names that would break the hash tag are refused.
func TestBadNames(t *testing.T) {
	if _, err := redisclaim.New(t.Context(), redisclaim.Options{URL: "redis://127.0.0.1:1", Namespace: "a{b"}); err == nil ||
		!strings.Contains(err.Error(), "must not contain") {
		t.Fatalf("a namespace with { must be refused: %v", err)
	}
	b := open(t, newNamespace(t))
	r := request("a}b", time.Now().UnixMilli())
	if _, err := b.Claim(t.Context(), r); err == nil || !strings.Contains(err.Error(), "claim a}b@") {
		t.Fatalf("a job name with } must be refused, naming the run: %v", err)
	}
}

// TestFactory: backend.type redis opens the strategy the config names:
// lease a claim.Leaser, the claim-only ones a ClaimOnly (auto resolved);
// idmp on a server without XADD IDMP is a clear error.
func TestFactory(t *testing.T) {
	cfg := func(strategy string) store.OpenParams {
		return store.OpenParams{Namespace: newNamespace(t), Settings: redisclaim.Settings{URL: requireRedis(t), Strategy: strategy}}
	}
	b, err := store.Open(t.Context(), "redis", cfg("lease"))
	if err != nil {
		t.Fatalf("open strategy lease: %v", err)
	}
	defer b.Close()
	if _, ok := b.(claim.Leaser); !ok {
		t.Fatalf("strategy lease must open a claim.Leaser, got %T", b)
	}
	mustWin(t, b, request("factory", time.Now().UnixMilli()), 1)
	idmp := serverHasIDMP(t)
	for _, s := range []string{"stream-id", "idmp", "script", "auto"} {
		want := s
		if s == "auto" {
			want = map[bool]string{true: "idmp", false: "script"}[idmp]
		}
		b, err := store.Open(t.Context(), "redis", cfg(s))
		if s == "idmp" && !idmp {
			if err == nil || !strings.Contains(err.Error(), "redis strategy idmp needs Redis 8.6 or later (XADD IDMP)") {
				t.Errorf("strategy idmp on a server without IDMP: want the clear error, got %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("open strategy %s: %v", s, err)
			continue
		}
		co, ok := b.(*redisclaim.ClaimOnly)
		if !ok || co.Strategy() != want {
			t.Errorf("strategy %s: want a ClaimOnly running %s, got %T", s, want, b)
		}
		if _, ok := b.(claim.Leaser); ok {
			t.Errorf("strategy %s must not open a claim.Leaser", s)
		}
		b.Close()
	}
	if _, err := store.Open(t.Context(), "redis", cfg("bogus")); err == nil || !strings.Contains(err.Error(), `unknown redis strategy "bogus"`) {
		t.Errorf("an unknown strategy must be refused: %v", err)
	}
}

// TestGivenClient: a backend on a client it was given does not close it.
func TestGivenClient(t *testing.T) {
	c := rawClient(t)
	b, err := redisclaim.New(t.Context(), redisclaim.Options{Client: c, Namespace: newNamespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	mustWin(t, b, request("given", time.Now().UnixMilli()), 1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("the given client must stay open: %v", err)
	}
}

// TestReadWritesNothing: the cheap read runs read-only (EVALSHA_RO) and
// adds no key.
func TestReadWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	if _, _, err := b.Read(t.Context(), "nobody", 1); !errors.Is(err, claim.ErrNotFound) {
		t.Fatalf("read of an unknown run: want ErrNotFound, got %v", err)
	}
	if keys, err := namespaceKeys(t.Context(), c, ns); err != nil || len(keys) != 0 {
		t.Fatalf("a read must write nothing: keys %v %v", keys, err)
	}
}

// TestMatchesDecide drives the Redis scripts and the in-memory backend
// (claim.Decide under a mutex) through the same random sequence of claims,
// renewals, releases and finishes, and wants the same answer every time:
// the Lua decision table is claim.Decide's. Leases are a minute long, so
// a lease ends only by Release, and slots are either fresh or 2h old with
// maxLate 1h: every decision is the same on both clocks.
func TestMatchesDecide(t *testing.T) {
	b := open(t, newNamespace(t))
	m := memclaim.New(clock.Real{})
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	now := time.Now()
	jobs := []string{"j1", "j2"}
	type runKey struct {
		job  string
		slot int64
	}
	// Each job's slots; new ones keep coming so that runs are claimed,
	// taken over and run out of attempts all along. One in ten is 2h old
	// (late unless claimed before).
	slots := map[string][]int64{}
	tokens := map[runKey][]claim.Token{}
	pick := func() (runKey, claim.Token) {
		job := jobs[rng.IntN(len(jobs))]
		ss := slots[job]
		if len(ss) == 0 || rng.IntN(100) < 8 {
			slot := now.Add(-time.Duration(rng.IntN(600_000)) * time.Millisecond).UnixMilli()
			if rng.IntN(10) == 0 {
				slot = now.Add(-2*time.Hour).UnixMilli() - int64(rng.IntN(1000))
			}
			ss = append(ss, slot)
			slots[job] = ss
		}
		k := runKey{job, ss[max(0, len(ss)-1-rng.IntN(3))]}
		if ts := tokens[k]; len(ts) > 0 && rng.IntN(10) < 5 {
			if rng.IntN(10) < 7 {
				return k, ts[len(ts)-1] // most often the latest claimer: the owner
			}
			return k, ts[rng.IntN(len(ts))]
		}
		tok := claim.NewToken()
		tokens[k] = append(tokens[k], tok)
		return k, tok
	}
	statuses := []claim.Status{claim.StatusSucceeded, claim.StatusFailed, claim.StatusTimeout, claim.StatusInterrupted}
	var log []string
	seen := map[string]int{}
	fail := func(format string, args ...any) {
		t.Helper()
		if len(log) > 30 {
			log = log[len(log)-30:]
		}
		t.Fatalf("%s\nlast steps:\n  %s", fmt.Sprintf(format, args...), strings.Join(log, "\n  "))
	}
	sameErr := func(a, b error) bool {
		return (a == nil) == (b == nil) && errors.Is(a, claim.ErrFenced) == errors.Is(b, claim.ErrFenced)
	}
	for step := range 5000 {
		k, tok := pick()
		f := claim.Fence{Job: k.job, Slot: k.slot, Token: tok, Attempt: 1}
		switch op := rng.IntN(20); {
		case op < 11:
			r := claim.Request{Job: k.job, Slot: k.slot, Token: tok, Instance: "i-" + tok.Short(),
				MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: []int{1, 2, 3, 3, 3}[rng.IntN(5)], Overlap: claim.OverlapSkip}
			if rng.IntN(2) == 0 {
				r.Overlap = claim.OverlapAllow
			}
			got, err := b.Claim(ctx, r)
			if err != nil {
				fail("step %d: claim: %v", step, err)
			}
			want, _ := m.Claim(ctx, r)
			log = append(log, fmt.Sprintf("%d claim %s@%d %s max %d %s: %s(%d)", step, k.job, k.slot, tok.Short(),
				r.MaxAttempts, r.Overlap, want.Outcome, want.Attempt))
			seen[fmt.Sprintf("%s(%d)", want.Outcome, want.Attempt)]++
			if got.Outcome != want.Outcome || got.Attempt != want.Attempt {
				fail("step %d: redis answered %s(%d), claim.Decide %s(%d)", step, got.Outcome, got.Attempt, want.Outcome, want.Attempt)
			}
		case op < 13:
			_, err := b.Renew(ctx, f, time.Minute)
			_, werr := m.Renew(ctx, f, time.Minute)
			log = append(log, fmt.Sprintf("%d renew %s@%d %s: %v", step, k.job, k.slot, tok.Short(), werr))
			if !sameErr(err, werr) {
				fail("step %d: renew: redis %v, memclaim %v", step, err, werr)
			}
		case op < 18:
			err, werr := b.Release(ctx, f), m.Release(ctx, f)
			log = append(log, fmt.Sprintf("%d release %s@%d %s: %v", step, k.job, k.slot, tok.Short(), werr))
			if !sameErr(err, werr) {
				fail("step %d: release: redis %v, memclaim %v", step, err, werr)
			}
		default:
			// A unique output tail: never a re-sent Finish (accepted as
			// recorded), so that every Finish is decided by the fence.
			fin := claim.Finish{Status: statuses[rng.IntN(len(statuses))], ExitCode: rng.IntN(3), OutputTail: fmt.Sprint(step)}
			err, werr := b.Finish(ctx, f, fin), m.Finish(ctx, f, fin)
			log = append(log, fmt.Sprintf("%d finish %s@%d %s %s: %v", step, k.job, k.slot, tok.Short(), fin.Status, werr))
			if !sameErr(err, werr) {
				fail("step %d: finish: redis %v, memclaim %v", step, err, werr)
			}
		}
	}
	t.Logf("claim answers: %v", seen)
	for _, o := range []string{"won(1)", "won(2)", "running(1)", "running(2)", "done(0)", "done(1)", "late(0)", "overlap(0)"} {
		if seen[o] == 0 {
			t.Errorf("the random sequence never answered %s: explore more", o)
		}
	}
	got, err := b.ListRuns(ctx, claim.ListQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.ListRuns(ctx, claim.ListQuery{Limit: 1000})
	if len(got) != len(want) {
		t.Fatalf("status: redis lists %d runs, memclaim %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Job != w.Job || g.Slot != w.Slot || g.Status != w.Status || g.Attempt != w.Attempt ||
			g.Token != w.Token || g.OutputTail != w.OutputTail {
			t.Fatalf("run %d: redis %+v, memclaim %+v", i, g, w)
		}
	}
}

// TestFirstClaimIndexesTheJob: the first claim of a job names it in the
// index of jobs (status and Prune find its runs through it), and so does
// the first claim after the index lost it while the job had no state.
func TestFirstClaimIndexesTheJob(t *testing.T) {
	ns := newNamespace(t)
	b := open(t, ns)
	c := rawClient(t)
	ctx := t.Context()
	mustWin(t, b, request("first", time.Now().UnixMilli()), 1)
	if ok, err := c.SIsMember(ctx, ns+":jobs", "first").Result(); err != nil || !ok {
		t.Fatalf("after its first claim the job must be in %s:jobs: %v %v", ns, ok, err)
	}
	// A job whose keys and index entry are gone (pruned) is indexed again.
	if err := deleteNamespace(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	mustWin(t, b, request("first", time.Now().UnixMilli()+1), 1)
	if ok, err := c.SIsMember(ctx, ns+":jobs", "first").Result(); err != nil || !ok {
		t.Fatalf("a claim that creates the job's state again must index it: %v %v", ok, err)
	}
}
