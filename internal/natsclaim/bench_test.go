package natsclaim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
)

// BenchmarkClaimUncontended: one claimer, a fresh slot every iteration (the
// won path: one publish and its ack).
func BenchmarkClaimUncontended(b *testing.B) {
	p := newPlace(b)
	claimtest.BenchUncontended(b, open(b, p.options()))
}

// BenchmarkClaimContended8: 8 claimers on the same slots (a loser's claim
// is a publish answered duplicate and a read of the stored claim).
func BenchmarkClaimContended8(b *testing.B) {
	claimtest.BenchContended8(b, func(b *testing.B) func() claim.Backend {
		p := newPlace(b)
		return func() claim.Backend { return open(b, p.options()) }
	})
}

// BenchmarkListRuns: status of the 50 newest runs among 2000.
func BenchmarkListRuns(b *testing.B) {
	p := newPlace(b)
	be := open(b, p.options())
	base := time.Now().Add(-30 * time.Minute)
	for i := range 2000 {
		r := claimtest.BenchRequest(fmt.Sprintf("job%d", i%10), base.Add(time.Duration(i)*time.Millisecond).UnixMilli())
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
