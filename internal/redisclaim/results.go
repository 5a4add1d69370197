package redisclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// Results and status of the claim-only strategies (see claimonly.go).

// Finish appends the result of f's run to the job's results stream. It
// refuses (claim.ErrFenced) a token that is not the claim's winner where the
// claim entry can be found: on stream-id by its ID (the slot), on script
// within the window, on idmp for a claim won through this backend. Where
// it cannot (trimmed, forgotten, or unknown after a restart), the result is
// recorded unchecked. fin's times are the runner's clock. A Finish re-sent
// after its answer was lost is stored once.
func (b *ClaimOnly) Finish(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	switch err := checkJob(f.Job); {
	case err != nil:
		return fmt.Errorf("finish %s: %w", f, err)
	case f.Token == "":
		return fmt.Errorf("finish %s: empty token", f)
	case !fin.Status.Final():
		return fmt.Errorf("finish %s: status %q is not a final status", f, fin.Status)
	}
	e, _ := b.remembered(f)
	id, instance := e.id, ""
	if e.token == f.Token {
		instance = e.instance
	}
	var window int64
	switch b.strategy {
	case StrategyStreamID:
		id = streamID(f.Slot)
	case StrategyScript:
		window = b.window.Milliseconds()
	}
	exit := strconv.Itoa(fin.ExitCode)
	if fin.Status == claim.StatusInterrupted {
		exit = "" // nil: an interrupted run has no exit code
	}
	v, err := claimOnlyFinish.Run(ctx, b.c, []string{b.runsKey(f.Job), b.resultsKey(f.Job)},
		f.Slot, string(f.Token), id, instance, string(fin.Status), exit,
		unixMs(fin.StartedAt), unixMs(fin.FinishedAt), fin.OutputTail, b.maxLen, f.Job, window).Slice()
	if err == nil {
		v, err = fencedReply(v)
	}
	if err != nil {
		return fmt.Errorf("finish %s: %w", f, err)
	}
	if how, _ := firstString(v); how == "unchecked" {
		b.log.Debug("result recorded without checking the claim's winner (claim entry unknown or gone)",
			zap.String("job", f.Job), zap.Int64("slot", f.Slot), zap.String("token", f.Token.Short()))
	}
	b.forget(f)
	return nil
}

// unixMs is t in ms since the epoch, 0 for the zero time.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func firstString(v []any) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	s, ok := v[0].(string)
	return s, ok
}

// resultRecord is a result entry of :results.
type resultRecord struct {
	slot       int64
	instance   string
	token      claim.Token
	status     claim.Status
	exitCode   *int
	startedAt  time.Time
	finishedAt time.Time
	outputTail string
}

// parseResult reads a result entry; ok is false for anything else.
func parseResult(m redis.XMessage) (resultRecord, bool) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	slot, err := strconv.ParseInt(str("slot"), 10, 64)
	status := claim.Status(str("status"))
	if err != nil || str("token") == "" || !status.Final() {
		return resultRecord{}, false
	}
	r := resultRecord{slot: slot, instance: str("instance"), token: claim.Token(str("token")), status: status,
		outputTail: str("output_tail")}
	if code, err := strconv.Atoi(str("exit_code")); err == nil {
		r.exitCode = &code
	}
	msTime := func(k string) time.Time {
		if ms, err := strconv.ParseInt(str(k), 10, 64); err == nil && ms > 0 {
			return fromMs(ms)
		}
		return time.Time{}
	}
	r.startedAt, r.finishedAt = msTime("started_at"), msTime("finished_at")
	return r, true
}

// joinedRun is what the streams hold of one run, newest first.
type joinedRun struct {
	claims  []claimRecord
	results []resultRecord
}

// run joins a run's claims and results: the claim names the owner (the one
// with a result, where a forgotten slot was claimed twice; else the
// newest); the owner's result (or, without one, the newest result) its end.
func (j *joinedRun) run(job string, slot int64) claim.Run {
	r := claim.Run{Job: job, Slot: slot, Status: claim.StatusRunning, Attempt: 1}
	var c *claimRecord
	var res *resultRecord
	for i := range j.claims {
		for k := range j.results {
			if j.results[k].token == j.claims[i].token {
				c, res = &j.claims[i], &j.results[k]
				break
			}
		}
		if c != nil {
			break
		}
	}
	if c == nil && len(j.claims) > 0 {
		c = &j.claims[0]
	}
	if res == nil && len(j.results) > 0 {
		res = &j.results[0] // a result whose claim the stream no longer holds
	}
	if c != nil {
		r.Instance, r.Token, r.StartedAt = c.instance, c.token, claim.StartOf(c.at, slot)
	}
	if res == nil {
		return r
	}
	if res.instance != "" || r.Token != res.token {
		r.Instance = res.instance
	}
	r.Token, r.Status = res.token, res.status
	if !res.startedAt.IsZero() {
		r.StartedAt = res.startedAt
	}
	r.FinishedAt, r.ExitCode, r.OutputTail = res.finishedAt, res.exitCode, res.outputTail
	return r
}

// ListRuns returns recent runs, newest slot first (then by job), at most
// q.Limit (default 50). For every job (q.Job, or every job in the index) it
// reads the newest q.Limit claims and 2*q.Limit results in one pipeline and
// joins them per (job, slot); a claim with no result is running.
func (b *ClaimOnly) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	jobs := []string{q.Job}
	if q.Job == "" {
		var err error
		if jobs, err = b.c.SMembers(ctx, b.jobsKey()).Result(); err != nil {
			return nil, fmt.Errorf("list runs: read %s: %w", b.jobsKey(), err)
		}
		jobs = slices.DeleteFunc(jobs, func(j string) bool { return checkJob(j) != nil })
	} else if err := checkJob(q.Job); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	claims := make([]*redis.XMessageSliceCmd, len(jobs))
	results := make([]*redis.XMessageSliceCmd, len(jobs))
	if _, err := b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, job := range jobs {
			claims[i] = p.XRevRangeN(ctx, b.runsKey(job), "+", "-", int64(limit))
			results[i] = p.XRevRangeN(ctx, b.resultsKey(job), "+", "-", 2*int64(limit))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("list runs: read the streams: %w", err)
	}
	type runKey struct {
		job  string
		slot int64
	}
	found := map[runKey]*joinedRun{}
	get := func(k runKey) *joinedRun {
		j := found[k]
		if j == nil {
			j = &joinedRun{}
			found[k] = j
		}
		return j
	}
	for i, job := range jobs {
		cs, err := claims[i].Result()
		if err != nil {
			return nil, fmt.Errorf("list runs: read %s: %w", b.runsKey(job), err)
		}
		for _, m := range cs {
			if c, ok := parseClaim(m); ok {
				j := get(runKey{job, c.slot})
				j.claims = append(j.claims, c)
			}
		}
		rs, err := results[i].Result()
		if err != nil {
			return nil, fmt.Errorf("list runs: read %s: %w", b.resultsKey(job), err)
		}
		for _, m := range rs {
			if r, ok := parseResult(m); ok {
				j := get(runKey{job, r.slot})
				j.results = append(j.results, r)
			}
		}
	}
	out := make([]claim.Run, 0, len(found))
	for k, j := range found {
		out = append(out, j.run(k.job, k.slot))
	}
	slices.SortFunc(out, func(a, b claim.Run) int {
		return cmp.Or(cmp.Compare(b.Slot, a.Slot), cmp.Compare(a.Job, b.Job))
	})
	return out[:min(len(out), limit)], nil
}
