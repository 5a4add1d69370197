package claimtest

import (
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// testRefusedIsPermanent: a refusal no re-send changes is classified, so
// that the daemon reports it with its fix instead of retrying it for ever
// (docs/spec.md#s3-errors): the open fails with a claim.PermanentError,
// or the first claim does.
func (s *suite) testRefusedIsPermanent(t *testing.T) {
	ctx := s.ctx(t)
	b, err := s.h.Permanent(t)
	if err == nil {
		if b == nil {
			t.Fatal("Harness.Permanent returned neither a backend nor an error")
		}
		now := time.Now()
		_, err = b.Claim(ctx, request(newJob("refused"), now.UnixMilli(), now))
		if err == nil {
			t.Fatal("the store was made to refuse, but the claim was answered")
		}
	}
	p, ok := claim.AsPermanent(err)
	if !ok {
		t.Fatalf("a refusal no re-send changes must be a claim.PermanentError (claim.Permanent), got %T: %v", err, err)
	}
	if p.Store == "" || p.Cause == "" || p.Fix == "" {
		t.Fatalf("a refusal names its store, cause and fix: %+v", p)
	}
	t.Logf("refused: %v", err)
}
