package rabbitclaim_test

import (
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
)

// BenchmarkClaimUncontended: one claimer, a fresh slot every iteration (the
// won path: declare a new durable gate, publish a persistent claim, wait
// for the confirm, which the broker sends after its fsync).
func BenchmarkClaimUncontended(b *testing.B) {
	claimtest.BenchUncontended(b, newNS(b, brokerURL(b)).open(b))
}

// BenchmarkClaimContended8: 8 claimers on the same slots (a loser's claim
// is a declare and a publish answered nack).
func BenchmarkClaimContended8(b *testing.B) {
	claimtest.BenchContended8(b, func(b *testing.B) func() claim.Backend {
		n := newNS(b, brokerURL(b))
		return func() claim.Backend { return n.open(b) }
	})
}
