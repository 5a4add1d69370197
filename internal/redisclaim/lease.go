package redisclaim

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// The lease strategy (docs/spec.md#s3-1-redis-lease, docs/spec.md#s4): the
// decision table of claim.Decide as one Lua script, and every later write
// (renew, finish, release) as a script fenced by token and status.
//
// Keys of a job, all in one cluster slot (hash tag {<ns>:<job>}):
//
//	{<ns>:<job>}:state    hash    <slot ms> -> the run, JSON: status, attempt,
//	                              instance, token, started_at, finished_at,
//	                              lease_until, exit_code, output_tail (times
//	                              in store ms); or the slot's note (Record):
//	                              status (skipped, missed, unknown), reason,
//	                              held_by, instance, finished_at
//	{<ns>:<job>}:slots    zset    <slot ms> scored by itself: the job's settled
//	                              runs (finished, interrupted) in slot order,
//	                              for status and Prune
//	{<ns>:<job>}:live     hash    <slot ms> -> lease_until, for every running
//	                              run: the overlap rule's question reads it,
//	                              and status and Prune find running runs in it
//	{<ns>:<job>}:notes    zset    <slot ms> scored by itself: the job's notes,
//	                              for status and Prune (created by the first
//	                              note)
//	{<ns>:<job>}:history  stream  claimed / takeover / interrupted / finished /
//	                              released / noted, with slot, attempt, token,
//	                              instance (status for finished and noted,
//	                              reason for noted); MAXLEN ~ HistoryMaxLen
//
// and one key outside them, the set <ns>:jobs of job names (for status and
// Prune over every job; written off the claim path, index.go, and never
// touched by a script).
//
// The live hash stands for the original design spec's "field naming the job's
// latest won slot" (docs/spec.md#departures): that field alone would miss an
// older run still holding a live lease (a takeover of an older slot, a long
// run overtaken by a newer claim), which sqlite's overlap query sees. The
// scripts keep it exact: a won claim or a renewal sets the slot's
// lease_until, a release sets it to now - 1ms, a finish or an interruption
// removes it, Prune removes pruned slots.
//
// Every run is in :live or :slots (every note in :notes): a run enters
// :slots when it settles (a finish or an interruption moves it from :live
// to :slots), not when it is claimed, so that a claim writes three keys and
// not four; ZADD into a small (listpack) sorted set walks the whole set and
// was the dearest write of a claim. Earlier versions indexed a run in
// :slots when they claimed it: their running runs are in both, which
// ListRuns and Prune allow for, and Prune indexes a run that an earlier
// version interrupted without indexing (lua/lease_prune.lua).
//
// A note (Record: a slot no attempt ran, skipped, missed or unknown) is
// written by one script into :state where the slot has nothing, so that
// the claim script finds it as it finds a finished run and answers done,
// with no read of its own: a claim costs nothing more. It is indexed in
// :notes rather than :slots, so that listing runs reads no notes and
// listing notes no runs. An earlier version beside this one answers done
// too (naming the instance that recorded the note as the run's holder),
// lists no notes, and its Prune repair indexes them in :slots, which
// ListRuns and Prune allow for.
//
// Store time is Redis TIME, read inside each script on the node that holds
// the job; no instance's clock enters a decision.

// Lua scripts of the lease strategy. redis.NewScript's Run (and RunRO) sends
// EVALSHA and falls back to EVAL on NOSCRIPT (after a restart or SCRIPT
// FLUSH); Claim does the same around its pipeline.
var (
	//go:embed lua/lease_prelude.lua
	leasePreludeLua string
	//go:embed lua/lease_claim.lua
	leaseClaimLua string
	//go:embed lua/lease_renew.lua
	leaseRenewLua string
	//go:embed lua/lease_finish.lua
	leaseFinishLua string
	//go:embed lua/lease_release.lua
	leaseReleaseLua string
	//go:embed lua/lease_read.lua
	leaseReadLua string
	//go:embed lua/lease_prune.lua
	leasePruneLua string
	//go:embed lua/lease_record.lua
	leaseRecordLua string

	leaseClaim   = redis.NewScript(leasePreludeLua + leaseClaimLua)
	leaseRenew   = redis.NewScript(leasePreludeLua + leaseRenewLua)
	leaseFinish  = redis.NewScript(leasePreludeLua + leaseFinishLua)
	leaseRelease = redis.NewScript(leasePreludeLua + leaseReleaseLua)
	leaseRead    = redis.NewScript(leasePreludeLua + leaseReadLua) // run read-only: EVALSHA_RO
	leasePrune   = redis.NewScript(leasePreludeLua + leasePruneLua)
	leaseRecord  = redis.NewScript(leasePreludeLua + leaseRecordLua)
)

