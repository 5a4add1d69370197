package redisclaim

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/store"
)

// The claim-only strategies (docs/spec.md#s3-2): stream-id, idmp and script, and
// auto, which picks idmp where the server has XADD IDMP and script
// elsewhere. Each decides the winner of a run once and keeps no lease: a run
// whose winner dies is not run again (at most once).
//
// Keys of a job, all in one cluster slot (hash tag {<ns>:<job>}):
//
//	{<ns>:<job>}:runs     stream  one entry per claimed run: slot, token,
//	                              instance, and (stream-id, idmp) at, the
//	                              instance's clock at the claim in ms; a
//	                              script entry's auto ID is the store time
//	                              of the claim. The claim is decided here.
//	                              Also one entry per note (Record): slot,
//	                              token (empty), note (the status), reason,
//	                              held_by, instance, and at (stream-id: store
//	                              time; script and idmp: the auto ID's), nonce
//	                              (idmp)
//	{<ns>:<job>}:notes    zset    stream-id only: the notes of slots that the
//	                              stream can no longer take (see # Notes),
//	                              JSON members scored by slot; the newest
//	                              HistoryMaxLen slots
//	{<ns>:<job>}:results  stream  one entry per finished run (Finish): job,
//	                              slot, attempt (1), instance, token, status,
//	                              exit_code ('' when interrupted),
//	                              started_at, finished_at (ms, the runner's
//	                              clock), output_tail; MAXLEN ~
//	                              HistoryMaxLen
//
// and the set <ns>:jobs of job names, shared with the lease strategy, for
// status over every job (written off the claim path: index.go).
// Results never go into :runs: with stream-id an entry with a later ID
// would block the next slot's claim.
//
// # stream-id
//
// Claim sends XADD {<ns>:<job>}:runs MAXLEN ~ HistoryMaxLen <slot>-0 slot
// <slot> token <t> instance <i> at <ms>. Redis accepts the first and
// rejects every later one ("The ID specified in XADD is equal or smaller
// than the target stream top item"); on that error the claim reads
// XRANGE <slot>-0 <slot>-0: the stored token is mine (my own re-sent
// claim) -> won; another token -> lost; no entry (a later slot was claimed
// first, or the entry was trimmed) -> lost. One command, no script.
//
// The check is against the stream's last generated ID, which survives
// trimming and XDEL: an emptied stream still rejects every older slot, so
// :runs is capped (MAXLEN ~) without forgetting anything a claim needs,
// and the strategy remembers a run forever. The key must never be deleted:
// DEL resets the last ID and every old slot could be won again (the tests
// show both).
//
// The price of one command: a slot whose first claim reaches Redis after a
// claim of a later slot of the job is lost by everyone, and nobody runs it
// (at most once, never twice). Each instance claims a job's slots in order,
// so this needs every instance's claim of the slot to fail or be late to
// arrive: a Redis outage or failover spanning two slots, after which a
// re-sent claim of the later slot lands first; or one instance catching up
// several slots at once (they are sent concurrently) while the others are
// down. It is logged as a warning ("slot skipped"). Where a skipped run
// matters, use lease (or script, idmp).
//
// # idmp (Redis 8.6 and later)
//
// Claim sends XADD {<ns>:<job>}:runs NOMKSTREAM IDMP <job> <slot> MAXLEN ~
// max(HistoryMaxLen, IDMPMaxSize) * slot <slot> token <t> instance <i> at
// <ms>: every instance uses the job as producer id, so Redis keeps the first
// entry for (job, slot) and answers every repeat with that entry's ID, with
// no error and no flag. The claim then reads that ID (XRANGE) and compares
// tokens: mine -> won, another -> lost, no entry -> lost.
//
// Redis remembers the idempotency key for IDMP-DURATION (Options.
// IDMPDuration, backend.redis.strategyOptions.durationSec) and keeps at
// most IDMP-MAXSIZE keys per producer (Options.IDMPMaxSize,
// MaxIDMPMaxSize = 10000, the server's maximum; validation refuses a
// job with more slots than that within durationSec). The first claim of a
// job in a process sets both with one script that creates the stream if it
// is missing (XCFGSET needs an existing stream), reads XINFO STREAM, and
// calls XCFGSET only when the values differ: XCFGSET clears the stream's
// idempotency maps, so a setting that is already right is never sent
// again. Every instance must therefore run with the same durationSec: two
// that disagree reset each other's maps whenever one starts (it is
// logged). The claim's XADD has NOMKSTREAM: a stream deleted behind the
// backend's back is configured again before the claim goes in, never
// recreated with the server's defaults (100 s, 100 keys). MAXLEN keeps at
// least IDMPMaxSize entries, so an entry that a remembered key points to is
// still there to read.
//
// Whether the server has IDMP is asked of the server at start (COMMAND DOCS
// XADD lists the IDMP token only where it exists; where COMMAND DOCS is
// missing, redis_version >= 8.6). Strategy idmp on a server without it fails
// at start, naming the server's version and pointing to script.
//
// # script
//
// One Lua script (lua/script_claim.lua) reads store time (TIME) and scans
// the stream's entries of the last Window, newest first, for one whose slot
// field is the slot: found -> it returns that entry's token; not found and
// store now - slot > maxLate -> late; otherwise it appends the caller's
// claim (auto ID) and returns the caller's token. The caller won iff the
// returned token is its own. The same script trims entries older than the
// window (XADD MINID ~). The scan costs one step per claim of the job
// within the window, newest first, so the losers of a slot find the winner
// at once; only the first claim of a slot scans the whole window. For a job
// with many slots per window (every second, for a day) prefer stream-id.
//
// # Late
//
// Every claim-only strategy checks late with the instance's clock
// (Request.Now) before it sends anything: now - slot > maxLate -> late, and
// nothing is written. The script strategy also checks with store time, in
// the script, for a slot nobody has claimed: it answers late if either
// clock says late. A slot someone claimed is never late: its claim decides
// (a re-sent claim of mine still wins).
//
// # Retention
//
// idmp remembers a claim for durationSec, script for windowMs. An instance
// that claims a slot after the store forgot it (its clock behind, or
// paused) wins it a second time; so the retention must exceed maxLate +
// the largest clock skew + the longest pause you expect, and configuration
// validation refuses a maxLate above half of durationSec or windowMs.
// stream-id keeps the last ID forever and has no such limit.
//
// # Results and status
//
// Finish appends the result to :results. It is not a lease fence: a
// claim-only run has one owner and no lease to lose. It checks only that
// f's token is the claim's winner, where the claim entry can be found:
// stream-id reads the entry <slot>-0; script looks for the slot's claim
// within the window (as the claim does); idmp reads the entry of a claim
// won through this backend. Another token's Finish is then
// claim.ErrFenced. Where the entry cannot be found (trimmed, forgotten
// after the window, or unknown to an idmp backend restarted since the
// claim) the result is recorded unchecked. A Finish re-sent after its
// answer was lost finds its own result among the newest and is not stored
// twice.
//
// ListRuns joins, per job, the newest claims of :runs with the newest
// results of :results per (job, slot), newest slot first. A claim with no
// result is a running run: on these strategies that also means a run whose
// winner died before recording its result (no lease expires). Runs whose
// claim entry is gone show from their result alone. A slot with neither,
// only a note, shows as its note. Claims are ordered by the time they were
// made: a slot claimed late may rank a little out of place at the edge of
// what one read covered (stream-id's are exact). With ListQuery.Statuses,
// the runs in other states are dropped before the limit, and the streams
// are read again, four times as deep, until the limit is reached or they
// hold no more: a selection of a rare state reads the whole of the capped
// streams.
//
// # Notes
//
// Record (claim.Recorder) writes the outcome of a slot no attempt ran (a
// note: skipped, missed or unknown) into :runs, with the claim's own
// primitive, so that a claim and a note of one slot are decided against
// each other like two claims: the first one stands, Record reports
// whether it was the note, and every later claim of a noted slot is lost
// (a note's token is nobody's). The claim path is unchanged: stream-id's
// XADD of a noted slot is refused and its read finds the note; script's
// scan finds it among the slot's entries (instances of the previous
// version too); idmp's XADD answers the note's ID, which its read finds.
//
//   - stream-id: one script (lua/claimonly_record.lua) sends XADD
//     <slot>-0. A slot that a later slot's claim or note overtook can
//     never be written there, nor won: where the stream never held its
//     entry (XINFO STREAM: nothing deleted, and nothing ever trimmed or
//     the slot newer than the oldest entry), the note goes to :notes,
//     once. Where the entry may have been trimmed, whether the slot was
//     claimed is unknown: nothing is written and Record reports false.
//   - script: one script looks for the slot within the window, as the
//     claim does, and appends the note if there is none.
//   - idmp: the claim's XADD IDMP <job> <slot>, with a fresh nonce: the
//     note was written iff the entry Redis answers carries it.
//
// Like a claim, a note is remembered for the strategy's retention (script,
// idmp): a slot older than that may have had a claim that the store
// forgot, and its note is then recorded beside the run; status shows the
// run.
//
// # Mixing strategies
//
// All instances of a namespace must use the same strategy. stream-id
// writes entry IDs that are slots, idmp and script IDs that are store
// times: on one stream they block or ignore each other, and two instances
// on different strategies can both win a run. Change the strategy with
// every instance stopped, or move to a new namespace.

