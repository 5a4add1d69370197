package sqliteclaim_test

import (
	"path/filepath"
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
)

func benchBackend(b *testing.B, path string) claim.Backend {
	be, err := sqliteclaim.New(b.Context(), sqliteclaim.Options{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be
}

// BenchmarkClaimUncontended: one claimer, a fresh slot every iteration (the
// won path: BEGIN IMMEDIATE, insert run and history, COMMIT with fsync).
func BenchmarkClaimUncontended(b *testing.B) {
	claimtest.BenchUncontended(b, benchBackend(b, filepath.Join(b.TempDir(), "bench.db")))
}

// BenchmarkClaimContended8: 8 claimers on the same slots; OneBackend queue
// on its in-process write lock, EightBackends (8 instances on one host) on
// SQLite's busy handler.
func BenchmarkClaimContended8(b *testing.B) {
	claimtest.BenchContended8(b, func(b *testing.B) func() claim.Backend {
		path := filepath.Join(b.TempDir(), "bench.db")
		return func() claim.Backend { return benchBackend(b, path) }
	})
}