const (
	// defaultListLimit is ListRuns's limit when the query sets none.
	defaultListLimit = 50
	// pruneBatch is how many old slots one prune script examines, so that
	// a large backlog never holds Redis for long.
	pruneBatch = 500
	// maxMs bounds the millisecond times the scripts store: Redis's cjson
	// writes numbers with 14 significant digits, exact below 1e14 ms (the
	// year 5138).
	maxMs = 100_000_000_000_000
	// maxLease bounds a lease, so that now + lease stays below maxMs.
	maxLease = 10 * 365 * 24 * time.Hour
)

// Backend is the Redis lease backend: a claim.Leaser, claim.Pruner and
// claim.Recorder. It is safe for concurrent use.
type Backend struct {
	link
	maxLen int64
}

var _ claim.LeaseStore = (*Backend)(nil)

// New connects to Redis (o.Client, or a client made from o.URL) and checks
// that it answers. Its errors never contain a password.
func New(ctx context.Context, o Options) (*Backend, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("redis lease backend: %w", err)
	}
	c, owned, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	b := &Backend{link: newLink(c, owned, o), maxLen: o.HistoryMaxLen}
	// EVALSHA_RO (the cheap read) needs Redis 7.0; XTRIM MINID 6.2.
	switch v, major, _, ok := serverVersion(ctx, c); {
	case !ok:
		o.Log.Warn("cannot read the redis server version (INFO server); the lease strategy needs Redis 7.0 or later")
	case major < 7:
		b.Close()
		return nil, fmt.Errorf("redis lease strategy: needs Redis 7.0 or later (EVALSHA_RO), the server is %s", v)
	}
	if err := loadScripts(ctx, c, leaseClaim, leaseRenew, leaseFinish, leaseRelease, leaseRead, leasePrune, leaseRecord); err != nil {
		b.Close()
		return nil, fmt.Errorf("redis lease strategy: %w", err)
	}
	return b, nil
}

// Namespace is the prefix of the backend's keys.
func (b *Backend) Namespace() string { return b.ns }

// Close closes the client, unless it was given in Options.Client.
func (b *Backend) Close() error { return b.close() }

// jobKeys are the keys of one job (see the layout above).
type jobKeys struct {
	state, slots, live, notes, history string
}

func (b *Backend) keys(job string) jobKeys {
	tag := "{" + b.ns + ":" + job + "}"
	return jobKeys{state: tag + ":state", slots: tag + ":slots", live: tag + ":live", notes: tag + ":notes",
		history: tag + ":history"}
}

// checkJob refuses job names that would break the keys' hash tag.
func checkJob(job string) error {
	switch {
	case job == "":
		return errors.New("empty job name")
	case strings.ContainsAny(job, "{}"):
		return fmt.Errorf("job name %q: must not contain { or }", job)
	}
	return nil
}

// checkRequest refuses requests the script cannot decide sensibly.
func checkRequest(req claim.Request) error {
	if err := checkJob(req.Job); err != nil {
		return err
	}
	switch {
	case req.Slot < 0 || req.Slot >= maxMs:
		return fmt.Errorf("slot %d is out of range", req.Slot)
	case req.Token == "":
		return errors.New("empty token")
	case req.Lease < time.Millisecond:
		return fmt.Errorf("lease %v is shorter than 1ms", req.Lease)
	case req.Lease > maxLease:
		return fmt.Errorf("lease %v is longer than %v", req.Lease, maxLease)
	case req.MaxLate < 0:
		return fmt.Errorf("negative maxLate %v", req.MaxLate)
	}
	return nil
}

// Claim makes the decision of docs/spec.md#s3-1 for req in one script, with
// store time: one EVALSHA, one round trip. The first claim of a job that has
// no state in the store yet is answered "index": it is sent again after an
// SADD of the job to the index of jobs, which it waits for at most
// indexGrace (the index may live on a shard that is down: index.go), so
// that, with that shard up, the index names the job before any run of it
// exists. On NOSCRIPT (after a restart or SCRIPT FLUSH) the claim is sent
// again with EVAL; EVALSHA answered NOSCRIPT without running anything.
// With waitReplicas, a win is answered once the replicas hold it.
func (b *Backend) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	res, err := b.claimAll(ctx, []claim.Request{req})
	if err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	return res[0], nil
}

