package redisclaim_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/redisclaim"
)

// BenchmarkClaimUncontended: one claimer, a fresh slot every iteration (the
// won path: one EVALSHA of the claim script, which writes the run, the live
// lease and a history event; the job index's SADD only before the first).
func BenchmarkClaimUncontended(b *testing.B) {
	claimtest.BenchUncontended(b, open(b, newNamespace(b)))
}

// BenchmarkClaimContended8: 8 claimers on the same slots; OneBackend shares
// one go-redis connection pool.
func BenchmarkClaimContended8(b *testing.B) {
	claimtest.BenchContended8(b, func(b *testing.B) func() claim.Backend {
		ns := newNamespace(b)
		return func() claim.Backend { return open(b, ns) }
	})
}

// BenchmarkClaimFormats: the won claim of the next slot of one of 50 jobs
// that have state (anarchon-bench's claim), by the claim script and by the
// earlier format's (testdata/lease_claim_v1.lua, which also indexed the run
// in :slots), each in a namespace of its own. Every iteration sends a PING
// and both claims, in random order, on one client, so that all three see
// the same load: on a busy machine, runs of anarchon-bench minutes apart
// differ by more than the two scripts do. Each run is finished (untimed)
// before the job's next slot. Reports the p50 of each and claim/PING.
func BenchmarkClaimFormats(b *testing.B) {
	const jobs = 50
	ctx := b.Context()
	c := rawClient(b)
	type format struct {
		script *redis.Script
		be     *redisclaim.Backend // its Finish settles the runs of both
		lat    []time.Duration
	}
	formats := []*format{{script: redisclaim.LeaseClaim}, {script: leaseClaimV1}}
	for _, f := range formats {
		f.be = open(b, newNamespace(b))
		if err := f.script.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
	}
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	claimFinished := func(f *format, i int, indexed string) time.Duration {
		job := fmt.Sprintf("solo-%d", i%jobs)
		if indexed == "1" {
			if err := c.SAdd(ctx, f.be.Namespace()+":jobs", job).Err(); err != nil {
				b.Fatal(err)
			}
		}
		tag := "{" + f.be.Namespace() + ":" + job + "}"
		r := claim.Request{Job: job, Slot: base + int64(i), Token: claim.NewToken(), Instance: "bench",
			MaxLate: time.Hour, Lease: 30 * time.Second, MaxAttempts: 3, Overlap: claim.OverlapSkip}
		start := time.Now()
		v, err := f.script.EvalSha(ctx, c, []string{tag + ":state", tag + ":slots", tag + ":live", tag + ":history"},
			r.Slot, string(r.Token), r.Instance, r.MaxLate.Milliseconds(), r.Lease.Milliseconds(), r.MaxAttempts,
			string(r.Overlap), redisclaim.DefaultHistoryMaxLen, indexed).Slice()
		d := time.Since(start)
		if err != nil || len(v) == 0 || v[0] != string(claim.Won) {
			b.Fatalf("claim %s@%d: %v %v", job, r.Slot, v, err)
		}
		if err := f.be.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded}); err != nil {
			b.Fatal(err)
		}
		return d
	}
	for i := range jobs { // every job gets its state
		for _, f := range formats {
			claimFinished(f, i, "1")
		}
	}
	pings := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		for _, k := range rand.Perm(3) {
			if k == 2 {
				start := time.Now()
				if err := c.Ping(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				pings = append(pings, time.Since(start))
				continue
			}
			f := formats[k]
			f.lat = append(f.lat, claimFinished(f, jobs+i, ""))
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1e3
	}
	ping, now, earlier := p50(pings), p50(formats[0].lat), p50(formats[1].lat)
	b.ReportMetric(ping, "ping-p50-µs")
	b.ReportMetric(now, "p50-µs")
	b.ReportMetric(earlier, "earlier-p50-µs")
	b.ReportMetric(now/ping, "×ping")
	b.ReportMetric(earlier/ping, "earlier-×ping")
}
