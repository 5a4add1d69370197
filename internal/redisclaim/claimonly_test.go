package redisclaim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/redisclaim"
)

// The claim-only strategies that run on every Redis the tests use (idmp
// needs 8.6: TestIDMPOnRedis8).
var claimOnlyStrategies = []string{redisclaim.StrategyStreamID, redisclaim.StrategyScript}

// openClaimOnly opens a claim-only backend of strategy on namespace ns of
// the test server, closed at the end of the test.
func openClaimOnly(t testing.TB, ns, strategy string, mod ...func(*redisclaim.Options)) *redisclaim.ClaimOnly {
	t.Helper()
	return openClaimOnlyAt(t, requireRedis(t), ns, strategy, mod...)
}

func openClaimOnlyAt(t testing.TB, url, ns, strategy string, mod ...func(*redisclaim.Options)) *redisclaim.ClaimOnly {
	t.Helper()
	o := redisclaim.Options{URL: url, Namespace: ns, Strategy: strategy}
	for _, m := range mod {
		m(&o)
	}
	b, err := redisclaim.NewClaimOnly(t.Context(), o)
	if err != nil {
		t.Fatalf("open strategy %s: %v", strategy, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

// claimOnlyHarness is the conformance harness of a claim-only strategy on
// the server of url; newNS makes (and cleans up) a namespace there.
func claimOnlyHarness(url, strategy string, newNS func(t testing.TB) string) claimtest.Harness {
	return claimtest.Harness{
		New: func(t *testing.T) claim.Backend {
			return openClaimOnlyAt(t, url, newNS(t), strategy)
		},
		Open: func(t *testing.T, b claim.Backend) claim.Backend {
			return openClaimOnlyAt(t, url, b.(*redisclaim.ClaimOnly).Namespace(), strategy)
		},
		// No Transient: a claim race must never see an error.
		Controller: true,
		Registry:   true,
	}
}

// TestClaimOnlyConformance runs the conformance suite (the Claim and
// ClaimOnly cases) against stream-id and script.
func TestClaimOnlyConformance(t *testing.T) {
	url := requireRedis(t)
	for _, s := range claimOnlyStrategies {
		t.Run(s, func(t *testing.T) {
			claimtest.Exercise(t, claimOnlyHarness(url, s, newNamespace))
		})
	}
}

// TestClaimOnlyProcessRace: 3 processes × 4 goroutines, each process with
// its own connections, claim the same 100 slots: Redis alone picks the
// winners.
func TestClaimOnlyProcessRace(t *testing.T) {
	for _, s := range claimOnlyStrategies {
		t.Run(s, func(t *testing.T) {
			ns := newNamespace(t)
			claimtest.ProcessRace(t, claimtest.ProcessOptions{
				Processes:  3,
				Goroutines: 4,
				Slots:      100,
				Env: []string{raceNamespaceEnv + "=" + ns, raceStrategyEnv + "=" + s,
					"ANARCHON_TEST_REDIS_URL=" + testURL()},
				Open: func(t *testing.T) claim.Backend { return openClaimOnly(t, ns, s) },
			})
		})
	}
}

// coRequest is a claim-only request of (job, slot) by a fresh token, with
// the instance clock at now.
func coRequest(job string, slot int64, now time.Time) claim.Request {
	r := request(job, slot)
	r.Now = now
	return r
}

func wantOutcome(t *testing.T, b claim.Backend, r claim.Request, want claim.Outcome, what string) claim.Result {
	t.Helper()
	res, err := b.Claim(t.Context(), r)
	if err != nil || res.Outcome != want {
		t.Fatalf("%s: claim %s@%d: want %s, got %+v, %v", what, r.Job, r.Slot, want, res, err)
	}
	return res
}

// TestStreamIDTrimKeepsLastID: the stream of claims may be trimmed to
// nothing and still rejects every older slot: Redis checks an explicit ID
// against the stream's last generated ID, which survives XTRIM and XDEL.
// Deleting the key resets it (which is why the backend never does).
func TestStreamIDTrimKeepsLastID(t *testing.T) {
	ns := newNamespace(t)
	b := openClaimOnly(t, ns, redisclaim.StrategyStreamID)
	c := rawClient(t)
	ctx := t.Context()
	now := time.Now()
	base := now.Add(-time.Minute).UnixMilli()
	key := "{" + ns + ":trim}:runs"
	var won []claim.Request
	for i := range 5 {
		r := coRequest("trim", base+int64(i)*1000, now)
		wantOutcome(t, b, r, claim.Won, fmt.Sprintf("slot %d", i))
		won = append(won, r)
	}
	if n, err := c.XTrimMaxLen(ctx, key, 0).Result(); err != nil || n != 5 {
		t.Fatalf("XTRIM MAXLEN 0: want 5 trimmed, got %d %v", n, err)
	}
	if n, _ := c.XLen(ctx, key).Result(); n != 0 {
		t.Fatalf("the stream must be empty, holds %d", n)
	}
	info, err := c.XInfoStream(ctx, key).Result()
	if err != nil || info.LastGeneratedID != fmt.Sprintf("%d-0", won[4].Slot) {
		t.Fatalf("the last generated ID must survive trimming: %+v %v", info, err)
	}
	for i, r := range won {
		wantOutcome(t, b, coRequest("trim", r.Slot, now), claim.Lost,
			fmt.Sprintf("another instance's claim of slot %d after the stream was trimmed to nothing", i))
	}
	// XDEL too leaves the last ID in place.
	next := coRequest("trim", base+5000, now)
	wantOutcome(t, b, next, claim.Won, "the next slot")
	if err := c.XDel(ctx, key, fmt.Sprintf("%d-0", next.Slot)).Err(); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, b, coRequest("trim", next.Slot, now), claim.Lost, "a claim of a slot whose entry was XDELed")
	wantOutcome(t, b, coRequest("trim", base+6000, now), claim.Won, "the slot after")

	// What the backend never does: DEL resets the last ID, and a slot
	// already run can be won again.
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, b, coRequest("trim", won[0].Slot, now), claim.Won,
		"after DEL of the key (never done by the backend) an old slot is won a second time")
}

// TestStreamIDSkippedSlot: a slot whose claim arrives after a later slot's
// is lost by everyone; the backend warns that nobody runs it (but not for
// a slot that was claimed, or trimmed).
func TestStreamIDSkippedSlot(t *testing.T) {
	ns := newNamespace(t)
	core, logs := observer.New(zap.WarnLevel)
	b := openClaimOnly(t, ns, redisclaim.StrategyStreamID, func(o *redisclaim.Options) { o.Log = zap.New(core) })
	now := time.Now()
	base := now.Add(-time.Minute).UnixMilli()
	wantOutcome(t, b, coRequest("skip", base, now), claim.Won, "slot 0")
	wantOutcome(t, b, coRequest("skip", base+2000, now), claim.Won, "slot 2, before slot 1")
	wantOutcome(t, b, coRequest("skip", base, now), claim.Lost, "another claim of slot 0")
	if n := logs.Len(); n != 0 {
		t.Fatalf("a claimed slot is no skip: %v", logs.All())
	}
	wantOutcome(t, b, coRequest("skip", base+1000, now), claim.Lost, "slot 1, after slot 2")
	if l := logs.FilterMessageSnippet("slot skipped").All(); len(l) != 1 || l[0].ContextMap()["slot"] != base+1000 {
		t.Fatalf("want one warning of the skipped slot %d, got %v", base+1000, logs.All())
	}
}

// TestStreamIDCapped: the stream of claims is capped at about HistoryMaxLen
// (MAXLEN ~ trims whole nodes) and the trimmed slots stay claimed.
func TestStreamIDCapped(t *testing.T) {
	ns := newNamespace(t)
	b := openClaimOnly(t, ns, redisclaim.StrategyStreamID, func(o *redisclaim.Options) { o.HistoryMaxLen = 10 })
	c := rawClient(t)
	ctx := t.Context()
	now := time.Now()
	base := now.Add(-30 * time.Minute).UnixMilli()
	const slots = 500
	for i := range slots {
		wantOutcome(t, b, coRequest("capped", base+int64(i), now), claim.Won, fmt.Sprintf("slot %d", i))
	}
	n, err := c.XLen(ctx, "{"+ns+":capped}:runs").Result()
	if err != nil || n >= slots/2 {
		t.Fatalf("after %d claims with HistoryMaxLen 10 the stream holds %d (%v): want it capped", slots, n, err)
	}
	wantOutcome(t, b, coRequest("capped", base, now), claim.Lost, "a claim of the first slot, long trimmed")
}

// TestScriptWindowBoundary: the script strategy remembers a claim for
// windowMs only. A claim of the same slot after the window wins a second
// time: that is why validation wants maxLate at most half the window. With
// such a maxLate the late check answers first.
func TestScriptWindowBoundary(t *testing.T) {
	const window = 400 * time.Millisecond
	ns := newNamespace(t)
	b := openClaimOnly(t, ns, redisclaim.StrategyScript, func(o *redisclaim.Options) { o.Window = window })
	c := rawClient(t)
	ctx := t.Context()
	now := time.Now()
	a := coRequest("window", now.UnixMilli(), now)
	a.MaxLate = window / 2
	wantOutcome(t, b, a, claim.Won, "the first claim")
	wantOutcome(t, b, coRequest("window", a.Slot, time.Now()), claim.Lost, "another claim within the window")
	wantOutcome(t, b, a, claim.Won, "my own claim re-sent within the window")

	time.Sleep(window + 100*time.Millisecond)
	late := coRequest("window", a.Slot, time.Now())
	late.MaxLate = window / 2
	wantOutcome(t, b, late, claim.Late, "after the window, with maxLate = window/2 (what validation allows)")
	// With a clock 10s behind the instance check passes; the store's does not.
	behind := late
	behind.Now = time.UnixMilli(a.Slot)
	wantOutcome(t, b, behind, claim.Late, "after the window, an instance clock behind: late by store time")

	again := coRequest("window", a.Slot, time.Now())
	again.MaxLate = time.Hour // what validation refuses: maxLate > windowMs/2
	wantOutcome(t, b, again, claim.Won, "after the window with maxLate beyond it: forgotten, won a second time")

	// The second claim trimmed the first (MINID ~ trims whole nodes: check
	// that the scan never sees it, not the stream's length).
	entries, err := c.XRange(ctx, "{"+ns+":window}:runs", "-", "+").Result()
	if err != nil || len(entries) == 0 {
		t.Fatalf("read the stream: %v %v", entries, err)
	}
	if last := entries[len(entries)-1]; last.Values["token"] != string(again.Token) {
		t.Fatalf("the newest entry must be the second winner's: %+v", last)
	}
}

// TestLateByEitherClock: every claim-only strategy answers late by the
// instance's clock without asking Redis; script also by store time, for a
// slot nobody claimed. A claimed slot is never late for its winner's
// re-sent claim.
func TestLateByEitherClock(t *testing.T) {
	for _, s := range claimOnlyStrategies {
		t.Run(s, func(t *testing.T) {
			ns := newNamespace(t)
			b := openClaimOnly(t, ns, s)
			c := rawClient(t)
			now := time.Now()
			slot := now.Add(-10 * time.Second).UnixMilli()
			r := coRequest("late", slot, time.UnixMilli(slot)) // the instance's clock 10s behind
			r.MaxLate = 5 * time.Second
			if s == redisclaim.StrategyScript {
				res := wantOutcome(t, b, r, claim.Late, "10s after the slot by store time, 0s by the instance's")
				if res.StoreNow.IsZero() || res.StoreNow.Sub(now).Abs() > 5*time.Second {
					t.Fatalf("the script strategy reports store time: %v", res.StoreNow)
				}
			} else {
				wantOutcome(t, b, r, claim.Won, "stream-id decides late by the instance's clock alone")
			}
			ahead := coRequest("late", slot+1000, now.Add(time.Minute))
			ahead.MaxLate = 5 * time.Second
			wantOutcome(t, b, ahead, claim.Late, "the instance's clock says late")
			keys, err := namespaceKeys(t.Context(), c, ns)
			if err != nil {
				t.Fatal(err)
			}
			if s == redisclaim.StrategyScript && len(keys) != 1 { // the index only
				t.Fatalf("late claims write nothing: keys %v", keys)
			}
			// A won claim re-sent after it became late (by store time) still
			// wins: the claim, not the clock, decides.
			fresh := coRequest("resent", time.Now().UnixMilli(), time.Now())
			fresh.MaxLate = 200 * time.Millisecond
			wantOutcome(t, b, fresh, claim.Won, "the claim")
			time.Sleep(300 * time.Millisecond)
			fresh.Now = time.UnixMilli(fresh.Slot) // the instance's clock would still send it
			wantOutcome(t, b, fresh, claim.Won, "my own claim re-sent after it became late by store time")
		})
	}
}

// serverVersion reads redis_version of the test server.
func testServerVersion(t *testing.T, c redis.UniversalClient) string {
	t.Helper()
	info, err := c.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^redis_version:(\S+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("no redis_version in INFO server")
	}
	return m[1]
}

// serverHasIDMP reports whether the test server has XADD IDMP.
func serverHasIDMP(t *testing.T) bool {
	t.Helper()
	s, err := redisclaim.CheckStrategy(t.Context(), redisclaim.Options{URL: requireRedis(t), Strategy: redisclaim.StrategyAuto})
	if err != nil {
		t.Fatalf("CheckStrategy auto: %v", err)
	}
	return s == redisclaim.StrategyIDMP
}

// TestIDMPNeedsRedis86: on a server without XADD IDMP (Redis 7.0 here),
// strategy idmp fails at start with an error naming the server's version
// and pointing to script; auto runs script and says so in the log; and
// CheckStrategy answers the same for anarchond validate.
func TestIDMPNeedsRedis86(t *testing.T) {
	url := requireRedis(t)
	c := rawClient(t)
	version := testServerVersion(t, c)
	ctx := t.Context()
	if serverHasIDMP(t) {
		// A Redis 8.6 test server: both pick idmp.
		if s, err := redisclaim.CheckStrategy(ctx, redisclaim.Options{URL: url, Strategy: redisclaim.StrategyIDMP}); err != nil || s != redisclaim.StrategyIDMP {
			t.Fatalf("CheckStrategy idmp on %s: %q %v", version, s, err)
		}
		return
	}
	want := fmt.Sprintf(`redis strategy idmp needs Redis 8.6 or later (XADD IDMP); this server is %s: use strategy "script"`, version)
	_, err := redisclaim.NewClaimOnly(ctx, redisclaim.Options{URL: url, Namespace: newNamespace(t), Strategy: redisclaim.StrategyIDMP})
	if err == nil || err.Error() != want {
		t.Fatalf("strategy idmp on Redis %s:\nwant %s\ngot  %v", version, want, err)
	}
	if _, err := redisclaim.CheckStrategy(ctx, redisclaim.Options{URL: url, Strategy: redisclaim.StrategyIDMP}); err == nil || err.Error() != want {
		t.Fatalf("CheckStrategy idmp:\nwant %s\ngot  %v", want, err)
	}

	core, logs := observer.New(zap.InfoLevel)
	b := openClaimOnly(t, newNamespace(t), redisclaim.StrategyAuto, func(o *redisclaim.Options) { o.Log = zap.New(core) })
	if b.Strategy() != redisclaim.StrategyScript {
		t.Fatalf("auto on Redis %s: want script, got %s", version, b.Strategy())
	}
	line := fmt.Sprintf("redis strategy auto: using script (server %s has no XADD IDMP)", version)
	if l := logs.FilterMessage(line).All(); len(l) != 1 || l[0].ContextMap()["detected_by"] != "COMMAND DOCS XADD" {
		t.Fatalf("auto must log its choice %q, found by COMMAND DOCS XADD; logged %v", line, logs.All())
	}
	for strategy, want := range map[string]string{"": "lease", "lease": "lease", "stream-id": "stream-id",
		"script": "script", "auto": "script"} {
		if got, err := redisclaim.CheckStrategy(ctx, redisclaim.Options{URL: url, Strategy: strategy}); err != nil || got != want {
			t.Errorf("CheckStrategy(%q): want %q, got %q %v", strategy, want, got, err)
		}
	}
	if _, err := redisclaim.CheckStrategy(ctx, redisclaim.Options{URL: url, Strategy: "nonsense"}); err == nil || !strings.Contains(err.Error(), `unknown redis strategy "nonsense"`) {
		t.Errorf("CheckStrategy of an unknown strategy: %v", err)
	}
	t.Logf("strategy idmp on Redis %s: %v", version, err)
}

// TestIDMPSetupScript runs the idmp stream setup script where it cannot
// finish (no XCFGSET before Redis 8.6): it gets as far as XCFGSET, having
// created the stream empty (script writes are not rolled back), so every
// step before it works on this server. On Redis 8.6 it runs through:
// created, then same (XCFGSET not sent again), then set for new values.
func TestIDMPSetupScript(t *testing.T) {
	ns := newNamespace(t)
	c := rawClient(t)
	ctx := t.Context()
	key := "{" + ns + ":setup}:runs"
	v, err := redisclaim.IDMPSetup(ctx, c, key, 3600, 10000)
	if !serverHasIDMP(t) {
		if err == nil || !strings.Contains(err.Error(), "Unknown Redis command") {
			t.Fatalf("want XCFGSET unknown on this server, got %v %v", v, err)
		}
		n, lerr := c.XLen(ctx, key).Result()
		info, ierr := c.XInfoStream(ctx, key).Result()
		if lerr != nil || ierr != nil || n != 0 || info.EntriesAdded != 1 {
			t.Fatalf("the script must have created the stream empty: len %d %v, info %+v %v", n, lerr, info, ierr)
		}
		return
	}
	if err != nil || len(v) != 3 || v[0] != "created" { // the old values are the server's defaults, or none
		t.Fatalf("first setup: want created, got %v %v", v, err)
	}
	for _, step := range []struct {
		dur  int64
		want string
	}{{3600, "[same 3600 10000]"}, {600, "[set 3600 10000]"}} {
		v, err := redisclaim.IDMPSetup(ctx, c, key, step.dur, 10000)
		if err != nil || fmt.Sprint(v) != step.want {
			t.Fatalf("setup %d s: want %s, got %v %v", step.dur, step.want, v, err)
		}
	}
	if info, err := c.XInfoStream(ctx, key).Result(); err != nil || info.IDMPDuration != 600 || info.IDMPMaxSize != 10000 || info.Length != 0 {
		t.Fatalf("after setup: %+v %v", info, err)
	}
}

// TestCheckStrategyHidesPassword: CheckStrategy's errors name the server but
// never the password.
func TestCheckStrategyHidesPassword(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err := redisclaim.CheckStrategy(ctx, redisclaim.Options{URL: "redis://anarchon:" + secret + "@" + closedAddr(t) + "/0", Strategy: "auto"})
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "redis") {
		t.Fatalf("want an error naming redis without the password, got %v", err)
	}
	t.Logf("%v", err)
}

