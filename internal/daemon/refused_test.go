package daemon

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/store"
)

// refusedOpens counts the opens of the "refusing" test store, which
// refuses anarchond's login for good.
var refusedOpens atomic.Int32

func init() {
	store.Register(store.Driver{
		Name: "refusing", Summary: "a store that refuses every login",
		Parse: func(store.Section) store.Settings { return nil },
		Open: func(context.Context, store.OpenParams) (claim.Backend, error) {
			refusedOpens.Add(1)
			return nil, claim.Permanent("refusing", errors.New("password authentication failed"),
				"the server refused the login", "correct the password")
		},
	})
}

// A store that refuses the start for good is not retried: the start fails
// at once with the cause and the fix, for systemd to show, where a store
// that does not answer is waited for.
func TestStartRefusedIsNotRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cfg := &config.Config{Backend: config.Backend{Type: "refusing"}}
	_, err := openStore(ctx, cfg, clock.Real{}, zap.NewNop())
	if !claim.IsPermanent(err) || ctx.Err() != nil {
		t.Fatalf("open: %v (context: %v): want the refusal at once", err, ctx.Err())
	}
	if n := refusedOpens.Load(); n != 1 {
		t.Fatalf("the store was opened %d times, want once", n)
	}
	for _, want := range []string{"refusing refused: the server refused the login", "fix: correct the password"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the start's error lacks %q: %v", want, err)
		}
	}
}
