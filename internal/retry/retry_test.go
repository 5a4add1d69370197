package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

// Policy.Do returns a refusal at once: no re-send changes it.
func TestDoStopsOnPermanent(t *testing.T) {
	calls := 0
	refusal := claim.Permanent("postgres", errors.New("SQLSTATE 28P01"), "password authentication failed", "set the password")
	n, err := Policy{Clock: clock.Real{}, PerCall: time.Second, Min: time.Hour, Max: time.Hour}.Do(context.Background(),
		func(context.Context) error { calls++; return refusal })
	if n != 1 || calls != 1 || !claim.IsPermanent(err) {
		t.Fatalf("Do made %d call(s) (%d), err %v: want one call and the refusal", n, calls, err)
	}
}
