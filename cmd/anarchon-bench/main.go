// Command anarchon-bench measures what one claim costs on every backend,
// against the raw round trip of the same store measured in the same run,
// and prints one markdown table.
//
//	go run ./cmd/anarchon-bench [-backends sqlite,postgres,...] [-n 2000] [-contended=false]
//
// Each backend is measured on a fresh namespace of its own (a temporary
// SQLite file, a PostgreSQL schema, a Redis key prefix, a NATS stream,
// RabbitMQ queues), removed afterwards; backends are measured one after
// the other, never at the same time. For each it reports:
//
//   - claim: -n uncontended claims (-n-rabbitmq for RabbitMQ), each the
//     first claim of the next slot of one of 50 jobs that already have
//     state in the store (maxLate 1h, lease 30s, 3 attempts, overlap
//     -overlap), so each answers won: the path every scheduled run of an
//     established crontab takes on the instance that wins it. On lease
//     backends each run is then finished, untimed, as its job would be,
//     so that overlap=skip finds no live run of the job at its next slot.
//   - raw: the cheapest operation the store offers, on a connection of its
//     own: PING (Redis); SELECT 1 on a pgx connection (PostgreSQL); a
//     JetStream publish without Nats-Msg-Id to <ns>.bench.raw in the same
//     stream (NATS); a confirmed persistent publish to a durable queue
//     <ns>.bench.raw (RabbitMQ). SQLite has no network round trip: its raw
//     op is a SELECT 1 on a database/sql connection to the same file, i.e.
//     the cost of a trivial statement through database/sql and cgo.
//   - ratio: claim p50 / raw p50, how many raw round trips one claim costs.
//   - contended8: 8 claimers, each its own backend (its own connections),
//     race on the same -n runs. Each run is one round: the 8 claims are
//     released together and the next round starts when all 8 answered.
//     Every run must have exactly one won; otherwise the command says which
//     and exits 1. Latencies are per claim (winners and losers).
//
// The postgres-async row is postgres with backend.postgres.synchronousCommit
// off (a commit is acknowledged before it is flushed to disk): beside the
// postgres row, what durability costs a claim. Start lag and scale leave
// it out unless -lag-backends or -scale-backends names it.
//
// Raw ops and claims are interleaved, one raw op then one claim, rather
// than measured in two phases: on a shared machine latency drifts with the
// load (other processes, the store's background work, CPU frequency), and
// interleaving makes both series see the same drift, so that their ratio
// compares like with like.
//
// Server addresses come from flags whose defaults are the test suite's
// environment variables (ANARCHON_TEST_POSTGRES_DSN, ANARCHON_TEST_REDIS_URL,
// ANARCHON_TEST_NATS_URL, ANARCHON_TEST_RABBITMQ_URL). A backend whose
// server does not answer gets a row saying so; that is not a failure. The
// exit status is 1 when a measurement failed or a contended run did not
// have exactly one winner, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/testserver"
)

// racers is the number of claimers of the contended measurement.
const racers = 8

// Flags.
var (
	nFlag        = flag.Int("n", 2000, "uncontended claims (each with one raw op) and contended runs per backend")
	nRabbitFlag  = flag.Int("n-rabbitmq", 500, "the same for rabbitmq (a durable queue and an fsync per claim: ~6 ms)")
	contendFlag  = flag.Bool("contended", true, "also measure 8 claimers racing on the same runs")
	tpFlag       = flag.Int("tp-n", 500, "claims per claimer of the throughput rows (1, 4 and 8 claimers); 0 skips them")
	tpRabbit     = flag.Int("tp-n-rabbitmq", 50, "the same for rabbitmq")
	lagLoads     = flag.String("lag-loads", "1,50,200", "start lag: jobs per second to measure (3 daemons, then the baseline forker); empty skips it")
	lagDur       = flag.Duration("lag-dur", 20*time.Second, "start lag: the measured window per load")
	lagOnly      = flag.String("lag-backends", "", "start lag: only these backends (default: every one measured but postgres-async)")
	scaleJobs    = flag.Int("scale-jobs", 10000, "scale: jobs of the idle daemon; 0 skips the section")
	scaleIdleDur = flag.Duration("scale-idle", 60*time.Second, "scale: the idle window")
	scaleBusyDur = flag.Duration("scale-busy", 60*time.Second, "scale: the window at 200 jobs per second")
	scaleOnly    = flag.String("scale-backends", "", "scale: only these backends (default: every one measured but postgres-async)")
	aheadFlag    = flag.Int("claim-ahead-ms", -1, "the daemons' defaults.claimAheadMs (-1: the built-in default; 0: claims at the slot, as before claiming ahead)")
	batchFlag    = flag.Bool("batch", true, "ceiling: send claims in batches to backends that take them (false: one by one, the figure before batching)")
	outFlag      = flag.String("out", "bench/results", "directory for results.json and chart.png (empty: none)")
	ceilFlag     = flag.Int("ceiling-runs", 10000, "runs due at once in the ceiling measurement (8 claimers each claim all); 0 skips it")
	ceilRabbit   = flag.Int("ceiling-runs-rabbitmq", 500, "the same for rabbitmq (a durable queue per run)")
	overlapFlag  = flag.String("overlap", string(claim.OverlapSkip), "the claims' overlap policy: skip or allow")
	backendFlag  = flag.String("backends", strings.Join(rowNames(), ","), "comma-separated backends to measure")

	// serverFlags are the test servers' addresses, by store name.
	serverFlags = registerServerFlags()
	pgDSN       = serverFlags["postgres"]
	redisURL    = serverFlags["redis"]
	natsURL     = serverFlags["nats"]
	rabbitURL   = serverFlags["rabbitmq"]
)