// TestIDMPArgs: the idmp claim's XADD carries IDMP <job> <slot> (go-redis
// sends IDMP only with both ProducerID and IdempotentID), NOMKSTREAM, a cap
// no smaller than IDMP-MAXSIZE, and an auto ID.
func TestIDMPArgs(t *testing.T) {
	r := coRequest("nightly", 1_700_000_000_000, time.UnixMilli(1_700_000_000_000))
	r.Instance = "host-a"
	got := fmt.Sprint(redisclaim.IDMPArgs("cron", r))
	want := fmt.Sprintf("[xadd {cron:nightly}:runs nomkstream idmp nightly 1700000000000 maxlen ~ %d * slot 1700000000000 token %s instance host-a at 1700000000000]",
		redisclaim.MaxIDMPMaxSize, r.Token)
	if got != want {
		t.Fatalf("idmp XADD:\nwant %s\ngot  %s", want, got)
	}
}

// TestHasToken: the IDMP detection finds the token at any depth of COMMAND
// DOCS's reply (RESP2 arrays, RESP3 maps), as a whole value only.
func TestHasToken(t *testing.T) {
	redis8 := map[any]any{"xadd": map[any]any{"summary": "Appends a new entry", "arguments": []any{
		map[any]any{"name": "key", "type": "key"},
		map[any]any{"name": "idmp", "type": "block", "token": "IDMP", "arguments": []any{}},
	}}}
	redis7 := []any{"xadd", []any{"summary", "mentions IDMP in a sentence", "arguments", []any{
		[]any{"name", "nomkstream", "token", "NOMKSTREAM"}, []any{"name", "idmpauto", "token", "IDMPAUTO"},
	}}}
	if !redisclaim.HasToken(redis8, "IDMP") || redisclaim.HasToken(redis7, "IDMP") || !redisclaim.HasToken(redis7, "xadd") {
		t.Fatal("HasToken")
	}
	// And the real server's answer agrees with its version.
	c := rawClient(t)
	docs, err := c.Do(t.Context(), "COMMAND", "DOCS", "XADD").Result()
	if err != nil {
		t.Fatalf("COMMAND DOCS XADD: %v", err)
	}
	if has, want := redisclaim.HasToken(docs, "IDMP"), serverHasIDMP(t); has != want {
		t.Fatalf("COMMAND DOCS XADD lists IDMP: %v; CheckStrategy says idmp: %v", has, want)
	}
}