// ClaimBatch decides reqs with one pipeline of claim scripts: one round
// trip on a single server (go-redis splits a pipeline by node on a
// cluster). Each script is one claim, atomic on its own, as Claim sends it.
func (b *Backend) ClaimBatch(ctx context.Context, reqs []claim.Request) ([]claim.Result, error) {
	res, err := b.claimAll(ctx, reqs)
	if err != nil {
		return nil, fmt.Errorf("claim a batch of %d: %w", len(reqs), err)
	}
	return res, nil
}

// claimAll sends the claim script of each request, in order, and re-sends
// in a second pipeline those answered NOSCRIPT (with EVAL) or "index"
// (after the SADD of their jobs to the index, which they wait for at most
// indexGrace: index.go). With waitReplicas, every win is confirmed on its
// master's replicas (link.confirm) before it is answered.
func (b *Backend) claimAll(ctx context.Context, reqs []claim.Request) ([]claim.Result, error) {
	for _, req := range reqs {
		if err := checkRequest(req); err != nil {
			if len(reqs) > 1 {
				err = fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
			}
			return nil, err
		}
	}
	var waits []func(context.Context)
	for _, req := range reqs {
		waits = append(waits, b.idx.touch(req.Job))
	}
	cmds, err := b.sendClaims(ctx, reqs)
	for _, w := range waits {
		w(ctx)
	}
	if err != nil {
		return nil, err
	}
	out := make([]claim.Result, len(reqs))
	for i, c := range cmds {
		req := reqs[i]
		v, err := c.Slice()
		if err == nil {
			var event string
			out[i], event, err = parseClaimReply(v)
			if err == nil && event != "" && event != string(claim.EventClaimed) {
				b.log.Debug("claim decision", zap.String("event", event),
					zap.String("job", req.Job), zap.Int64("slot", req.Slot), zap.Int("attempt", out[i].Attempt),
					zap.String("instance", req.Instance), zap.String("token", req.Token.Short()))
			}
		}
		if err == nil && out[i].Outcome == claim.Won {
			err = b.confirm(ctx, written{job: req.Job, key: b.keys(req.Job).state, kind: "hash",
				at: strconv.FormatInt(req.Slot, 10), token: req.Token})
		}
		if err != nil {
			if len(reqs) > 1 {
				err = fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
			}
			return nil, err
		}
	}
	return out, nil
}

// overlapArg is the claim script's overlap argument: "skip" for every
// policy that keeps a job's runs apart (skip, replace, queue: the store
// decides them alike, docs/spec.md#s3-1), "allow" otherwise.
func overlapArg(p claim.OverlapPolicy) string {
	if p.Exclusive() {
		return string(claim.OverlapSkip)
	}
	return string(claim.OverlapAllow)
}

