package redisclaim_test

import (
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
)

// BenchmarkClaimUncontended: one claimer, a fresh slot every iteration (the
// won path: EVALSHA of the claim script, which writes the run, the slot
// index, the live lease and a history event; then SADD of the job index).
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