// TestClaimOnlyFinish: Finish refuses another token where the claim entry
// says who won (stream-id by the slot's entry, script within the window,
// also through a backend that never saw the claim); a re-sent Finish is
// stored once; an interrupted run has no exit code, and its instance comes
// from the claim entry.
func TestClaimOnlyFinish(t *testing.T) {
	for _, s := range claimOnlyStrategies {
		t.Run(s, func(t *testing.T) {
			ns := newNamespace(t)
			b := openClaimOnly(t, ns, s)
			c := rawClient(t)
			ctx := t.Context()
			now := time.Now()
			a := coRequest("fin", now.UnixMilli(), now)
			wantOutcome(t, b, a, claim.Won, "the claim")
			other := coRequest("fin", a.Slot, now)
			wantOutcome(t, b, other, claim.Lost, "another claim")
			fin := claim.Finish{Status: claim.StatusFailed, ExitCode: 4, OutputTail: "boom\n", StartedAt: now, FinishedAt: now.Add(time.Second)}
			if err := b.Finish(ctx, other.Fence(1), fin); !errors.Is(err, claim.ErrFenced) {
				t.Fatalf("a loser's Finish: want claim.ErrFenced, got %v", err)
			}
			for i := range 2 {
				if err := b.Finish(ctx, a.Fence(1), fin); err != nil {
					t.Fatalf("finish #%d: %v", i+1, err)
				}
			}
			results := "{" + ns + ":fin}:results"
			if n, err := c.XLen(ctx, results).Result(); err != nil || n != 1 {
				t.Fatalf("a re-sent Finish is stored once: %d results %v", n, err)
			}

			// Another instance (a fresh backend, no memory of the claim)
			// finishes the next run it won elsewhere.
			b2 := openClaimOnly(t, ns, s)
			n := coRequest("fin", a.Slot+1000, now)
			wantOutcome(t, b2, n, claim.Won, "the next slot")
			b3 := openClaimOnly(t, ns, s)
			intr := claim.Finish{Status: claim.StatusInterrupted, ExitCode: 143, StartedAt: now, FinishedAt: now.Add(time.Second)}
			loser := coRequest("fin", n.Slot, now)
			if err := b3.Finish(ctx, loser.Fence(1), intr); !errors.Is(err, claim.ErrFenced) {
				t.Fatalf("a loser's Finish through a backend that never saw the claim: want claim.ErrFenced, got %v", err)
			}
			if err := b3.Finish(ctx, n.Fence(1), intr); err != nil {
				t.Fatalf("the winner's Finish through another backend: %v", err)
			}
			runs, err := b.ListRuns(ctx, claim.ListQuery{Job: "fin"})
			if err != nil || len(runs) != 2 {
				t.Fatalf("list: want 2 runs, got %+v %v", runs, err)
			}
			if r := runs[0]; r.Slot != n.Slot || r.Status != claim.StatusInterrupted || r.ExitCode != nil ||
				r.Token != n.Token || r.Instance != n.Instance {
				t.Fatalf("the interrupted run: %+v (want token %s instance %s, no exit code)", r, n.Token.Short(), n.Instance)
			}
			if r := runs[1]; r.Slot != a.Slot || r.Status != claim.StatusFailed || r.ExitCode == nil || *r.ExitCode != 4 ||
				r.Token != a.Token || r.Duration() != time.Second {
				t.Fatalf("the failed run: %+v", r)
			}
		})
	}
}

