package claimtest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The benchmarks every backend runs, so that their figures compare: one
// claimer on fresh slots, and eight claimers racing on the same slots.

// BenchRequest is a claim of (job, slot) with a fresh token that wins when
// nobody else holds the slot: maxLate an hour, overlap allowed.
func BenchRequest(job string, slot int64) claim.Request {
	return claim.Request{Job: job, Slot: slot, Token: claim.NewToken(), Instance: "bench",
		MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapAllow, Now: time.Now()}
}

// ReportLatency reports the p50 and p99 of per-claim durations as the
// metrics p50-µs and p99-µs.
func ReportLatency(b *testing.B, d []time.Duration) {
	b.Helper()
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	pct := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchUncontended claims a fresh slot every iteration: the won path.
func BenchUncontended(b *testing.B, be claim.Backend) {
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		r := BenchRequest("bench", base+int64(i))
		start := time.Now()
		res, err := be.Claim(b.Context(), r)
		lat = append(lat, time.Since(start))
		if err != nil || res.Outcome != claim.Won {
			b.Fatalf("claim: %+v %v", res, err)
		}
	}
	b.StopTimer()
	ReportLatency(b, lat)
}

// BenchContended8 has 8 claimers, each with its own token, claim the same
// slots in the same order; an iteration is one slot (8 claims, exactly one
// won, checked). OneBackend shares one backend (one client); EightBackends
// gives each claimer its own, as 8 instances would have. newStore makes a
// fresh store for each of the two and returns how to open a backend on it.
func BenchContended8(b *testing.B, newStore func(b *testing.B) (open func() claim.Backend)) {
	for _, shared := range []bool{true, false} {
		name := "EightBackends"
		if shared {
			name = "OneBackend"
		}
		b.Run(name, func(b *testing.B) {
			c := newContended(b, newStore(b), shared)
			c.run()
			c.check()
		})
	}
}

// contended is one run of BenchContended8: the claimers' backends and the
// first slot, and what each claimer measured and met, indexed by claimer.
type contended struct {
	b        *testing.B
	backends []claim.Backend
	base     int64
	lats     [][]time.Duration
	wins     []int
	errs     []error
}

// newContended opens the 8 claimers' backends on the store: one shared by
// all when shared, else one each.
func newContended(b *testing.B, open func() claim.Backend, shared bool) *contended {
	backends := make([]claim.Backend, 8)
	for i := range backends {
		if shared && i > 0 {
			backends[i] = backends[0]
			continue
		}
		backends[i] = open()
	}
	return &contended{
		b:        b,
		backends: backends,
		base:     time.Now().Add(-30 * time.Minute).UnixMilli(),
		lats:     make([][]time.Duration, 8),
		wins:     make([]int, 8),
		errs:     make([]error, 8),
	}
}

// run times the 8 claimers, released together, over b.N slots.
func (c *contended) run() {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() { c.claimer(g, start) })
	}
	c.b.ResetTimer()
	close(start)
	wg.Wait()
	c.b.StopTimer()
}

// claimer is claimer g: with its own token, once start closes, it claims
// every slot in order, timing each claim and counting its wins. It stops
// at its first error.
func (c *contended) claimer(g int, start <-chan struct{}) {
	b := c.b
	tok := claim.NewToken()
	lat := make([]time.Duration, 0, b.N)
	<-start
	for i := range b.N {
		r := BenchRequest("bench", c.base+int64(i))
		r.Token, r.Instance = tok, fmt.Sprintf("g%d", g)
		t0 := time.Now()
		res, err := c.backends[g].Claim(b.Context(), r)
		lat = append(lat, time.Since(t0))
		if err != nil {
			c.errs[g] = err
			return
		}
		if res.Outcome == claim.Won {
			c.wins[g]++
		}
	}
	c.lats[g] = lat
}

// check fails the benchmark on any claimer's error or unless every slot
// was won exactly once, then reports the latencies of all claims.
func (c *contended) check() {
	b := c.b
	b.Helper()
	total := 0
	for g := range 8 {
		if c.errs[g] != nil {
			b.Fatalf("claimer %d: %v", g, c.errs[g])
		}
		total += c.wins[g]
	}
	if total != b.N {
		b.Fatalf("%d slots, %d wins: want exactly one per slot", b.N, total)
	}
	ReportLatency(b, slices.Concat(c.lats...))
}

// BenchListRuns measures status: the 50 newest runs among 2000 of 10 jobs,
// two thirds of them finished.
func BenchListRuns(b *testing.B, be claim.Backend) {
	base := time.Now().Add(-30 * time.Minute)
	for i := range 2000 {
		r := BenchRequest(fmt.Sprintf("job%d", i%10), base.Add(time.Duration(i)*time.Millisecond).UnixMilli())
		if _, err := be.Claim(b.Context(), r); err != nil {
			b.Fatal(err)
		}
		if i%3 != 0 {
			if err := be.Finish(b.Context(), r.Fence(1), claim.Finish{Status: claim.StatusSucceeded, StartedAt: base, FinishedAt: base}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for range b.N {
		runs, err := be.ListRuns(b.Context(), claim.ListQuery{})
		if err != nil || len(runs) != 50 {
			b.Fatalf("list: %d runs, %v", len(runs), err)
		}
	}
}
