package redisclaim_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/redisclaim"
)

// scriptBenchSlots: the script strategy scans the claims of its window, so
// a benchmark that claims thousands of slots of one job within the window
// measures that scan and nothing else. Its benchmarks spread the slots
// over jobs of this many consecutive slots each: a job every 10 s under the
// default 1 h window holds 360 claims. A slot's first claim scans its job's
// claims so far (180 on average), the others find the winner among the
// newest.
const scriptBenchSlots = 360

// spread sends the claims of slot s to job "<job>-<s/scriptBenchSlots>".
type spread struct{ claim.Backend }

func (s spread) Claim(ctx context.Context, r claim.Request) (claim.Result, error) {
	r.Job = fmt.Sprintf("%s-%d", r.Job, r.Slot/scriptBenchSlots)
	return s.Backend.Claim(ctx, r)
}

// benchBackend opens a backend of strategy on ns for the standard
// benchmarks (script's spread over jobs).
func benchBackend(b *testing.B, ns, strategy string) claim.Backend {
	be := openClaimOnly(b, ns, strategy)
	if strategy == redisclaim.StrategyScript {
		return spread{be}
	}
	return be
}

// BenchmarkClaimOnlyUncontended: one claimer, a fresh slot every iteration
// (the won path: stream-id one XADD; script the claim script, which scans
// the job's window and appends; both pipelined with the SADD of the job
// index).
func BenchmarkClaimOnlyUncontended(b *testing.B) {
	for _, s := range claimOnlyStrategies {
		b.Run(s, func(b *testing.B) {
			claimtest.BenchUncontended(b, benchBackend(b, newNamespace(b), s))
		})
	}
}

// BenchmarkClaimOnlyContended8: 8 claimers on the same slots (stream-id's
// losers get the XADD error and read the slot's entry back; script's find
// the winner's entry in the script).
func BenchmarkClaimOnlyContended8(b *testing.B) {
	for _, s := range claimOnlyStrategies {
		b.Run(s, func(b *testing.B) {
			claimtest.BenchContended8(b, func(b *testing.B) func() claim.Backend {
				ns := newNamespace(b)
				return func() claim.Backend { return benchBackend(b, ns, s) }
			})
		})
	}
}

// BenchmarkClaimOnlyListRuns: status of the 50 newest runs among 2000.
func BenchmarkClaimOnlyListRuns(b *testing.B) {
	for _, s := range claimOnlyStrategies {
		b.Run(s, func(b *testing.B) { claimtest.BenchListRuns(b, openClaimOnly(b, newNamespace(b), s)) })
	}
}
