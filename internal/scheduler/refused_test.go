package scheduler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
)

// refusing refuses every claim for good, as a store does to a role without
// privileges, and remembers the tokens it was sent.
type refusing struct {
	claim.Backend
	mu     sync.Mutex
	tokens []claim.Token
}

func (r *refusing) Claim(_ context.Context, req claim.Request) (claim.Result, error) {
	r.mu.Lock()
	r.tokens = append(r.tokens, req.Token)
	r.mu.Unlock()
	return claim.Result{}, claim.Permanent("postgres", errors.New("ERROR: permission denied for table anarchon_runs (SQLSTATE 42501)"),
		"role anarchon may not write table anarchon_runs", "GRANT SELECT, INSERT, UPDATE, DELETE ON anarchon_runs TO anarchon")
}

// A refused claim is not re-sent: its slot is missed (store_refused) at
// once, and the cause with its fix is logged once as an error however many
// slots the store refuses.
func TestRefusedClaimIsNotResent(t *testing.T) {
	h := newHarness(t)
	core, logs := observer.New(zapcore.DebugLevel)
	h.log = zap.New(core)
	missed := make(chan string, 10)
	h.hooks = Hooks{Missed: func(_, reason string, n int) {
		for range n {
			missed <- reason
		}
	}}
	rb := &refusing{Backend: h.store}
	j := job("tick", "* * * * * *")
	h.start("a", rb, false, j)
	awaitMissed := func(what string) {
		t.Helper()
		select {
		case r := <-missed:
			if r != ReasonStoreRefused {
				t.Fatalf("%s: missed for %q, want %q", what, r, ReasonStoreRefused)
			}
		case <-time.After(waitFor):
			t.Fatalf("%s: no slot counted missed", what)
		}
	}
	awaitMissed("the start's slot")
	h.awaitTimers(1)
	h.clk.Advance(time.Second)
	awaitMissed("the next slot")
	h.none(1)

	rb.mu.Lock()
	tokens := append([]claim.Token(nil), rb.tokens...)
	rb.mu.Unlock()
	if len(tokens) != 2 || tokens[0] == tokens[1] {
		t.Fatalf("claims sent with tokens %v, want one claim per slot, none re-sent", tokens)
	}
	errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
	if len(errs) != 1 {
		t.Fatalf("logged %d error lines, want the refusal once: %v", len(errs), errs)
	}
	fields := errs[0].ContextMap()
	if fields["fix"] != "GRANT SELECT, INSERT, UPDATE, DELETE ON anarchon_runs TO anarchon" || fields["cause"] == "" {
		t.Fatalf("the refusal's line names no cause or fix: %v", fields)
	}
	if n := logs.FilterMessageSnippet("unreachable").Len(); n != 0 {
		t.Fatalf("a refusal logged as an outage %d time(s)", n)
	}
}
