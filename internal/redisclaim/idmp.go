package redisclaim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// The idmp strategy (docs/spec.md#s3-2-idmp, Redis 8.6+; see claimonly.go):
// XADD with IDMP <job> <slot>; Redis keeps the first entry per idempotency
// key.

// idmpJob is the configuration state of one job's stream in this process.
type idmpJob struct {
	mu   sync.Mutex
	done bool
}

// idmpArgs is the claim's XADD: NOMKSTREAM IDMP <job> <slot> MAXLEN ~ n *.
func (b *ClaimOnly) idmpArgs(req claim.Request) *redis.XAddArgs {
	return b.idmpAdd(req.Job, req.Slot, claimFields(req))
}

// idmpAdd is the idempotent XADD of the entry (a claim or a note) of
// (job, slot). go-redis sends IDMP only when both ProducerID and
// IdempotentID are set (ProducerID alone sends nothing of it, silently).
func (b *ClaimOnly) idmpAdd(job string, slot int64, values []any) *redis.XAddArgs {
	return &redis.XAddArgs{
		Stream:       b.runsKey(job),
		NoMkStream:   true,
		ProducerID:   job,
		IdempotentID: strconv.FormatInt(slot, 10),
		// Keep at least every entry an idempotency key may point to.
		MaxLen: max(b.maxLen, b.idmpMax),
		Approx: true,
		ID:     "*",
		Values: values,
	}
}

// claimIDMP sends the claim's idempotent XADD and reads back the entry
// Redis answered with: a duplicate answers the first claim's ID, with no
// error and no flag. It returns that entry ID.
func (b *ClaimOnly) claimIDMP(ctx context.Context, req claim.Request) (claim.Result, string, error) {
	id, err := b.xaddIDMP(ctx, req.Job, b.idmpArgs(req))
	if err != nil {
		return claim.Result{}, "", err
	}
	rec, ok, err := b.readClaim(ctx, req.Job, id)
	if err != nil {
		return claim.Result{}, "", err
	}
	return b.decideByToken(req, rec, ok, id), id, nil
}

// xaddIDMP configures the job's stream (once per process) and sends the
// idempotent XADD args (withIndex); it returns the ID Redis answered: the new entry's, or the
// first entry's of the idempotency key.
func (b *ClaimOnly) xaddIDMP(ctx context.Context, job string, args *redis.XAddArgs) (string, error) {
	for try := 0; ; try++ {
		if err := b.configureIDMP(ctx, job); err != nil {
			return "", err
		}
		cmd := b.withIndex(ctx, job, func(p redis.Cmdable) redis.Cmder {
			return p.XAdd(ctx, args)
		})
		id, err := cmd.(*redis.StringCmd).Result()
		if errors.Is(err, redis.Nil) {
			// NOMKSTREAM: the stream is gone (deleted behind our back).
			// Configure it again rather than let XADD create it with the
			// server's defaults.
			b.unconfigured(job)
			if try == 0 {
				continue
			}
			return "", fmt.Errorf("%s vanished again while it was configured", b.runsKey(job))
		}
		return id, err
	}
}

// configureIDMP sets the job's stream's IDMP-DURATION and IDMP-MAXSIZE
// unless this process already did (see lua/idmp_setup.lua).
func (b *ClaimOnly) configureIDMP(ctx context.Context, job string) error {
	b.setupMu.Lock()
	j := b.setup[job]
	if j == nil {
		j = &idmpJob{}
		b.setup[job] = j
	}
	b.setupMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done {
		return nil
	}
	key := b.runsKey(job)
	v, err := idmpSetup.Run(ctx, b.c, []string{key}, b.idmpDur, b.idmpMax).Slice()
	if err != nil {
		return fmt.Errorf("configure the idempotency of %s: %w", key, err)
	}
	if len(v) != 3 {
		return fmt.Errorf("configure the idempotency of %s: unexpected script reply %v", key, v)
	}
	action, _ := v[0].(string)
	old, err := int64s(v[1:])
	if err != nil {
		return fmt.Errorf("configure the idempotency of %s: %w", key, err)
	}
	fields := []zap.Field{zap.String("stream", key), zap.Int64("idmp_duration_s", b.idmpDur),
		zap.Int64("idmp_maxsize", b.idmpMax), zap.Int64("old_idmp_duration_s", old[0]), zap.Int64("old_idmp_maxsize", old[1])}
	switch action {
	case "same":
	case "created":
		b.log.Debug("created the stream of claims with its idempotency settings", fields...)
	case "set":
		// XCFGSET cleared the remembered claims: only safe when no instance
		// with other settings is claiming this job.
		b.log.Warn("the stream's idempotency settings differed and were replaced (XCFGSET clears the remembered claims): every instance must use the same backend.redis.strategyOptions.durationSec", fields...)
	default:
		return fmt.Errorf("configure the idempotency of %s: unexpected script reply %v", key, v)
	}
	j.done = true
	return nil
}

// unconfigured forgets that the job's stream was configured.
func (b *ClaimOnly) unconfigured(job string) {
	b.setupMu.Lock()
	j := b.setup[job]
	b.setupMu.Unlock()
	if j != nil {
		j.mu.Lock()
		j.done = false
		j.mu.Unlock()
	}
}

// hasIDMP asks the server whether XADD takes IDMP: COMMAND DOCS XADD lists
// the IDMP token only on servers that have it; where COMMAND DOCS is not
// available, redis_version >= 8.6 decides. how names the evidence.
func hasIDMP(ctx context.Context, c redis.UniversalClient, version string, major, minor int, verOK bool) (has bool, how string, err error) {
	docs, derr := c.Do(ctx, "COMMAND", "DOCS", "XADD").Result()
	if derr == nil && hasToken(docs, "xadd") {
		return hasToken(docs, "IDMP"), "COMMAND DOCS XADD", nil
	}
	if verOK {
		return atLeast(major, minor, idmpMajor, idmpMinor), "redis_version " + version, nil
	}
	if derr == nil {
		derr = errors.New("no documentation of XADD")
	}
	return false, "", fmt.Errorf("COMMAND DOCS XADD: %w; and INFO server shows no redis_version", derr)
}

// hasToken reports whether the reply v holds the string want (case
// insensitive) as a whole value, at any depth.
func hasToken(v any, want string) bool {
	switch x := v.(type) {
	case string:
		return strings.EqualFold(x, want)
	case []any:
		for _, e := range x {
			if hasToken(e, want) {
				return true
			}
		}
	case map[any]any:
		for k, e := range x {
			if hasToken(k, want) || hasToken(e, want) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.EqualFold(k, want) || hasToken(e, want) {
				return true
			}
		}
	}
	return false
}