// Lua scripts of the claim-only strategies.
var (
	//go:embed lua/claimonly_prelude.lua
	claimOnlyPreludeLua string
	//go:embed lua/script_claim.lua
	scriptClaimLua string
	//go:embed lua/idmp_setup.lua
	idmpSetupLua string
	//go:embed lua/claimonly_finish.lua
	claimOnlyFinishLua string
	//go:embed lua/claimonly_record.lua
	claimOnlyRecordLua string

	scriptClaim     = redis.NewScript(claimOnlyPreludeLua + scriptClaimLua)
	idmpSetup       = redis.NewScript(idmpSetupLua)
	claimOnlyFinish = redis.NewScript(claimOnlyPreludeLua + claimOnlyFinishLua)
	claimOnlyRecord = redis.NewScript(claimOnlyPreludeLua + claimOnlyRecordLua)
)

// Defaults of the claim-only Options.
const (
	DefaultIDMPDuration = time.Hour
	DefaultWindow       = time.Hour
	// MaxIDMPDuration is the largest IDMP-DURATION Redis accepts.
	MaxIDMPDuration = maxDurationSec * time.Second
	// MaxIDMPMaxSize is the largest IDMP-MAXSIZE Redis accepts.
	MaxIDMPMaxSize = 10000
)

// Server versions the claim-only strategies need.
const (
	// script: XREVRANGE with exclusive ranges, XADD MINID (6.2).
	scriptMajor, scriptMinor = 6, 2
	// idmp: XADD IDMP, XCFGSET (8.6).
	idmpMajor, idmpMinor = 8, 6
)