// sendClaims sends the claim script of each request: one EVALSHA, or one
// pipeline of them; then, in a second pipeline, EVAL of those answered
// NOSCRIPT or "index", once their jobs' SADDs to the index of jobs
// (sent at once) ended or indexGrace passed.
func (b *Backend) sendClaims(ctx context.Context, reqs []claim.Request) ([]*redis.Cmd, error) {
	keys := make([][]string, len(reqs))
	args := make([][]any, len(reqs))
	for i, req := range reqs {
		k := b.keys(req.Job)
		keys[i] = []string{k.state, k.slots, k.live, k.history}
		args[i] = []any{req.Slot, string(req.Token), req.Instance, req.MaxLate.Milliseconds(), req.Lease.Milliseconds(),
			req.MaxAttempts, overlapArg(req.Overlap), b.maxLen, ""}
	}
	cmds := make([]*redis.Cmd, len(reqs))
	if len(reqs) == 1 {
		cmds[0] = leaseClaim.EvalSha(ctx, b.c, keys[0], args[0]...)
	} else {
		_, err := b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range reqs {
				cmds[i] = leaseClaim.EvalSha(ctx, p, keys[i], args[i]...)
			}
			return nil
		})
		if err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return nil, err
		}
	}
	var again []int // answered NOSCRIPT or "index"
	waits := map[string]func(context.Context){}
	for i, c := range cmds {
		if v, err := c.Slice(); redis.HasErrorPrefix(err, "NOSCRIPT") || (err == nil && len(v) > 0 && v[0] == "index") {
			// Sent again after the SADD of its job: a NOSCRIPT answer says
			// nothing about the index, and an SADD too many is harmless.
			again = append(again, i)
			if waits[reqs[i].Job] == nil {
				waits[reqs[i].Job] = b.idx.force(reqs[i].Job)
			}
			args[i][len(args[i])-1] = "1"
		}
	}
	if len(again) == 0 {
		return cmds, nil
	}
	for _, w := range waits {
		w(ctx)
	}
	// The scripts are sent whole (EVAL): a NOSCRIPT means the server lost
	// its script cache, and both paths are rare.
	_, err := b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range again {
			cmds[i] = leaseClaim.Eval(ctx, p, keys[i], args[i]...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cmds, nil
}

// parseClaimReply reads {outcome, attempt, now_ms, lease_until_ms, event,
// holder}.
func parseClaimReply(v []any) (claim.Result, string, error) {
	if len(v) != 6 {
		return claim.Result{}, "", fmt.Errorf("unexpected script reply %v", v)
	}
	outcome, _ := v[0].(string)
	event, _ := v[4].(string)
	holder, _ := v[5].(string)
	nums, err := int64s(v[1:4])
	if err != nil {
		return claim.Result{}, "", err
	}
	res := claim.Result{Outcome: claim.Outcome(outcome), Attempt: int(nums[0]), StoreNow: fromMs(nums[1]), Holder: holder}
	if nums[2] != 0 {
		res.LeaseUntil = fromMs(nums[2])
	}
	switch res.Outcome {
	case claim.Won, claim.Running, claim.Done, claim.Late, claim.Overlap:
	default:
		return claim.Result{}, "", fmt.Errorf("unexpected outcome %q from the claim script", outcome)
	}
	return res, event, nil
}

// int64s reads the integers of a script reply.
func int64s(v []any) ([]int64, error) {
	out := make([]int64, len(v))
	for i, x := range v {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("unexpected script reply: %v is not an integer", x)
		}
		out[i] = n
	}
	return out, nil
}

// fencedReply reads the {'ok', ...} or {'fenced'} reply of a fenced write.
func fencedReply(v []any) ([]any, error) {
	if len(v) == 0 {
		return nil, errors.New("empty script reply")
	}
	switch v[0] {
	case "ok":
		return v[1:], nil
	case "fenced":
		return nil, claim.ErrFenced
	}
	return nil, fmt.Errorf("unexpected script reply %v", v)
}

// Renew extends f's lease to store now + lease, only while f's token owns
// the run and it is running; otherwise claim.ErrFenced (claim.ErrRunLost
// when Redis no longer holds f's claim: restarted without persistence, or
// a replica promoted before it had the claim).
func (b *Backend) Renew(ctx context.Context, f claim.Fence, lease time.Duration) (claim.Result, error) {
	if err := checkJob(f.Job); err != nil {
		return claim.Result{}, fmt.Errorf("renew %s: %w", f, err)
	}
	if lease < time.Millisecond || lease > maxLease {
		return claim.Result{}, fmt.Errorf("renew %s: lease %v is not between 1ms and %v", f, lease, maxLease)
	}
	k := b.keys(f.Job)
	v, err := leaseRenew.Run(ctx, b.c, []string{k.state, k.live}, f.Slot, string(f.Token), lease.Milliseconds()).Slice()
	if err == nil {
		v, err = fencedReply(v)
	}
	if errors.Is(err, claim.ErrFenced) {
		err = claim.Fenced(ctx, b.Read, f)
	}
	if err != nil {
		return claim.Result{}, fmt.Errorf("renew %s: %w", f, err)
	}
	nums, err := int64s(v)
	if err != nil || len(nums) != 3 {
		return claim.Result{}, fmt.Errorf("renew %s: unexpected script reply %v", f, v)
	}
	return claim.Result{Outcome: claim.Won, Attempt: int(nums[0]), StoreNow: fromMs(nums[1]), LeaseUntil: fromMs(nums[2])}, nil
}

