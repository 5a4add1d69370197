package memclaim

import (
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/clock"
)

// The in-memory backend passes the same suite as the stores, on a fake
// clock that the lease cases advance instead of waiting.
func TestConformance(t *testing.T) {
	claimtest.Exercise(t, claimtest.Harness{
		New:        func(t *testing.T) claim.Backend { return New(clock.NewFake(time.Now())) },
		Advance:    func(b claim.Backend, d time.Duration) { b.(*Backend).clock.(*clock.Fake).Advance(d) },
		Controller: true,
		Registry:   true,
	})
}
