package claim

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestPermanentNamesStoreCauseAndFix(t *testing.T) {
	base := errors.New("NOPERM User anarchon has no permissions to access the 'anarchon:x' key")
	err := fmt.Errorf("claim x@1: %w", Permanent("redis", base, "user anarchon may not use the keys anarchon:*", "ACL SETUSER anarchon ~anarchon:* +@all"))
	if !IsPermanent(err) {
		t.Fatalf("IsPermanent(%v) = false through a wrap", err)
	}
	if !errors.Is(err, base) {
		t.Fatalf("the store's own error is not wrapped: %v", err)
	}
	for _, want := range []string{"redis refused", "may not use the keys", "NOPERM", "fix: ACL SETUSER"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if IsPermanent(errors.New("connection reset by peer")) || IsPermanent(nil) {
		t.Error("a transport error or nil is permanent")
	}
	if Permanent("redis", nil, "c", "f") != nil {
		t.Error("Permanent(nil) is not nil")
	}
	if p, _ := AsPermanent(Permanent("nats", err, "other", "other")); p.Store != "redis" {
		t.Errorf("a refusal wrapped again changed its cause: %+v", p)
	}
}