// ClaimOnly is a Redis claim-only backend (stream-id, idmp or script): a
// claim.Backend and claim.Recorder that is not a claim.Leaser. It is safe
// for concurrent use.
type ClaimOnly struct {
	link
	strategy string // stream-id, idmp or script (auto resolved)
	maxLen   int64
	window   time.Duration
	idmpDur  int64 // seconds
	idmpMax  int64

	// setup holds, per job, the idmp stream's configuration state.
	setupMu sync.Mutex
	setup   map[string]*idmpJob

	// claims remembers the claims won through this backend, for Finish:
	// the claim entry's ID, its token and instance.
	mu     sync.Mutex
	claims map[claimKey]claimEntry
}

var (
	_ claim.Backend  = (*ClaimOnly)(nil)
	_ claim.Recorder = (*ClaimOnly)(nil)
)

type claimKey struct {
	job  string
	slot int64
}

type claimEntry struct {
	id       string
	token    claim.Token
	instance string
}

// maxClaims bounds the claims map. Finish empties it as runs end; entries
// stay only for runs whose result was never recorded. Beyond the bound the
// oldest slots are dropped: on idmp their Finish is then recorded
// unchecked, and names the instance from the claim entry.
const maxClaims = 4096

// claimOnlyDefaults checks the claim-only options and fills in defaults.
func (o Options) claimOnlyDefaults() (Options, error) {
	o, err := o.withDefaults()
	if err != nil {
		return o, err
	}
	switch o.Strategy {
	case StrategyStreamID, StrategyIDMP, StrategyScript, StrategyAuto:
	case "", StrategyLease:
		return o, errors.New("strategy lease is not a claim-only strategy: use New")
	default:
		return o, fmt.Errorf("unknown strategy %q (want stream-id, idmp, script or auto)", o.Strategy)
	}
	switch {
	case o.IDMPDuration < 0:
		return o, fmt.Errorf("negative IDMP duration %v", o.IDMPDuration)
	case o.IDMPDuration == 0:
		o.IDMPDuration = DefaultIDMPDuration
	case o.IDMPDuration < time.Second || o.IDMPDuration > MaxIDMPDuration || o.IDMPDuration%time.Second != 0:
		return o, fmt.Errorf("IDMP duration %v: want whole seconds from 1s to %v", o.IDMPDuration, MaxIDMPDuration)
	}
	switch {
	case o.IDMPMaxSize == 0:
		o.IDMPMaxSize = MaxIDMPMaxSize
	case o.IDMPMaxSize < 1 || o.IDMPMaxSize > MaxIDMPMaxSize:
		return o, fmt.Errorf("IDMP max size %d: want 1 to %d", o.IDMPMaxSize, MaxIDMPMaxSize)
	}
	return o, defaultMs(&o.Window, DefaultWindow, "window")
}

