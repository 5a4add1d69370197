package redisclaim

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// The stream-id strategy (docs/spec.md#s3-2-stream-id; see claimonly.go):
// XADD with the explicit ID <slot>-0; Redis's rule that IDs grow picks the
// winner.

// errIDNotGreater is the start of Redis's answer to an XADD whose explicit
// ID is not above the stream's last generated ID (go-redis's
// HasErrorPrefix drops the "ERR ").
const errIDNotGreater = "The ID specified in XADD is equal or smaller"

// streamID is the entry ID of slot's claim.
func streamID(slot int64) string { return strconv.FormatInt(slot, 10) + "-0" }

// claimStreamID sends XADD <slot>-0 (withIndex); on "equal or smaller" it reads the entry <slot>-0 and
// compares tokens. It returns the entry ID of the claim.
func (b *ClaimOnly) claimStreamID(ctx context.Context, req claim.Request) (claim.Result, string, error) {
	id := streamID(req.Slot)
	cmd := b.withIndex(ctx, req.Job, func(p redis.Cmdable) redis.Cmder {
		return p.XAdd(ctx, &redis.XAddArgs{
			Stream: b.runsKey(req.Job), MaxLen: b.maxLen, Approx: true, ID: id, Values: claimFields(req),
		})
	})
	switch err := cmd.Err(); {
	case err == nil:
		return claim.Result{Outcome: claim.Won, Attempt: 1}, id, nil
	case !redis.HasErrorPrefix(err, errIDNotGreater):
		return claim.Result{}, "", err
	}
	// Rejected: someone's claim of this slot (maybe mine, re-sent) or of a
	// later slot came first. The entry of this slot, if any, decides.
	rec, ok, err := b.readClaim(ctx, req.Job, id)
	if err != nil {
		return claim.Result{}, "", err
	}
	if !ok {
		b.warnSkipped(ctx, req)
	}
	return b.decideByToken(req, rec, ok, id), id, nil
}

// warnSkipped logs a slot that nobody will run: its claim found no entry,
// yet the stream still holds older entries (so it was not trimmed): a
// later slot of the job was claimed before anyone's claim of this one
// reached Redis. A failed read only loses the warning.
func (b *ClaimOnly) warnSkipped(ctx context.Context, req claim.Request) {
	older, err := b.c.XRevRangeN(ctx, b.runsKey(req.Job), "("+streamID(req.Slot), "-", 1).Result()
	if err != nil || len(older) == 0 {
		return
	}
	b.log.Warn("slot skipped: a later slot of the job was claimed before any claim of this one reached redis; nobody runs it (strategy stream-id)",
		zap.String("job", req.Job), zap.Int64("slot", req.Slot), zap.String("token", req.Token.Short()))
}
