package rabbitclaim_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
)

// reportLatency reports the p50 and p99 of per-claim durations.
func reportLatency(b *testing.B, d []time.Duration) {
	b.Helper()
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	pct := func(p float64) float64 {
		i := int(p * float64(len(d)-1))
		return float64(d[i].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

func benchRequest(job string, slot int64) claim.Request {
	return claim.Request{Job: job, Slot: slot, Token: claim.NewToken(), Instance: "bench",
		MaxLate: time.Hour, Now: time.Now()}
}

// BenchmarkClaimUncontended: one claimer, a fresh slot every iteration (the
// won path: declare a new durable gate, publish a persistent claim, wait
// for the confirm, which the broker sends after its fsync).
func BenchmarkClaimUncontended(b *testing.B) {
	n := newNS(b, brokerURL(b))
	be := n.open(b)
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		r := benchRequest("bench", base+int64(i))
		start := time.Now()
		res, err := be.Claim(b.Context(), r)
		lat = append(lat, time.Since(start))
		if err != nil || res.Outcome != claim.Won {
			b.Fatalf("claim: %+v %v", res, err)
		}
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkClaimContended8: 8 claimers, each with its own token, claim the
// same slots in the same order; each iteration is one slot (8 claims, one
// won, seven nacked). OneBackend shares one Backend (one connection, a
// channel per claim in flight); EightBackends gives each its own
// connection, as 8 instances would have.
func BenchmarkClaimContended8(b *testing.B) {
	for _, shared := range []bool{true, false} {
		name := "EightBackends"
		if shared {
			name = "OneBackend"
		}
		b.Run(name, func(b *testing.B) {
			n := newNS(b, brokerURL(b))
			backends := make([]*rabbitclaim.Backend, 8)
			for i := range backends {
				if shared && i > 0 {
					backends[i] = backends[0]
					continue
				}
				backends[i] = n.open(b)
			}
			base := time.Now().Add(-30 * time.Minute).UnixMilli()
			lats := make([][]time.Duration, 8)
			wins := make([]int, 8)
			errs := make([]error, 8)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					tok := claim.NewToken()
					lat := make([]time.Duration, 0, b.N)
					<-start
					for i := range b.N {
						r := benchRequest("bench", base+int64(i))
						r.Token, r.Instance = tok, fmt.Sprintf("g%d", g)
						t0 := time.Now()
						res, err := backends[g].Claim(b.Context(), r)
						lat = append(lat, time.Since(t0))
						if err != nil {
							errs[g] = err
							return
						}
						if res.Outcome == claim.Won {
							wins[g]++
						}
					}
					lats[g] = lat
				})
			}
			b.ResetTimer()
			close(start)
			wg.Wait()
			b.StopTimer()
			total := 0
			for g := range 8 {
				if errs[g] != nil {
					b.Fatalf("claimer %d: %v", g, errs[g])
				}
				total += wins[g]
			}
			if total != b.N {
				b.Fatalf("%d slots, %d wins: want exactly one per slot", b.N, total)
			}
			reportLatency(b, slices.Concat(lats...))
		})
	}
}