// NewClaimOnly connects to Redis (o.Client, or a client made from o.URL)
// and returns the claim-only backend of o.Strategy: stream-id, idmp, script,
// or auto (idmp where the server has XADD IDMP, script elsewhere; the
// choice is logged and Strategy reports it). Strategy idmp on a server
// without IDMP is an error naming the server's version. Its errors never
// contain a password.
func NewClaimOnly(ctx context.Context, o Options) (*ClaimOnly, error) {
	o, err := o.claimOnlyDefaults()
	if err != nil {
		return nil, fmt.Errorf("redis %s strategy: %w", cmp.Or(o.Strategy, "claim-only"), err)
	}
	c, owned, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	effective, err := resolveStrategy(ctx, c, o.Strategy, o.Log)
	if err != nil {
		if owned {
			c.Close()
		}
		return nil, err
	}
	b := &ClaimOnly{
		link: newLink(c, owned, o), strategy: effective, maxLen: o.HistoryMaxLen,
		window: o.Window, idmpDur: int64(o.IDMPDuration / time.Second), idmpMax: o.IDMPMaxSize,
		setup: map[string]*idmpJob{}, claims: map[claimKey]claimEntry{},
	}
	if err := loadScripts(ctx, c, scriptClaim, idmpSetup, claimOnlyFinish, claimOnlyRecord); err != nil {
		b.Close()
		return nil, fmt.Errorf("redis %s strategy: %w", effective, err)
	}
	return b, nil
}

// CheckStrategy connects to the Redis of o (o.URL, o.PasswordFile, o.TLS;
// the other fields but Strategy are ignored) and checks that the server
// can run o.Strategy ("" is lease); it
// returns the strategy a backend would use (auto resolved to idmp or
// script) or the reason it cannot. It is what NewClaimOnly and New check at
// start, for anarchond validate: a PING, INFO server and, for idmp and
// auto, COMMAND DOCS XADD. Its errors never contain a password.
func CheckStrategy(ctx context.Context, o Options) (string, error) {
	strategy := o.Strategy
	o, err := Options{URL: o.URL, PasswordFile: o.PasswordFile, TLS: o.TLS}.withDefaults()
	if err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	switch strategy {
	case "", StrategyLease, StrategyStreamID, StrategyIDMP, StrategyScript, StrategyAuto:
	default:
		return "", fmt.Errorf("unknown redis strategy %q (want lease, stream-id, idmp, script or auto)", strategy)
	}
	c, _, err := connect(ctx, o)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if strategy == "" || strategy == StrategyLease {
		if v, major, _, ok := serverVersion(ctx, c); ok && major < 7 {
			return "", fmt.Errorf("redis lease strategy: needs Redis 7.0 or later (EVALSHA_RO), the server is %s", v)
		}
		return StrategyLease, nil
	}
	return resolveStrategy(ctx, c, strategy, zap.NewNop())
}

