package config

import (
	"time"

	"github.com/anarchon/anarchon/internal/store"
)

// Retries (docs/spec.md#s6-retry): retry.attempts, retry.backoffMs and
// retry.maxBackoffMs, per job or in defaults.

// MaxRetryAttempts bounds retry.attempts: retries beyond it would hide a job
// that never succeeds behind hours of backoff.
const MaxRetryAttempts = 10

// Built-in retry settings: no retry; when retries are set, a first backoff
// of a second, doubling up to a minute.
const (
	defaultRetryAttempts     = 0
	defaultRetryBackoffMs    = 1000
	defaultRetryMaxBackoffMs = 60000
	// maxRetryBackoffMs bounds both backoffs: a day.
	maxRetryBackoffMs = 24 * 3600 * 1000
)

// Retry is a job's retry policy: a run that ends failed or timeout is run
// again, up to Attempts more times, after Backoff, doubled each time up to
// MaxBackoff, with jitter.
type Retry struct {
	Attempts   int
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// retryPolicy is the part of policy that retry sets.
type retryPolicy struct {
	attempts   setting[int64]
	backoff    setting[int64]
	maxBackoff setting[int64]
}

func builtinRetry() retryPolicy {
	return retryPolicy{
		attempts:   def[int64](defaultRetryAttempts),
		backoff:    def[int64](defaultRetryBackoffMs),
		maxBackoff: def[int64](defaultRetryMaxBackoffMs),
	}
}

// resolveRetry applies the retry keys of vals (prefix: "defaults." or "")
// over base.
func (p *parser) resolveRetry(vals map[string]*value, prefix string, base retryPolicy) retryPolicy {
	return retryPolicy{
		attempts:   get(p, vals, prefix+"retry.attempts", base.attempts, p.asInt, store.IntRange(0, MaxRetryAttempts)),
		backoff:    get(p, vals, prefix+"retry.backoffMs", base.backoff, p.asInt, store.IntRange(1, maxRetryBackoffMs)),
		maxBackoff: get(p, vals, prefix+"retry.maxBackoffMs", base.maxBackoff, p.asInt, store.IntRange(1, maxRetryBackoffMs)),
	}
}

// retryOf checks the policy and returns the job's Retry.
func (p *parser) retryOf(r retryPolicy, inJob bool) Retry {
	if r.maxBackoff.val < r.backoff.val && (!inJob || r.maxBackoff.jobLevel() || r.backoff.jobLevel()) {
		at := r.maxBackoff.at
		if at == nil || (inJob && !r.maxBackoff.jobLevel()) {
			at = r.backoff.at
		}
		p.errorf(at, "retry.maxBackoffMs %d is less than retry.backoffMs %d: the backoff doubles from backoffMs up to maxBackoffMs; raise maxBackoffMs or lower backoffMs",
			r.maxBackoff.val, r.backoff.val)
	}
	return Retry{
		Attempts:   int(r.attempts.val),
		Backoff:    time.Duration(r.backoff.val) * time.Millisecond,
		MaxBackoff: time.Duration(max(r.maxBackoff.val, r.backoff.val)) * time.Millisecond,
	}
}

// checkRetry refuses retry.attempts on a store that keeps no control
// records (store.Driver.NoControl): a retry is a trigger written there.
// Reported once where it is set (a job, or defaults).
func (p *parser) checkRetry(typ string, infos []jobInfo) {
	d, ok := store.Lookup(typ)
	if !ok || d.NoControl == "" {
		return
	}
	seen := map[*value]bool{}
	for _, in := range infos {
		a := in.pol.retry.attempts
		if a.val == 0 || a.at == nil || seen[a.at] {
			continue
		}
		seen[a.at] = true
		p.errorf(a.at, "retry cannot be used on backend %s: a retry is a run asked for through the job's control record in the store, and %s; remove retry, or use a backend that keeps control records (docs/backends.md)", typ, d.NoControl)
	}
}