// TestClaimOnlyListRuns: status over every job of the namespace, newest
// slot first, a claim without result running, the job filter and limits.
func TestClaimOnlyListRuns(t *testing.T) {
	for _, s := range claimOnlyStrategies {
		t.Run(s, func(t *testing.T) {
			ns := newNamespace(t)
			b := openClaimOnly(t, ns, s)
			ctx := t.Context()
			now := time.Now()
			base := now.Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
			var reqs []claim.Request
			for i := range 60 {
				job := []string{"alpha", "beta"}[i%2]
				r := coRequest(job, base+int64(i)*1000, now)
				wantOutcome(t, b, r, claim.Won, "claim")
				reqs = append(reqs, r)
				if i%3 != 0 {
					fin := claim.Finish{Status: claim.StatusSucceeded, StartedAt: now, FinishedAt: now.Add(time.Duration(i) * time.Millisecond)}
					if err := b.Finish(ctx, r.Fence(1), fin); err != nil {
						t.Fatal(err)
					}
				}
			}
			// A lost claim changes nothing.
			wantOutcome(t, b, coRequest("alpha", reqs[58].Slot, now), claim.Lost, "a loser")

			runs, err := b.ListRuns(ctx, claim.ListQuery{})
			if err != nil || len(runs) != 50 {
				t.Fatalf("list every job, default limit: want 50 runs, got %d %v", len(runs), err)
			}
			for i, r := range runs {
				want := reqs[59-i]
				status := claim.StatusSucceeded
				if (59-i)%3 == 0 {
					status = claim.StatusRunning
				}
				if r.Job != want.Job || r.Slot != want.Slot || r.Token != want.Token || r.Instance != want.Instance ||
					r.Status != status || r.Attempt != 1 || r.StartedAt.IsZero() {
					t.Fatalf("run %d: %+v, want %s@%d %s token %s", i, r, want.Job, want.Slot, status, want.Token.Short())
				}
				if status == claim.StatusRunning && (!r.FinishedAt.IsZero() || r.ExitCode != nil) {
					t.Fatalf("a running run has no end: %+v", r)
				}
			}
			runs, err = b.ListRuns(ctx, claim.ListQuery{Job: "beta", Limit: 7})
			if err != nil || len(runs) != 7 {
				t.Fatalf("list beta, limit 7: got %d %v", len(runs), err)
			}
			for i, r := range runs {
				if r.Job != "beta" || r.Slot != reqs[59-2*i].Slot {
					t.Fatalf("beta run %d: %+v", i, r)
				}
			}
			if runs, err := b.ListRuns(ctx, claim.ListQuery{Job: "nobody"}); err != nil || len(runs) != 0 {
				t.Fatalf("an unknown job has no runs: %+v %v", runs, err)
			}
			if _, err := b.ListRuns(ctx, claim.ListQuery{Job: "a{b"}); err == nil {
				t.Fatal("a job name with { must be refused")
			}
		})
	}
}

