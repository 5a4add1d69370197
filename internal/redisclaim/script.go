package redisclaim

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// The script strategy (docs/spec.md#s3-2-script; see claimonly.go): one Lua
// script over the stream's entries of the last window.

// claimScript runs the claim script (evalScript). It returns the entry ID
// of the run's claim.
func (b *ClaimOnly) claimScript(ctx context.Context, req claim.Request) (claim.Result, string, error) {
	keys := []string{b.runsKey(req.Job)}
	args := []any{req.Slot, string(req.Token), req.Instance, b.window.Milliseconds(), req.MaxLate.Milliseconds()}
	v, err := b.evalScript(ctx, req.Job, scriptClaim, keys, args...)
	if err != nil {
		return claim.Result{}, "", err
	}
	if len(v) != 4 {
		return claim.Result{}, "", fmt.Errorf("unexpected script reply %v", v)
	}
	outcome, _ := v[0].(string)
	tok, _ := v[1].(string)
	nowMs, ok := v[2].(int64)
	id, _ := v[3].(string)
	if !ok {
		return claim.Result{}, "", fmt.Errorf("unexpected script reply %v", v)
	}
	res := claim.Result{StoreNow: fromMs(nowMs)}
	switch outcome {
	case "late":
		res.Outcome = claim.Late
	case "added", "found":
		if claim.Token(tok) == req.Token {
			res.Outcome, res.Attempt = claim.Won, 1
		} else {
			res.Outcome = claim.Lost
		}
	default:
		return claim.Result{}, "", fmt.Errorf("unexpected outcome %q from the claim script", outcome)
	}
	if outcome == "found" && res.Outcome == claim.Won {
		b.log.Debug("claim re-sent: my own claim was already stored", zap.String("job", req.Job),
			zap.Int64("slot", req.Slot), zap.String("token", req.Token.Short()))
	}
	return res, id, nil
}
