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
	notes   []noteRecord
}

// run joins a run's claims and results: the claim names the owner (the one
// with a result, where a forgotten slot was claimed twice; else the
// newest); the owner's result (or, without one, the newest result) its end.
// A slot with neither is its note: the first recorded.
func (j *joinedRun) run(job string, slot int64) claim.Run {
	if len(j.claims) == 0 && len(j.results) == 0 {
		first := slices.MinFunc(j.notes, func(a, b noteRecord) int { return a.at.Compare(b.at) })
		return first.run(job)
	}
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

// ListRuns returns recent runs and notes, newest slot first (then by job),
// at most q.Limit (default 50) of those in q.Statuses (all when empty).
// For every job (q.Job, or every job in the index) it reads the newest n
// entries of :runs (claims and notes), 2n results and (stream-id) n notes
// of :notes in one pipeline, starting with n = q.Limit, and joins them per
// (job, slot); a claim with no result is running. A read that came back
// full may have left out runs older than the oldest slot it holds: only
// the runs above the highest such slot are selected, and where fewer than
// the limit were, it reads again with 4n.
func (b *ClaimOnly) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	limit := listLimit(q)
	jobs, err := listJobs(ctx, b.c, b.jobsKey(), q)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	for n := int64(limit); ; n *= 4 {
		found, d, err := b.readJoined(ctx, jobs, n)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out := make([]claim.Run, 0, len(found))
		for k, j := range found {
			if r := j.run(k.job, k.slot); k.slot >= d.bound && q.Wants(r.Status) {
				out = append(out, r)
			}
		}
		slices.SortFunc(out, func(a, b claim.Run) int {
			return cmp.Or(cmp.Compare(b.Slot, a.Slot), cmp.Compare(a.Job, b.Job))
		})
		if len(out) >= limit || !d.more {
			return out[:min(len(out), limit)], nil
		}
	}
}

// readDepth is how far the reads of a listing went: more when one came
// back full, and then bound, the highest of the oldest slots the full ones
// hold (below it, runs may be missing).
type readDepth struct {
	more  bool
	bound int64
}

// read notes a read of got entries, of which the oldest slot is oldest,
// capped at want.
func (d *readDepth) read(got int, want, oldest int64) {
	if int64(got) < want {
		return
	}
	if !d.more || oldest > d.bound {
		d.bound = oldest
	}
	d.more = true
}

// joinedReads are the reads of one job's streams by readJoined.
type joinedReads struct {
	claims, results *redis.XMessageSliceCmd
	notes           *redis.ZSliceCmd // stream-id
}

// readJoined reads, for every job, the newest n entries of :runs, 2n of
// :results and (stream-id) n of :notes, in one pipeline, and joins them
// per run.
func (b *ClaimOnly) readJoined(ctx context.Context, jobs []string, n int64) (map[runKey]*joinedRun, readDepth, error) {
	reads := make([]joinedReads, len(jobs))
	if _, err := b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, job := range jobs {
			reads[i].claims = p.XRevRangeN(ctx, b.runsKey(job), "+", "-", n)
			reads[i].results = p.XRevRangeN(ctx, b.resultsKey(job), "+", "-", 2*n)
			if b.strategy == StrategyStreamID {
				reads[i].notes = p.ZRevRangeByScoreWithScores(ctx, b.notesKey(job),
					&redis.ZRangeBy{Min: "-inf", Max: "+inf", Count: n})
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, readDepth{}, fmt.Errorf("read the streams: %w", err)
	}
	found := map[runKey]*joinedRun{}
	var d readDepth
	for i, job := range jobs {
		if err := b.joinJob(job, reads[i], n, found, &d); err != nil {
			return nil, readDepth{}, err
		}
	}
	return found, d, nil
}

// joinJob adds one job's reads to found, and their depth to d.
func (b *ClaimOnly) joinJob(job string, r joinedReads, n int64, found map[runKey]*joinedRun, d *readDepth) error {
	get := func(slot int64) *joinedRun {
		k := runKey{job, slot}
		if found[k] == nil {
			found[k] = &joinedRun{}
		}
		return found[k]
	}
	cs, err := r.claims.Result()
	if err != nil {
		return fmt.Errorf("read %s: %w", b.runsKey(job), err)
	}
	oldest := int64(maxMs)
	for _, m := range cs {
		if c, ok := parseClaim(m); ok && c.note != nil {
			j := get(c.slot)
			j.notes, oldest = append(j.notes, *c.note), min(oldest, c.slot)
		} else if ok {
			j := get(c.slot)
			j.claims, oldest = append(j.claims, c), min(oldest, c.slot)
		}
	}
	d.read(len(cs), n, oldest)
	rs, err := r.results.Result()
	if err != nil {
		return fmt.Errorf("read %s: %w", b.resultsKey(job), err)
	}
	oldest = maxMs
	for _, m := range rs {
		if res, ok := parseResult(m); ok {
			j := get(res.slot)
			j.results, oldest = append(j.results, res), min(oldest, res.slot)
		}
	}
	d.read(len(rs), 2*n, oldest)
	if r.notes == nil {
		return nil
	}
	ns, err := r.notes.Result()
	if err != nil {
		return fmt.Errorf("read %s: %w", b.notesKey(job), err)
	}
	oldest = maxMs
	for _, z := range ns {
		member, _ := z.Member.(string)
		note, err := parseNoteMember(member)
		if err != nil {
			return fmt.Errorf("%s: %w", b.notesKey(job), err)
		}
		j := get(note.slot)
		j.notes, oldest = append(j.notes, note), min(oldest, note.slot)
	}
	d.read(len(ns), n, oldest)
	return nil
}