// resolveStrategy checks that the server behind c can run strategy and
// returns the effective strategy (auto resolved), logging auto's choice.
func resolveStrategy(ctx context.Context, c redis.UniversalClient, strategy string, log *zap.Logger) (string, error) {
	v, major, minor, verOK := serverVersion(ctx, c)
	shown := v
	if !verOK {
		shown = "of unknown version (INFO server unreadable)"
	}
	switch strategy {
	case StrategyStreamID:
		if verOK && major < 5 {
			return "", fmt.Errorf("redis strategy stream-id needs Redis 5.0 or later (streams); this server is %s", v)
		}
		return strategy, nil
	case StrategyScript:
		if verOK && !atLeast(major, minor, scriptMajor, scriptMinor) {
			return "", fmt.Errorf("redis strategy script needs Redis %d.%d or later (XADD MINID, exclusive XREVRANGE); this server is %s: use strategy \"stream-id\" or upgrade",
				scriptMajor, scriptMinor, v)
		}
		return strategy, nil
	}
	has, how, err := hasIDMP(ctx, c, v, major, minor, verOK)
	switch strategy {
	case StrategyIDMP:
		if err != nil {
			return "", fmt.Errorf("redis strategy idmp: cannot tell whether the server (%s) has XADD IDMP: %w", shown, err)
		}
		if !has {
			return "", fmt.Errorf("redis strategy idmp needs Redis %d.%d or later (XADD IDMP); this server is %s: use strategy \"script\"",
				idmpMajor, idmpMinor, shown)
		}
		return StrategyIDMP, nil
	case StrategyAuto:
		switch {
		case err != nil:
			log.Warn("redis strategy auto: using script (cannot tell whether the server has XADD IDMP)",
				zap.String("server", shown), zap.Error(err))
		case has:
			log.Info(fmt.Sprintf("redis strategy auto: using idmp (server %s has XADD IDMP)", shown), zap.String("detected_by", how))
			return StrategyIDMP, nil
		default:
			log.Info(fmt.Sprintf("redis strategy auto: using script (server %s has no XADD IDMP)", shown), zap.String("detected_by", how))
		}
		if verOK && !atLeast(major, minor, scriptMajor, scriptMinor) {
			return "", fmt.Errorf("redis strategy auto: the server %s has no XADD IDMP and script needs Redis %d.%d or later: use strategy \"stream-id\" or upgrade",
				v, scriptMajor, scriptMinor)
		}
		return StrategyScript, nil
	}
	return "", fmt.Errorf("unknown redis strategy %q", strategy)
}

// atLeast reports whether major.minor >= wantMajor.wantMinor.
func atLeast(major, minor, wantMajor, wantMinor int) bool {
	return major > wantMajor || major == wantMajor && minor >= wantMinor
}

// Namespace is the prefix of the backend's keys.
func (b *ClaimOnly) Namespace() string { return b.ns }

// Strategy is the strategy the backend runs: stream-id, idmp or script
// (never auto: auto's choice).
func (b *ClaimOnly) Strategy() string { return b.strategy }

// Close closes the client, unless it was given in Options.Client.
func (b *ClaimOnly) Close() error { return b.close() }

// runsKey and resultsKey are the job's streams, notesKey its stream-id
// notes (see the layout above).
func (b *ClaimOnly) runsKey(job string) string    { return "{" + b.ns + ":" + job + "}:runs" }
func (b *ClaimOnly) resultsKey(job string) string { return "{" + b.ns + ":" + job + "}:results" }
func (b *ClaimOnly) notesKey(job string) string   { return "{" + b.ns + ":" + job + "}:notes" }

// checkClaimOnly refuses requests a claim-only strategy cannot decide.
func checkClaimOnly(req claim.Request) error {
	if err := checkJob(req.Job); err != nil {
		return err
	}
	if req.Slot <= 0 || req.Slot >= maxMs {
		// Stream IDs start above 0-0: slot 0 cannot be a stream-id claim.
		return fmt.Errorf("slot %d is out of range", req.Slot)
	}
	return store.CheckClaimOnly(req)
}

// Claim decides req with the backend's strategy (see the doc above). Late
// by the instance's clock is answered without asking Redis. An error means
// no decision arrived; the claim may be re-sent with the same token. With
// waitReplicas, a win is answered once the replicas hold it.
func (b *ClaimOnly) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	if err := checkClaimOnly(req); err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	if req.Now.Sub(req.SlotTime()) > req.MaxLate {
		return claim.Result{Outcome: claim.Late}, nil
	}
	var res claim.Result
	var id string
	var err error
	switch b.strategy {
	case StrategyStreamID:
		res, id, err = b.claimStreamID(ctx, req)
	case StrategyIDMP:
		res, id, err = b.claimIDMP(ctx, req)
	default:
		res, id, err = b.claimScript(ctx, req)
	}
	if err == nil && res.Outcome == claim.Won {
		err = b.confirm(ctx, written{job: req.Job, key: b.runsKey(req.Job), kind: "stream", at: id, token: req.Token})
	}
	if err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	if res.Outcome == claim.Won {
		b.remember(req, id)
	}
	return res, nil
}

// withIndex runs write on the client and makes sure the job is in the
// index of jobs: the first write of a job in this process sends the SADD
// beside it and waits for it at most indexGrace; while SADDs fail, each
// later one sends another without waiting (index.go). The index never
// holds a claim up: it may live on a shard that is down. It returns write's
// command.
func (b *ClaimOnly) withIndex(ctx context.Context, job string, write func(c redis.Cmdable) redis.Cmder) redis.Cmder {
	wait := b.idx.touch(job)
	cmd := write(b.c)
	wait(ctx)
	return cmd
}