// TestClaimOnlyKeys: every key of a job hashes to one cluster slot; the
// only other key is the index of jobs.
func TestClaimOnlyKeys(t *testing.T) {
	for _, s := range claimOnlyStrategies {
		t.Run(s, func(t *testing.T) {
			ns := newNamespace(t)
			b := openClaimOnly(t, ns, s)
			c := rawClient(t)
			ctx := t.Context()
			now := time.Now()
			for _, job := range []string{"alpha", "beta-2", "x"} {
				r := coRequest(job, now.UnixMilli(), now)
				wantOutcome(t, b, r, claim.Won, "claim")
				if err := b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded, StartedAt: now, FinishedAt: now}); err != nil {
					t.Fatal(err)
				}
			}
			keys, err := namespaceKeys(ctx, c, ns)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(keys)
			var want []string
			for _, job := range []string{"alpha", "beta-2", "x"} {
				want = append(want, "{"+ns+":"+job+"}:results", "{"+ns+":"+job+"}:runs")
				if keySlot("{"+ns+":"+job+"}:results") != keySlot("{"+ns+":"+job+"}:runs") {
					t.Fatalf("the keys of %s hash to two slots", job)
				}
			}
			want = append(want, ns+":jobs")
			slices.Sort(want)
			if !slices.Equal(keys, want) {
				t.Fatalf("keys: want %v, got %v", want, keys)
			}
		})
	}
}