// Finish records the result of f's attempt with store-time finished_at,
// only while f's token owns the run and it is running; otherwise
// claim.ErrFenced. A Finish re-sent after its answer was lost (same token,
// same result already stored) succeeds without writing. fin.StartedAt and
// fin.FinishedAt are not used: the run keeps the store's stamps. With
// waitReplicas, it returns once the replicas hold the result.
func (b *Backend) Finish(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	if err := checkJob(f.Job); err != nil {
		return fmt.Errorf("finish %s: %w", f, err)
	}
	if !fin.Status.Final() {
		return fmt.Errorf("finish %s: status %q is not a final status", f, fin.Status)
	}
	exit := strconv.Itoa(fin.ExitCode)
	if fin.Status == claim.StatusInterrupted {
		exit = "" // nil: an interrupted run has no exit code
	}
	k := b.keys(f.Job)
	v, err := leaseFinish.Run(ctx, b.c, []string{k.state, k.slots, k.live, k.history},
		f.Slot, string(f.Token), string(fin.Status), exit, fin.OutputTail, b.maxLen).Slice()
	if err == nil {
		_, err = fencedReply(v)
	}
	if err == nil {
		// A result a failover lost would leave the run running, to be
		// taken over and run again when its lease ends.
		err = b.confirm(ctx, written{job: f.Job, key: k.state, kind: "hash",
			at: strconv.FormatInt(f.Slot, 10), token: f.Token, settled: true})
	}
	if errors.Is(err, claim.ErrFenced) {
		err = claim.Fenced(ctx, b.Read, f)
	}
	if err != nil {
		return fmt.Errorf("finish %s: %w", f, err)
	}
	return nil
}

// Release ends f's lease now (lease_until = store now - 1ms), so that a
// backup's claim takes over at once (attempt+1); claim.ErrFenced when f no
// longer owns a running run.
func (b *Backend) Release(ctx context.Context, f claim.Fence) error {
	if err := checkJob(f.Job); err != nil {
		return fmt.Errorf("release %s: %w", f, err)
	}
	k := b.keys(f.Job)
	v, err := leaseRelease.Run(ctx, b.c, []string{k.state, k.live, k.history}, f.Slot, string(f.Token), b.maxLen).Slice()
	if err == nil {
		_, err = fencedReply(v)
	}
	if errors.Is(err, claim.ErrFenced) {
		err = claim.Fenced(ctx, b.Read, f)
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", f, err)
	}
	return nil
}

// Read is the cheap read of a run: one read-only script (EVALSHA_RO) that
// reads TIME and the run, and writes nothing. It returns store now also
// with claim.ErrNotFound.
func (b *Backend) Read(ctx context.Context, job string, slot int64) (claim.Run, time.Time, error) {
	if err := checkJob(job); err != nil {
		return claim.Run{}, time.Time{}, fmt.Errorf("read %s@%d: %w", job, slot, err)
	}
	v, err := leaseRead.RunRO(ctx, b.c, []string{b.keys(job).state}, slot).Slice()
	if err != nil {
		return claim.Run{}, time.Time{}, fmt.Errorf("read %s@%d: %w", job, slot, err)
	}
	if len(v) != 2 {
		return claim.Run{}, time.Time{}, fmt.Errorf("read %s@%d: unexpected script reply %v", job, slot, v)
	}
	nowMs, ok := v[0].(int64)
	if !ok {
		return claim.Run{}, time.Time{}, fmt.Errorf("read %s@%d: unexpected script reply %v", job, slot, v)
	}
	now := fromMs(nowMs)
	raw, _ := v[1].(string)
	if v[1] == nil {
		return claim.Run{}, now, fmt.Errorf("read %s@%d: %w", job, slot, claim.ErrNotFound)
	}
	run, err := decodeRun(job, slot, raw)
	if err != nil {
		return claim.Run{}, time.Time{}, fmt.Errorf("read %s@%d: %w", job, slot, err)
	}
	return run, now, nil
}

// storedRun is a run as the scripts store it (JSON written by Redis's
// cjson); times are store milliseconds, absent fields zero.
type storedRun struct {
	Status     string `json:"status"`
	Attempt    int    `json:"attempt"`
	Instance   string `json:"instance"`
	Token      string `json:"token"`
	StartedAt  int64  `json:"started_at"`
	FinishedAt int64  `json:"finished_at"`
	LeaseUntil int64  `json:"lease_until"`
	ExitCode   *int   `json:"exit_code"`
	OutputTail string `json:"output_tail"`
	// A note's (Record).
	Reason string `json:"reason"`
	HeldBy int64  `json:"held_by"`
}

// decodeRun decodes the state of (job, slot).
func decodeRun(job string, slot int64, raw string) (claim.Run, error) {
	var s storedRun
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return claim.Run{}, fmt.Errorf("decode the stored run: %w", err)
	}
	r := claim.Run{
		Job: job, Slot: slot, Status: claim.Status(s.Status), Attempt: s.Attempt,
		Instance: s.Instance, Token: claim.Token(s.Token), ExitCode: s.ExitCode, OutputTail: s.OutputTail,
		Reason: s.Reason, HeldBy: s.HeldBy,
	}
	// A note has no start and no lease: its times stay zero.
	r.StartedAt, r.FinishedAt, r.LeaseUntil = msOrZero(s.StartedAt), msOrZero(s.FinishedAt), msOrZero(s.LeaseUntil)
	return r, nil
}

