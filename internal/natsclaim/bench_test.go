package natsclaim_test

import (
	"testing"

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
	claimtest.BenchListRuns(b, open(b, p.options()))
}