// registerServerFlags defines a flag for the address of every registered
// store's test server (store.Testing): -<server>-<key> (-postgres-dsn,
// -redis-url), by default the server's ANARCHON_TEST_* variable, else the
// store's address for tests.
func registerServerFlags() map[string]*string {
	flags := map[string]*string{}
	for _, srv := range testserver.Servers() {
		flags[srv.Store] = flag.String(srv.Name+"-"+strings.ToLower(srv.URLKey), srv.URL,
			fmt.Sprintf("%s %s, one server (env %s)", srv.Title, srv.URLKey, srv.URLEnv))
	}
	return flags
}

// Timeouts of the steps around the measurement.
const (
	setupTimeout   = 30 * time.Second
	cleanupTimeout = 2 * time.Minute
	claimTimeout   = 30 * time.Second
)

func main() { os.Exit(run()) }

func run() int {
	flag.Parse()
	selected, err := selectRows(*backendFlag)
	if err == nil && (*nFlag < 1 || *nRabbitFlag < 1) {
		err = errors.New("-n and -n-rabbitmq must be at least 1")
	}
	if err == nil && *overlapFlag != string(claim.OverlapSkip) && *overlapFlag != string(claim.OverlapAllow) {
		err = fmt.Errorf("-overlap %q: want skip or allow", *overlapFlag)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "anarchon-bench:", err)
		return 2
	}

	loads, err := parseLoads(*lagLoads)
	if err != nil {
		fmt.Fprintln(os.Stderr, "anarchon-bench: -lag-loads:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	defer removeDaemonBuild()
	start := time.Now()
	var results []result
	for _, r := range selected {
		if ctx.Err() != nil {
			results = append(results, result{name: r.name, err: errors.New("interrupted")})
			continue
		}
		fmt.Fprintf(os.Stderr, "anarchon-bench: measuring %s (n=%d)...\n", r.name, *r.n)
		res := measure(ctx, r)
		if len(loads) > 0 && sectionMeasures(*lagOnly, r) && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "anarchon-bench: start lag of %s at %v jobs/s...\n", r.name, loads)
			res.lag = measureLag(ctx, r.name, loads, *lagDur)
		}
		if *scaleJobs > 0 && sectionMeasures(*scaleOnly, r) && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "anarchon-bench: scale of %s with %d jobs...\n", r.name, *scaleJobs)
			sc := measureScale(ctx, r.name, *scaleJobs, *scaleIdleDur, *scaleBusyDur)
			res.scale = &sc
		}
		results = append(results, res)
	}
	printReport(os.Stdout, start, results)
	if *outFlag != "" {
		if err := writeResults(*outFlag, toJSON(start, results)); err != nil {
			fmt.Fprintln(os.Stderr, "anarchon-bench: write results:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "anarchon-bench: wrote %s/results.json and %s/chart.png\n", *outFlag, *outFlag)
	}
	for _, res := range results {
		if res.err != nil || len(res.violations) > 0 {
			return 1
		}
	}
	return 0
}

// result is what one backend's measurement found.
type result struct {
	name       string
	n          int
	claims     []time.Duration // uncontended claims
	raws       []time.Duration // raw ops, interleaved with the claims
	floors     []time.Duration // durable one-row writes, interleaved too; nil when the store has none
	contended  []time.Duration // every claim of the races; nil when not measured
	violations []string        // contended runs without exactly one winner
	rates      []rate          // claims per second with 1, 4 and 8 claimers
	ceiling    *ceilingResult  // nil when not measured
	lag        []lagResult     // start lag beside the baseline forker, per load
	scale      *scaleResult    // 10,000 jobs on one daemon; nil when not measured
	skipped    string          // the server did not answer: why
	err        error
}

// runKey names one run claimed, for the cleanup.
type runKey struct {
	job  string
	slot int64
}

// measure sets up r's namespace, measures, and cleans up.
func measure(ctx context.Context, r row) (res result) {
	res.name, res.n = r.name, *r.n
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	st, err := r.setup(sctx)
	cancel()
	var down unreachable
	switch {
	case errors.As(err, &down):
		res.skipped = down.Error()
		return res
	case err != nil:
		res.err = fmt.Errorf("setup: %w", err)
		return res
	}
	var runs []runKey // every run claimed, for the cleanup
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := st.cleanup(cctx, runs); err != nil {
			res.err = errors.Join(res.err, fmt.Errorf("cleanup: %w", err))
		}
	}()

	res.claims, res.raws, res.floors, err = uncontended(ctx, st, res.n, &runs)
	if err != nil {
		res.err = err
		return res
	}
	if *contendFlag {
		res.contended, res.violations, err = contended(ctx, st, res.n, &runs)
		if err != nil {
			res.err = fmt.Errorf("contended: %w", err)
			return res
		}
	}
	if m := pick(r.name, *tpFlag, *tpRabbit); m > 0 {
		for _, k := range []int{1, 4, 8} {
			rt, err := throughput(ctx, st, k, m, &runs)
			if err != nil {
				res.err = fmt.Errorf("throughput with %d claimers: %w", k, err)
				return res
			}
			res.rates = append(res.rates, rt)
		}
	}
	if n := pick(r.name, *ceilFlag, *ceilRabbit); n > 0 {
		c, v, err := ceiling(ctx, st, racers, n, &runs)
		if err != nil {
			res.err = fmt.Errorf("ceiling: %w", err)
			return res
		}
		res.ceiling = &c
		res.violations = append(res.violations, v...)
	}
	return res
}