// TestScriptNoScriptFallback: after SCRIPT FLUSH the script strategy's
// claim and every Finish still work (EVALSHA answers NOSCRIPT, EVAL runs).
func TestScriptNoScriptFallback(t *testing.T) {
	ns := newNamespace(t)
	b := openClaimOnly(t, ns, redisclaim.StrategyScript)
	c := rawClient(t)
	ctx := t.Context()
	now := time.Now()
	for i := range 3 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		r := coRequest("noscript", now.UnixMilli()+int64(i), now)
		wantOutcome(t, b, r, claim.Won, "claim after SCRIPT FLUSH")
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded, StartedAt: now, FinishedAt: now}); err != nil {
			t.Fatalf("finish after SCRIPT FLUSH: %v", err)
		}
	}
}

// TestClaimOnlyBadRequests: requests a claim-only strategy cannot decide
// are refused before anything is sent.
func TestClaimOnlyBadRequests(t *testing.T) {
	b := openClaimOnly(t, newNamespace(t), redisclaim.StrategyStreamID)
	now := time.Now()
	for name, r := range map[string]claim.Request{
		"no instance clock": request("j", now.UnixMilli()),
		"slot 0":            coRequest("j", 0, now),
		"job with }":        coRequest("a}b", now.UnixMilli(), now),
		"empty token":       {Job: "j", Slot: now.UnixMilli(), Now: now},
	} {
		if _, err := b.Claim(t.Context(), r); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	for name, o := range map[string]redisclaim.Options{
		"lease":        {Strategy: "lease"},
		"unknown":      {Strategy: "nonsense"},
		"duration":     {Strategy: "idmp", IDMPDuration: 1500 * time.Millisecond},
		"long":         {Strategy: "idmp", IDMPDuration: 25 * time.Hour},
		"maxsize":      {Strategy: "idmp", IDMPMaxSize: 10001},
		"window":       {Strategy: "script", Window: -time.Second},
		"namespace {}": {Strategy: "script", Namespace: "a{b"},
	} {
		o.URL = "redis://127.0.0.1:1"
		if _, err := redisclaim.NewClaimOnly(t.Context(), o); err == nil {
			t.Errorf("options %s: want an error", name)
		}
	}
}

// redis8URL is the Redis 8.6+ server of TestIDMPOnRedis8.
const redis8Env = "ANARCHON_TEST_REDIS8_URL"

// TestIDMPOnRedis8 runs the conformance suite for strategy idmp, and the
// checks of its stream settings, against a Redis 8.6 or later named by
// ANARCHON_TEST_REDIS8_URL. Without it the test skips (Redis 8.6 is not on
// every machine), unless ANARCHON_TEST_REQUIRE names redis8.
func TestIDMPOnRedis8(t *testing.T) {
	url := os.Getenv(redis8Env)
	if url == "" {
		msg := "strategy idmp needs Redis 8.6 or later, which this run does not have; to run this test start one, e.g.\n" +
			"    docker run -d --rm -p 6380:6379 redis:8.6\n" +
			"and set " + redis8Env + "=redis://127.0.0.1:6380/0"
		if slices.Contains(strings.Split(os.Getenv("ANARCHON_TEST_REQUIRE"), ","), "redis8") {
			t.Fatalf("%s\n(ANARCHON_TEST_REQUIRE=%s requires it)", msg, os.Getenv("ANARCHON_TEST_REQUIRE"))
		}
		t.Skip(msg + "\n(set ANARCHON_TEST_REQUIRE=redis8 to make this a failure)")
	}
	c, _, err := redisclaim.NewClient(url, "")
	if err != nil {
		t.Fatalf("%s: %v", redis8Env, err)
	}
	t.Cleanup(func() { c.Close() })
	if s, err := redisclaim.CheckStrategy(t.Context(), redisclaim.Options{URL: url, Strategy: redisclaim.StrategyAuto}); err != nil || s != redisclaim.StrategyIDMP {
		t.Fatalf("%s (Redis %s): CheckStrategy auto must pick idmp, got %q %v", redis8Env, testServerVersion(t, c), s, err)
	}
	newNS := func(t testing.TB) string {
		t.Helper()
		ns := fmt.Sprintf("anarchon-test-%016x", rand.Uint64())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := deleteNamespace(ctx, c, ns); err != nil {
				t.Errorf("delete the keys of namespace %s: %v", ns, err)
			}
		})
		return ns
	}
	t.Run("Conformance", func(t *testing.T) {
		claimtest.Exercise(t, claimOnlyHarness(url, redisclaim.StrategyIDMP, newNS))
	})
	t.Run("Settings", func(t *testing.T) {
		ctx := t.Context()
		ns := newNS(t)
		b := openClaimOnlyAt(t, url, ns, redisclaim.StrategyIDMP, func(o *redisclaim.Options) { o.IDMPDuration = 600 * time.Second })
		now := time.Now()
		a := coRequest("settings", now.UnixMilli(), now)
		wantOutcome(t, b, a, claim.Won, "the claim")
		key := "{" + ns + ":settings}:runs"
		info, err := c.XInfoStream(ctx, key).Result()
		if err != nil || info.IDMPDuration != 600 || info.IDMPMaxSize != redisclaim.MaxIDMPMaxSize {
			t.Fatalf("the stream's IDMP settings: want 600 s, %d keys; got %+v %v", redisclaim.MaxIDMPMaxSize, info, err)
		}
		// A second instance with the same settings does not reset the
		// remembered claims (XCFGSET would clear them).
		b2 := openClaimOnlyAt(t, url, ns, redisclaim.StrategyIDMP, func(o *redisclaim.Options) { o.IDMPDuration = 600 * time.Second })
		wantOutcome(t, b2, coRequest("settings", a.Slot, now), claim.Lost, "another instance's claim of the same slot")
		wantOutcome(t, b2, a, claim.Won, "my own claim re-sent through another connection")
		if n, err := c.XLen(ctx, key).Result(); err != nil || n != 1 {
			t.Fatalf("duplicates add no entry: %d %v", n, err)
		}
		// A stream deleted behind the backend's back is configured again,
		// not recreated with the server's defaults.
		if err := c.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, b, coRequest("settings", a.Slot+1000, now), claim.Won, "a claim after the stream was deleted")
		if info, err := c.XInfoStream(ctx, key).Result(); err != nil || info.IDMPDuration != 600 {
			t.Fatalf("the recreated stream's IDMP settings: %+v %v", info, err)
		}
	})
}