// Prune deletes, for every job in the index, the runs whose slot is older
// than store now - olderThan and that are finished or whose lease ended
// before that cutoff, and the notes whose slot is older than the cutoff; a
// run with a live lease is never deleted. It also trims the job's history
// events older than the cutoff, forgets a job left with no keys, and
// indexes the runs an earlier version settled without indexing them (see
// the layout above). olderThan must exceed every
// job's maxLate: a pruned slot that is not yet late would be won again.
func (b *Backend) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("prune: negative age %v", olderThan)
	}
	jobs, err := b.c.SMembers(ctx, b.jobsKey()).Result()
	if err != nil {
		return 0, fmt.Errorf("prune: read %s: %w", b.jobsKey(), err)
	}
	slices.Sort(jobs)
	var total int64
	for _, job := range jobs {
		n, err := b.pruneJob(ctx, job, olderThan)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune %s: %w", job, err)
		}
	}
	if total > 0 {
		b.log.Debug("pruned runs", zap.Int64("runs", total), zap.Duration("older_than", olderThan))
	}
	return total, nil
}

// pruneJob prunes one job in batches of pruneBatch slots: its settled
// runs (:slots), then its notes (:notes), whose last batch also looks at
// the running runs and forgets a job left with nothing.
func (b *Backend) pruneJob(ctx context.Context, job string, olderThan time.Duration) (int64, error) {
	if checkJob(job) != nil {
		return 0, nil //nolint:nilerr // not a name this backend wrote: nothing of it to prune
	}
	k := b.keys(job)
	var deleted int64
	for _, index := range []string{"slots", "notes"} {
		n, empty, err := b.pruneIndex(ctx, job, k, index, olderThan)
		deleted += n
		if err != nil {
			return deleted, err
		}
		if empty {
			return deleted, b.forgetJob(ctx, job, k)
		}
	}
	return deleted, nil
}

// pruneIndex runs the prune script over one index of the job (slots or
// notes) until a batch comes back short; empty reports a job left with no
// keys.
func (b *Backend) pruneIndex(ctx context.Context, job string, k jobKeys, index string, olderThan time.Duration) (deleted int64, empty bool, err error) {
	keys := []string{k.state, k.slots, k.live, k.history, k.notes}
	after := "-inf"
	for {
		v, err := leasePrune.Run(ctx, b.c, keys, olderThan.Milliseconds(), after, pruneBatch, index).Slice()
		if err != nil {
			return deleted, false, err
		}
		if len(v) != 5 {
			return deleted, false, fmt.Errorf("unexpected script reply %v", v)
		}
		last, _ := v[2].(string)
		nums, err := int64s([]any{v[0], v[1], v[3], v[4]})
		if err != nil {
			return deleted, false, err
		}
		deleted += nums[0]
		if nums[3] > 0 {
			b.log.Info("indexed runs an earlier version settled without indexing them",
				zap.String("job", job), zap.Int64("runs", nums[3]))
		}
		if nums[1] < pruneBatch {
			return deleted, nums[2] == 1, nil
		}
		after = "(" + last
	}
}

// forgetJob removes a job with no keys left from the index. A claim that
// creates the job's state again meanwhile is not lost: its script wrote the
// state before its SADD, so either that SADD comes after this SREM, or the
// state is there when this checks again.
func (b *Backend) forgetJob(ctx context.Context, job string, k jobKeys) error {
	if err := b.c.SRem(ctx, b.jobsKey(), job).Err(); err != nil {
		return fmt.Errorf("remove from %s: %w", b.jobsKey(), err)
	}
	b.idx.forget(job)
	n, err := b.c.Exists(ctx, k.state).Result()
	if err != nil {
		return fmt.Errorf("check %s: %w", k.state, err)
	}
	if n > 0 {
		if err := b.c.SAdd(ctx, b.jobsKey(), job).Err(); err != nil {
			return fmt.Errorf("restore in %s: %w", b.jobsKey(), err)
		}
	}
	return nil
}

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

// msOrZero is fromMs(v), or the zero time for 0 (a time not stored).
func msOrZero(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return fromMs(v)
}