// steadyJobs is how many jobs the uncontended claims go round: each
// claim is the next slot of a job whose previous run finished, the path
// every scheduled run of an established crontab takes.
const steadyJobs = 50

// uncontended claims n fresh runs on one backend, each after one raw op.
// The runs are the next slots of steadyJobs jobs that already have state
// in the store (claimed and finished once in the warm-up); after each
// timed claim the run is finished, untimed, so that overlap=skip finds no
// live run of the job at its next slot.
func uncontended(ctx context.Context, st *store, n int, runs *[]runKey) (claims, raws, floors []time.Duration, err error) {
	be, err := st.open(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open: %w", err)
	}
	defer be.Close()
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	// Warm up both paths (connections, prepared statements, scripts) and
	// give every job its state.
	if err := st.raw(ctx); err != nil {
		return nil, nil, nil, fmt.Errorf("raw op: %w", err)
	}
	claimFinished := func(req claim.Request) (time.Duration, error) {
		d, err := claimWon(ctx, be, req, runs)
		if err == nil {
			err = finish(ctx, be, req)
		}
		return d, err
	}
	for j := range steadyJobs {
		if _, err := claimFinished(newRequest(fmt.Sprintf("solo-%d", j), base, "bench")); err != nil {
			return nil, nil, nil, err
		}
	}
	claims, raws = make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for i := range n {
		req := newRequest(fmt.Sprintf("solo-%d", i%steadyJobs), base+1+int64(i), "bench")
		if err := prepare(ctx, st, be, req); err != nil {
			return nil, nil, nil, err
		}
		t0 := time.Now()
		if err := st.raw(ctx); err != nil {
			return nil, nil, nil, fmt.Errorf("raw op %d: %w", i, err)
		}
		raws = append(raws, time.Since(t0))
		d, err := claimFinished(req)
		if err != nil {
			return nil, nil, nil, err
		}
		claims = append(claims, d)
		if st.floor != nil {
			t0 := time.Now()
			if err := st.floor(ctx); err != nil {
				return nil, nil, nil, fmt.Errorf("durable write %d: %w", i, err)
			}
			floors = append(floors, time.Since(t0))
		}
	}
	return claims, raws, floors, nil
}