// evalScript runs script on the job's keys (withIndex) and returns its
// reply; on NOSCRIPT (after a restart or SCRIPT FLUSH) it is sent again
// with EVAL, as the lease claim is.
func (b *ClaimOnly) evalScript(ctx context.Context, job string, script *redis.Script, keys []string, args ...any) ([]any, error) {
	cmd := b.withIndex(ctx, job, func(p redis.Cmdable) redis.Cmder {
		return script.EvalSha(ctx, p, keys, args...)
	})
	reply := cmd.(*redis.Cmd)
	if redis.HasErrorPrefix(reply.Err(), "NOSCRIPT") {
		reply = script.Eval(ctx, b.c, keys, args...)
	}
	return reply.Slice()
}

// fields of a claim entry in :runs.
func claimFields(req claim.Request) []any {
	return []any{"slot", req.Slot, "token", string(req.Token), "instance", req.Instance, "at", req.Now.UnixMilli()}
}

// readClaim reads the claim entry id of :runs; ok is false when there is
// none.
func (b *ClaimOnly) readClaim(ctx context.Context, job, id string) (claimRecord, bool, error) {
	msgs, err := b.c.XRange(ctx, b.runsKey(job), id, id).Result()
	if err != nil {
		return claimRecord{}, false, fmt.Errorf("read the claim %s of %s: %w", id, b.runsKey(job), err)
	}
	if len(msgs) == 0 {
		return claimRecord{}, false, nil
	}
	rec, ok := parseClaim(msgs[0])
	return rec, ok, nil
}

// claimRecord is a claim entry of :runs, or a note entry (note set, no
// token).
type claimRecord struct {
	id       string
	slot     int64
	token    claim.Token
	instance string
	at       time.Time
	note     *noteRecord
}

// parseClaim reads a claim entry or a note entry; ok is false for an entry
// that is neither (no slot, or no token and no note).
func parseClaim(m redis.XMessage) (claimRecord, bool) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	if str("note") != "" {
		var at time.Time
		if ms, err := idMs(m.ID); err == nil {
			at = fromMs(ms)
		}
		n, ok := parseNoteFields(str, at)
		return claimRecord{id: m.ID, slot: n.slot, note: &n}, ok
	}
	slot, err := strconv.ParseInt(str("slot"), 10, 64)
	if err != nil || str("token") == "" {
		return claimRecord{}, false
	}
	r := claimRecord{id: m.ID, slot: slot, token: claim.Token(str("token")), instance: str("instance")}
	if at, err := strconv.ParseInt(str("at"), 10, 64); err == nil && at > 0 {
		r.at = fromMs(at)
	} else if ms, err := idMs(m.ID); err == nil {
		r.at = fromMs(ms)
	}
	return r, true
}

// idMs is the millisecond part of a stream entry ID.
func idMs(id string) (int64, error) {
	ms, _, _ := strings.Cut(id, "-")
	return strconv.ParseInt(ms, 10, 64)
}

// decideByToken is the answer of a claim whose stored entry is rec (ok:
// there is one): mine -> won, anyone else's, a note or none -> lost.
func (b *ClaimOnly) decideByToken(req claim.Request, rec claimRecord, ok bool, id string) claim.Result {
	switch {
	case ok && rec.slot == req.Slot && rec.token == req.Token:
		return claim.Result{Outcome: claim.Won, Attempt: 1}
	case !ok:
		b.log.Debug("claim lost: the run's claim entry is not in the stream",
			zap.String("strategy", b.strategy), zap.String("job", req.Job), zap.Int64("slot", req.Slot),
			zap.String("id", id), zap.String("token", req.Token.Short()))
	}
	return claim.Result{Outcome: claim.Lost}
}

// remember notes a won claim's entry and instance for Finish.
func (b *ClaimOnly) remember(req claim.Request, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	store.Forget(b.claims, maxClaims, func(k claimKey) int64 { return k.slot })
	b.claims[claimKey{req.Job, req.Slot}] = claimEntry{id: id, token: req.Token, instance: req.Instance}
}

// remembered returns what remember noted of the claim of f's run, whoever
// won it.
func (b *ClaimOnly) remembered(f claim.Fence) (claimEntry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.claims[claimKey{f.Job, f.Slot}]
	return e, ok
}

// forget drops the memory of f's claim, if f won it.
func (b *ClaimOnly) forget(f claim.Fence) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.claims[claimKey{f.Job, f.Slot}]; ok && e.token == f.Token {
		delete(b.claims, claimKey{f.Job, f.Slot})
	}
}