// prepare prepares req's run on be, untimed, when be is a claim.Preparer
// and st measures prepared claims.
func prepare(ctx context.Context, st *store, be claim.Backend, req claim.Request) error {
	p, ok := be.(claim.Preparer)
	if !ok || !st.prepare {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	if err := p.Prepare(ctx, req.Job, req.Slot); err != nil {
		return fmt.Errorf("prepare %s@%d: %w", req.Job, req.Slot, err)
	}
	return nil
}

// finish records req's run as succeeded on a lease backend; claim-only
// backends keep no run to finish.
func finish(ctx context.Context, be claim.Backend, req claim.Request) error {
	if _, ok := be.(claim.Leaser); !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	if err := be.Finish(ctx, req.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
		return fmt.Errorf("finish %s@%d: %w", req.Job, req.Slot, err)
	}
	return nil
}

// claimWon claims req, which must be won, and returns how long it took.
func claimWon(ctx context.Context, be claim.Backend, req claim.Request, runs *[]runKey) (time.Duration, error) {
	*runs = append(*runs, runKey{req.Job, req.Slot})
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	req.Now = time.Now()
	t0 := time.Now()
	res, err := be.Claim(ctx, req)
	d := time.Since(t0)
	switch {
	case err != nil:
		return 0, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	case res.Outcome != claim.Won:
		return 0, fmt.Errorf("claim %s@%d of a fresh run answered %s, want won", req.Job, req.Slot, res.Outcome)
	}
	return d, nil
}

// contended has racers backends race on n fresh runs, one round per run.
func contended(ctx context.Context, st *store, n int, runs *[]runKey) (lat []time.Duration, violations []string, err error) {
	bes := make([]claim.Backend, 0, racers)
	defer func() {
		for _, be := range bes {
			be.Close()
		}
	}()
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	for g := range racers {
		be, err := st.open(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("open claimer %d: %w", g, err)
		}
		bes = append(bes, be)
		if _, err := claimWon(ctx, be, newRequest(fmt.Sprintf("warm-%d", g), base, "bench"), runs); err != nil {
			return nil, nil, err
		}
	}
	lat = make([]time.Duration, 0, racers*n)
	var (
		lats     [racers]time.Duration
		outcomes [racers]claim.Outcome
		errs     [racers]error
	)
	for i := range n {
		job, slot := fmt.Sprintf("race-%d", i), base+int64(i)
		*runs = append(*runs, runKey{job, slot})
		release := make(chan struct{})
		var wg sync.WaitGroup
		for g, be := range bes {
			req := newRequest(job, slot, fmt.Sprintf("racer-%d", g)) // a fresh token each
			if err := prepare(ctx, st, be, req); err != nil {
				return nil, nil, err
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, claimTimeout)
				defer cancel()
				<-release
				req.Now = time.Now()
				t0 := time.Now()
				res, err := be.Claim(ctx, req)
				lats[g], outcomes[g], errs[g] = time.Since(t0), res.Outcome, err
			})
		}
		close(release)
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return nil, nil, fmt.Errorf("run %s@%d: %w", job, slot, err)
		}
		lat = append(lat, lats[:]...)
		if won := count(outcomes[:], claim.Won); won != 1 {
			violations = append(violations, fmt.Sprintf("run %s@%d: %d won, want exactly 1 (outcomes %v)", job, slot, won, outcomes))
		}
	}
	return lat, violations, nil
}

// parseLoads reads a comma-separated list of jobs per second.
func parseLoads(list string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number of jobs per second", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// listed reports whether name is in the comma-separated list (an empty
// list names every backend).
func listed(list, name string) bool {
	return list == "" || slices.Contains(strings.Split(list, ","), name)
}

// sectionMeasures reports whether a section with the backends list (start
// lag's or scale's) measures r: the backends the list names or, for an
// empty list, every backend but the variants of another's settings.
func sectionMeasures(list string, r row) bool {
	if list == "" {
		return r.of == ""
	}
	return listed(list, r.name)
}

// pick is the rabbitmq value for the rabbitmq rows, else def.
func pick(backend string, def, rabbit int) int {
	if strings.HasPrefix(backend, "rabbitmq") {
		return rabbit
	}
	return def
}

func count(outcomes []claim.Outcome, o claim.Outcome) int {
	n := 0
	for _, x := range outcomes {
		if x == o {
			n++
		}
	}
	return n
}

// newRequest is the first claim of job@slot by instance, with a fresh token.
func newRequest(job string, slot int64, instance string) claim.Request {
	return claim.Request{Job: job, Slot: slot, Token: claim.NewToken(), Instance: instance,
		MaxLate: time.Hour, Lease: 30 * time.Second, MaxAttempts: 3,
		Overlap: claim.OverlapPolicy(*overlapFlag), Now: time.Now()}
}

// selectRows returns the rows named in the comma-separated list.
func selectRows(list string) ([]row, error) {
	var out []row
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(rows, func(r row) bool { return r.name == name })
		if i < 0 {
			return nil, fmt.Errorf("-backends: unknown backend %q (known: %s)", name, strings.Join(rowNames(), ","))
		}
		out = append(out, rows[i])
	}
	if len(out) == 0 {
		return nil, errors.New("-backends: no backend named")
	}
	return out, nil
}

func rowNames() []string {
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.name
	}
	return names
}

// suffix is a random name part, so that concurrent runs never share a
// namespace.
func suffix() string { return fmt.Sprintf("%08x", rand.Uint32()) }

// servers lists the test servers' addresses, passwords hidden.
func servers() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(serverFlags)) {
		parts = append(parts, name+" "+redact(*serverFlags[name]))
	}
	return strings.Join(parts, ", ")
}

// redact hides passwords in s (URLs and key=value DSNs).
func redact(s string) string { return secret.Redact(s) }
