package config

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/anarchon/anarchon/internal/schedule"
	"github.com/anarchon/anarchon/internal/store"
)

// Built-in defaults (docs/spec.md#s6-config).
const (
	defaultNamespace       = "cron"
	defaultShutdownGraceMs = 30000
	defaultLogLevel        = "info"
	defaultMetricsListen   = "127.0.0.1:9464"
	defaultLogFormat       = "auto"
	defaultBackendType     = "sqlite"
	defaultRetention       = 168 * time.Hour

	defaultTimezone      = "UTC"
	defaultMaxLateMs     = 60000
	defaultClaimSpreadMs = 10
	defaultClaimAheadMs  = 100
	defaultLeaseMs       = 30000
	defaultMaxAttempts   = 3
	// defaultOverlap is skip on the lease backends and allow on the
	// claim-only ones, which cannot enforce skip (Backend.Leases).
	defaultOverlap          = "skip"
	defaultClaimOnlyOverlap = "allow"
	defaultCatchUp          = CatchUpLatest
	defaultTimeout          = time.Hour
	defaultKillGraceMs      = 10000
	defaultShell            = "/bin/sh"
	defaultOutputTailBytes  = 4096
	defaultHookTimeoutMs    = 60000
)

// Limits.
const (
	// MaxKeepRuns bounds keepRuns.
	MaxKeepRuns = 1_000_000
	// MaxOutputTailBytes bounds outputTailBytes.
	MaxOutputTailBytes = 1 << 20
	// MaxClaimSpreadMs bounds claimSpreadMs: the spread only has to outrun
	// clock skew and timer jitter between instances; a second of it would
	// only delay every job.
	MaxClaimSpreadMs = 1000
	// MaxClaimAheadMs bounds claimAheadMs: the head start only has to
	// cover the spread and the claim's round trip.
	MaxClaimAheadMs = 1000
	// retentionFactor: a claim-only backend's retention must be at least
	// retentionFactor times maxLate. A late instance claims a slot up to
	// maxLate after it (by its own clock, which may be skewed, and after a
	// pause); the store must still remember the slot then, or the late claim
	// wins a second time. Twice maxLate leaves as much again for clock skew
	// and pauses.
	retentionFactor = 2
)

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

	logLevels      = []string{"debug", "info", "warn", "error"}
	logFormats     = []string{"auto", "console", "json"}
	overlapChoices = []string{"skip", "allow", "replace", "queue"}
	catchUpChoices = []string{CatchUpNone, CatchUpLatest, CatchUpAll}
	onDriftChoices = []string{OnDriftRun, OnDriftPause}

	// jobReservedEnv are set by the daemon for every run
	// (docs/spec.md#s6-jobs); a job's env may not set them.
	jobReservedEnv = []string{"ANARCHON_JOB", "ANARCHON_SLOT", "ANARCHON_SLOT_MS", "ANARCHON_ATTEMPT", "ANARCHON_TOKEN", "ANARCHON_INSTANCE",
		"ANARCHON_HOOK", "ANARCHON_STATUS", "ANARCHON_EXIT_CODE", "ANARCHON_DURATION_MS", "ANARCHON_OUTPUT_FILE", "ANARCHON_REASON"}
)

// setting is a resolved value and where it came from.
type setting[T any] struct {
	val T
	at  *value // nil: the built-in default
}

func def[T any](v T) setting[T] { return setting[T]{val: v} }

// jobLevel reports whether the job itself set it.
func (s setting[T]) jobLevel() bool { return s.at != nil && s.at.jobLevel }

// origin says where s came from, for a message about another setting.
func (s setting[T]) origin() string {
	switch {
	case s.at == nil:
		return "built-in default"
	case s.at.env != "":
		return "env " + s.at.env
	case s.at.line > 0:
		return fmt.Sprintf("%s, line %d", s.at.field, s.at.line)
	}
	return s.at.field
}

// get resolves the setting key of vals: the written value if it converts and
// passes check, else (after reporting the problem) dflt.
func get[T any](p *parser, vals map[string]*value, key string, dflt setting[T], conv func(*value) (T, bool), check func(T) string) setting[T] {
	v := vals[key]
	if v == nil {
		return dflt
	}
	x, ok := conv(v)
	if !ok {
		return dflt
	}
	if check != nil {
		if msg := check(x); msg != "" {
			p.errorf(v, "%s", msg)
			return dflt
		}
	}
	return setting[T]{x, v}
}

// ---- typing ----

func (p *parser) asString(v *value) (string, bool) {
	s := v.text
	if v.env == "" {
		n := v.node
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode && !v.secret {
				hint = fmt.Sprintf("; write %q in quotes if it is meant as text", n.Value)
			}
			p.errorf(v, "must be a string, not %s%s", describe(n), hint)
			return "", false
		}
		s = n.Value
	}
	if strings.ContainsRune(s, 0) {
		p.errorf(v, "must not contain a NUL character")
		return "", false
	}
	return s, true
}

// unitOf names the unit of an integer setting from its key's suffix.
func unitOf(field string) string {
	switch {
	case strings.HasSuffix(field, "Ms"):
		return " (milliseconds)"
	case strings.HasSuffix(field, "Sec"):
		return " (seconds)"
	case strings.HasSuffix(field, "Bytes"):
		return " (bytes)"
	}
	return ""
}

func (p *parser) asInt(v *value) (int64, bool) {
	if v.env != "" {
		i, err := strconv.ParseInt(v.text, 10, 64)
		if err != nil {
			p.errorf(v, "must be an integer%s, not %q", unitOf(v.field), v.text)
			return 0, false
		}
		return i, true
	}
	n := v.node
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		hint := ""
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
			if _, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
				hint = "; write it without quotes"
			} else if _, err := time.ParseDuration(n.Value); err == nil && strings.HasSuffix(v.field, "Ms") {
				hint = "; this key takes a number of milliseconds, not a duration"
			} else {
				hint = fmt.Sprintf(" (%q)", n.Value)
			}
		}
		p.errorf(v, "must be an integer%s, not %s%s", unitOf(v.field), describe(n), hint)
		return 0, false
	}
	var i int64
	if err := n.Decode(&i); err != nil {
		p.errorf(v, "integer %s is out of range", n.Value)
		return 0, false
	}
	return i, true
}

func (p *parser) asBool(v *value) (bool, bool) {
	if v.env != "" {
		b, err := strconv.ParseBool(v.text)
		if err != nil {
			p.errorf(v, "must be true or false, not %q", v.text)
			return false, false
		}
		return b, true
	}
	n := v.node
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		p.errorf(v, "must be true or false, not %s", describe(n))
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		p.errorf(v, "must be true or false, not %q", n.Value)
		return false, false
	}
	return b, true
}

const durationHint = `a Go duration such as "90s", "5m" or "1h30m"`

func (p *parser) asDuration(v *value) (time.Duration, bool) {
	s := v.text
	if v.env == "" {
		n := v.node
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			p.errorf(v, "must be %s, not %s", durationHint, describe(n))
			return 0, false
		}
		s = n.Value
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.errorf(v, "bad duration %q: must be %s", s, durationHint)
		return 0, false
	}
	return d, true
}

// asStrings reads a list of scalars (args). Numbers and booleans are taken as
// written: args: [sleep, 30] is "sleep", "30".
func (p *parser) asStrings(v *value) ([]string, bool) {
	if v.env != "" {
		// A list set by an ANARCHON_* variable: comma-separated.
		out := strings.Split(v.text, ",")
		for i := range out {
			out[i] = strings.TrimSpace(out[i])
		}
		return out, true
	}
	n := v.node
	if n.Kind != yaml.SequenceNode {
		p.errorf(v, "must be a list of strings, not %s", describe(n))
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, it := range n.Content {
		r := resolve(it)
		field := fmt.Sprintf("%s[%d]", v.field, i)
		switch {
		case r == nil || r.Kind != yaml.ScalarNode || isNull(r):
			p.errNode(it, v.job, field, "must be a string, not %s", describe(it))
			ok = false
		case strings.ContainsRune(r.Value, 0):
			p.errNode(it, v.job, field, "must not contain a NUL character")
			ok = false
		default:
			out = append(out, r.Value)
		}
	}
	return out, ok
}

// asStringMap reads a mapping of environment variables (env). Numbers and
// booleans are taken as written: MODE: 1 is "1".
func (p *parser) asStringMap(v *value) (map[string]string, bool) {
	n := v.node
	if n.Kind != yaml.MappingNode {
		p.errorf(v, "must be a mapping of variable names to values, not %s", describe(n))
		return nil, false
	}
	out := map[string]string{}
	ok := true
	for _, pr := range p.pairs(n, v.field, v.job, 0) {
		k := resolve(pr.k).Value
		field := v.field + "." + fieldKey(k)
		r := resolve(pr.v)
		switch {
		case !envNameRE.MatchString(k):
			p.errNode(pr.k, v.job, field, "bad variable name %q: use letters, digits and _, not starting with a digit", store.Short(k))
			ok = false
		case slices.Contains(jobReservedEnv, k):
			p.errNode(pr.k, v.job, field, "%s is set by the daemon for every run and cannot be set here", k)
			ok = false
		case r == nil || r.Kind != yaml.ScalarNode || isNull(r):
			p.errNode(pr.v, v.job, field, "must be a string, not %s (write \"\" for an empty value)", describe(pr.v))
			ok = false
		case strings.ContainsRune(r.Value, 0):
			p.errNode(pr.v, v.job, field, "must not contain a NUL character")
			ok = false
		default:
			out[k] = r.Value
		}
	}
	return out, ok
}

// ---- checks: each returns "" or the problem ----

func positiveDuration(d time.Duration) string {
	if d <= 0 {
		return fmt.Sprintf("must be greater than 0, not %s", d)
	}
	return ""
}

func checkInstance(s string) string {
	if len(s) > 255 {
		return "must be at most 255 bytes"
	}
	if strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return fmt.Sprintf("bad instance id %q: must not contain white space or control characters", s)
	}
	return ""
}

// location resolves a time zone name; slots must be the same on every host,
// so "Local" (each host's own zone) is refused.
func (p *parser) location(name string) (*time.Location, string) {
	if loc, ok := p.locs[name]; ok {
		return loc, ""
	}
	switch name {
	case "":
		return nil, "must not be empty (UTC, Europe/Athens, America/New_York, ...)"
	case "Local":
		return nil, `"Local" is each host's own zone, and every instance must compute the same slots: name the zone (UTC, Europe/Athens, ...)`
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Sprintf("unknown time zone %q (an IANA name such as UTC, Europe/Athens, America/New_York)", name)
	}
	p.locs[name] = loc
	return loc, ""
}

// ---- resolution ----

// policy is the part of a job that defaults can give: the keys of defaults.
type policy struct {
	timezone     setting[string]
	loc          *time.Location
	badZone      bool
	maxLate      setting[int64]
	claimSpread  setting[int64]
	claimAhead   setting[int64]
	lease        setting[int64]
	heartbeat    setting[int64]
	heartbeatSet bool // false: leaseMs / 3
	maxAttempts  setting[int64]
	overlap      setting[string]
	catchUp      setting[string]
	timeout      setting[time.Duration]
	killGrace    setting[int64]
	shell        setting[string]
	outputTail   setting[int64]
	inheritEnv   setting[[]string]
	onFailure    setting[string]
	onSuccess    setting[string]
	onMissed     setting[string]
	hookTimeout  setting[int64]
	jitter       setting[int64]
	retry        retryPolicy
	keepRuns     setting[int64] // 0: not set
	onDrift      setting[string]
}

// DefaultClaimAheadMs is the built-in claimAheadMs of backendType: its
// driver's (store.Driver.ClaimAheadMs), else 100 ms.
func DefaultClaimAheadMs(backendType string) int64 {
	if d, ok := store.Lookup(backendType); ok && d.ClaimAheadMs > 0 {
		return d.ClaimAheadMs
	}
	return defaultClaimAheadMs
}

func builtinPolicy(b *Backend) policy {
	overlap := defaultOverlap
	if !b.Leases() {
		overlap = defaultClaimOnlyOverlap
	}
	return policy{
		timezone:    def(defaultTimezone),
		loc:         time.UTC,
		maxLate:     def[int64](defaultMaxLateMs),
		claimSpread: def[int64](defaultClaimSpreadMs),
		claimAhead:  def(DefaultClaimAheadMs(b.Type)),
		lease:       def[int64](defaultLeaseMs),
		maxAttempts: def[int64](defaultMaxAttempts),
		overlap:     def(overlap),
		catchUp:     def(defaultCatchUp),
		timeout:     def(defaultTimeout),
		killGrace:   def[int64](defaultKillGraceMs),
		shell:       def(defaultShell),
		outputTail:  def[int64](defaultOutputTailBytes),
		hookTimeout: def[int64](defaultHookTimeoutMs),
		retry:       builtinRetry(),
		onDrift:     def(OnDriftRun),
	}
}

// resolvePolicy applies the keys of vals (with prefix: "defaults." or "" for
// a job) over base.
func (p *parser) resolvePolicy(vals map[string]*value, prefix string, base policy) policy {
	pol := base
	pol.timezone = get(p, vals, prefix+"timezone", base.timezone, p.asString, func(s string) string {
		_, msg := p.location(s)
		return msg
	})
	if v := vals[prefix+"timezone"]; v != nil {
		pol.badZone = pol.timezone.at != v
	}
	if loc, _ := p.location(pol.timezone.val); loc != nil {
		pol.loc = loc
	}
	pol.maxLate = get(p, vals, prefix+"maxLateMs", base.maxLate, p.asInt, store.Millis(0))
	pol.claimSpread = get(p, vals, prefix+"claimSpreadMs", base.claimSpread, p.asInt, store.IntRange(0, MaxClaimSpreadMs))
	pol.claimAhead = get(p, vals, prefix+"claimAheadMs", base.claimAhead, p.asInt, store.IntRange(0, MaxClaimAheadMs))
	pol.lease = get(p, vals, prefix+"leaseMs", base.lease, p.asInt, store.Millis(1))
	if hb := get(p, vals, prefix+"heartbeatMs", setting[int64]{}, p.asInt, store.Millis(1)); hb.at != nil {
		pol.heartbeat, pol.heartbeatSet = hb, true
	}
	pol.maxAttempts = get(p, vals, prefix+"maxAttempts", base.maxAttempts, p.asInt, store.IntRange(1, math.MaxInt32))
	pol.overlap = get(p, vals, prefix+"overlap", base.overlap, p.asString, store.OneOf(overlapChoices...))
	pol.catchUp = get(p, vals, prefix+"catchUp", base.catchUp, p.asString, store.OneOf(catchUpChoices...))
	pol.timeout = get(p, vals, prefix+"timeout", base.timeout, p.asDuration, positiveDuration)
	pol.killGrace = get(p, vals, prefix+"killGraceMs", base.killGrace, p.asInt, store.Millis(0))
	pol.shell = get(p, vals, prefix+"shell", base.shell, p.asString, store.NotEmpty)
	pol.outputTail = get(p, vals, prefix+"outputTailBytes", base.outputTail, p.asInt, store.IntRange(0, MaxOutputTailBytes))
	pol.inheritEnv = get(p, vals, prefix+"inheritEnv", base.inheritEnv, p.asEnvNames, nil)
	pol.onFailure = get(p, vals, prefix+"onFailure", base.onFailure, p.asString, nil)
	pol.onSuccess = get(p, vals, prefix+"onSuccess", base.onSuccess, p.asString, nil)
	pol.onMissed = get(p, vals, prefix+"onMissed", base.onMissed, p.asString, nil)
	pol.hookTimeout = get(p, vals, prefix+"hookTimeoutMs", base.hookTimeout, p.asInt, store.Millis(1))
	pol.jitter = get(p, vals, prefix+"jitterMs", base.jitter, p.asInt, store.Millis(0))
	pol.retry = p.resolveRetry(vals, prefix, base.retry)
	pol.keepRuns = get(p, vals, prefix+"keepRuns", base.keepRuns, p.asInt, store.IntRange(1, MaxKeepRuns))
	pol.onDrift = get(p, vals, prefix+"onDrift", base.onDrift, p.asString, store.OneOf(onDriftChoices...))
	return pol
}

// heartbeatOf checks heartbeat against lease and returns the heartbeat in
// ms. For a job (inJob), a problem made only of inherited values is not
// reported again: it was reported at defaults.
func (p *parser) heartbeatOf(pol policy, inJob bool) int64 {
	lease := pol.lease.val
	if !pol.heartbeatSet {
		hb := lease / 3
		if hb <= 0 && (!inJob || pol.lease.jobLevel()) {
			p.errorf(pol.lease.at, "leaseMs %d is too short: the default heartbeatMs (leaseMs/3) would be 0", lease)
		}
		return hb
	}
	hb := pol.heartbeat.val
	if inJob && !pol.heartbeat.jobLevel() && !pol.lease.jobLevel() {
		return hb
	}
	if !p.lessThan(inJob, pol.heartbeat, pol.lease, "heartbeatMs", "leaseMs", "the lease must be renewed before it runs out") {
		return hb
	}
	if hb*2 > lease {
		p.warnAt(pol.heartbeat.at, "heartbeatMs %d is more than half of leaseMs %d: one late renewal lets the lease run out", hb, lease)
	}
	return hb
}

// claimSpreadOf checks claimSpread against maxLate and returns the spread in
// ms. A claim held back by the spread must still be in time, so a spread
// that is set must be less than maxLate (0, no spread, always fits). The
// built-in default is not an error: it shrinks to less than half of a short
// maxLate. For a job (inJob), a problem made only of inherited values is
// not reported again: it was reported at defaults.
func (p *parser) claimSpreadOf(pol policy, inJob bool) int64 {
	spread, maxLate := pol.claimSpread.val, pol.maxLate.val
	if pol.claimSpread.at == nil {
		return min(spread, max(maxLate-1, 0)/2)
	}
	if spread == 0 || p.lessThan(inJob, pol.claimSpread, pol.maxLate, "claimSpreadMs", "maxLateMs", "a claim held back that long would be late") {
		return spread
	}
	return 0
}

// claimAheadOf checks claimAhead against the heartbeat (hb, in ms) and
// returns it in ms. A claim sent ahead holds its lease unrenewed until the
// slot, so an ahead that is set must be less than the heartbeat. The
// built-in default is not an error: it shrinks to less than half of a
// short heartbeat.
func (p *parser) claimAheadOf(pol policy, hb int64, inJob bool) int64 {
	ahead := pol.claimAhead.val
	if pol.claimAhead.at == nil {
		return min(ahead, max(hb-1, 0)/2)
	}
	heartbeat, key := pol.heartbeat, "heartbeatMs"
	if !pol.heartbeatSet {
		heartbeat, key = setting[int64]{val: hb, at: pol.lease.at}, "heartbeatMs (leaseMs/3)"
	}
	if ahead == 0 || p.lessThan(inJob, pol.claimAhead, heartbeat, "claimAheadMs", key, "a claim sent ahead holds its lease unrenewed until the slot") {
		return ahead
	}
	return 0
}

// lessThan reports whether a < b, and when not, reports that a (named
// aKey) must be less than b (bKey), why, at a's place, or at b's where
// only b is the job's own. For a job (inJob), a problem made only of
// inherited values is not reported again: it was reported at defaults.
func (p *parser) lessThan(inJob bool, a, b setting[int64], aKey, bKey, why string) bool {
	if a.val < b.val {
		return true
	}
	if inJob && !a.jobLevel() && !b.jobLevel() {
		return false
	}
	aDesc, bDesc := fmt.Sprintf("%s %d", aKey, a.val), fmt.Sprintf("%s %d", bKey, b.val)
	at := a.at
	if inJob && !a.jobLevel() {
		at = b.at
		aDesc += " (from " + a.origin() + ")"
	} else {
		bDesc += " (from " + b.origin() + ")"
	}
	p.errorf(at, "%s must be less than %s: %s", aDesc, bDesc, why)
	return false
}

// warnAt records a warning formatted like an Error at v.
func (p *parser) warnAt(v *value, format string, args ...any) {
	e := &Error{File: p.file, Msg: fmt.Sprintf(format, args...)}
	if v != nil {
		e.Line, e.Column, e.Env, e.Job, e.Field = v.line, v.col, v.env, v.job, v.field
	}
	p.warns = append(p.warns, e.Error())
}

// jobInfo keeps what the cross-job checks need.
type jobInfo struct {
	name     string
	pol      policy
	sched    schedule.Schedule
	schedVal *value
}

// resolve builds the Config from the collected settings, reporting every
// problem.
func (p *parser) resolve() *Config {
	cfg := &Config{File: p.file}
	vals := p.vals
	str := func(path, dflt string, check func(string) string) setting[string] {
		return get(p, vals, path, def(dflt), p.asString, check)
	}
	integer := func(path string, dflt int64, check func(int64) string) setting[int64] {
		return get(p, vals, path, def(dflt), p.asInt, check)
	}

	inst := str("instance", "", checkInstance)
	cfg.Instance = inst.val
	cfg.Namespace = str("namespace", defaultNamespace, store.Matches(store.NamePattern, "namespace", store.NameLike)).val
	cfg.ShutdownGrace = time.Duration(integer("shutdownGraceMs", defaultShutdownGraceMs, store.Millis(0)).val) * time.Millisecond
	cfg.Watch = get(p, vals, "watch", def(false), p.asBool, nil).val
	cfg.StateDir = p.anchor(str("stateDir", "", nil).val)
	cfg.Tags = get(p, vals, "tags", setting[[]string]{}, p.asStrings, checkTags).val
	cfg.Metrics.Listen = str("metrics.listen", defaultMetricsListen, checkListen).val
	p.resolveDashboard(cfg)
	cfg.Log.Level = str("log.level", defaultLogLevel, store.OneOf(logLevels...)).val
	cfg.Log.Format = str("log.format", defaultLogFormat, store.OneOf(logFormats...)).val

	b := &cfg.Backend
	typ, retention := p.resolveBackend(b)

	// Defaults, then jobs.
	defaults := p.resolvePolicy(vals, "defaults.", builtinPolicy(b))
	p.claimAheadOf(defaults, p.heartbeatOf(defaults, false), false)
	p.retryOf(defaults.retry, false)
	p.claimSpreadOf(defaults, false)
	var infos []jobInfo
	names := map[string]*value{}
	for _, rj := range p.jobs {
		j, info := p.resolveJob(rj, defaults, names)
		cfg.Jobs = append(cfg.Jobs, j)
		infos = append(infos, info)
	}
	if len(p.jobs) == 0 {
		p.warnf("%s: no jobs: the daemon will run but do nothing", p.file)
	}

	p.preflight(cfg.Jobs, infos)
	p.checkRetention(retention, infos)
	p.checkClaimOnly(b, typ, infos)
	p.checkOverlap(b, infos)
	p.checkRetry(typ.val, infos)
	p.checkKeepRuns(b, infos)

	if cfg.Instance == "" {
		cfg.Instance = p.defaultInstance()
	}
	cfg.Warnings = p.warns
	return cfg
}

func lineOf(v *value) int {
	if v == nil {
		return 0
	}
	return v.line
}

func colOf(v *value) int {
	if v == nil {
		return 0
	}
	return v.col
}

func envOf(v *value) string {
	if v == nil {
		return ""
	}
	return v.env
}

// resolveJob checks one job and merges defaults into it.
func (p *parser) resolveJob(rj *rawJob, defaults policy, names map[string]*value) (Job, jobInfo) {
	r := &jobResolver{
		p:     p,
		rj:    rj,
		vals:  rj.vals,
		field: fmt.Sprintf("jobs[%d]", rj.index),
		j:     Job{Index: rj.index, Line: rj.line},
	}
	r.name(names)
	r.pol = p.resolvePolicy(r.vals, "", defaults)
	r.info = jobInfo{name: rj.name, pol: r.pol}
	r.timing()
	r.runPolicy()
	r.hooksAndRetry()
	r.schedule()
	r.command()
	r.process()
	return r.j, r.info
}

// jobResolver holds one job while resolveJob fills it in, step by step.
// The steps run in a fixed order, so that a job's problems are reported in
// the order of its settings: name, policy, schedule, command, process.
type jobResolver struct {
	p     *parser
	rj    *rawJob
	vals  map[string]*value // the job's settings, by key
	field string            // "jobs[i]", the job's place in the file
	pol   policy            // the job's settings merged over defaults
	j     Job
	info  jobInfo
}

// missing reports that the job lacks key, at the job's entry.
func (r *jobResolver) missing(key, msg string) {
	r.p.errorf(&value{field: r.field + "." + key, job: r.rj.name, line: r.rj.line, col: r.rj.col}, "%s", msg)
}

// str resolves the job's string setting key, "" when it is not set.
func (r *jobResolver) str(key string, check func(string) string) setting[string] {
	return get(r.p, r.vals, key, setting[string]{}, r.p.asString, check)
}

// name resolves the job's name and records it in names (the names seen so
// far, with where each was set), so that a second job of the same name is
// refused.
func (r *jobResolver) name(names map[string]*value) {
	name := r.str("name", store.Matches(store.NamePattern, "job name", store.NameLike))
	r.j.Name = name.val
	switch {
	case r.vals["name"] == nil:
		r.missing("name", "missing name: every job needs a name (1 to 64 letters, digits, _ or -)")
	case name.at != nil:
		if first, dup := names[name.val]; dup {
			r.p.errorf(name.at, "duplicate job name %q (first defined at line %d)", name.val, first.line)
		} else {
			names[name.val] = name.at
		}
	}
}

// timing fills in the job's time zone and the times of its claims: how
// late, how spread, how far ahead, and the lease and its heartbeat,
// checking them against each other.
func (r *jobResolver) timing() {
	p, pol, j := r.p, r.pol, &r.j
	j.Timezone = pol.timezone.val
	j.Location = pol.loc
	j.MaxLate = time.Duration(pol.maxLate.val) * time.Millisecond
	j.ClaimSpread = time.Duration(p.claimSpreadOf(pol, true)) * time.Millisecond
	j.Lease = time.Duration(pol.lease.val) * time.Millisecond
	hb := p.heartbeatOf(pol, true)
	j.Heartbeat = time.Duration(hb) * time.Millisecond
	j.ClaimAhead = time.Duration(p.claimAheadOf(pol, hb, true)) * time.Millisecond
	j.Jitter = time.Duration(pol.jitter.val) * time.Millisecond
}

// runPolicy fills in how the job's runs are run and kept: attempts,
// overlap, catch-up, timeout, shell, output, environment, placement, and
// what it does on drift.
func (r *jobResolver) runPolicy() {
	p, pol, j := r.p, r.pol, &r.j
	j.MaxAttempts = int(pol.maxAttempts.val)
	j.Overlap = pol.overlap.val
	j.CatchUp = pol.catchUp.val
	j.Timeout = pol.timeout.val
	j.KillGrace = time.Duration(pol.killGrace.val) * time.Millisecond
	j.Shell = pol.shell.val
	j.OutputTailBytes = int(pol.outputTail.val)
	j.InheritEnv = pol.inheritEnv.val
	j.KeepRuns = int(pol.keepRuns.val)
	j.OnDrift = pol.onDrift.val
	j.Tags = get(p, r.vals, "tags", setting[[]string]{}, p.asStrings, checkTags).val
	j.PerInstance = get(p, r.vals, "perInstance", def(false), p.asBool, nil).val
}

// hooksAndRetry fills in what follows a run: the job's hooks, their
// timeout, and how a failed run is run again.
func (r *jobResolver) hooksAndRetry() {
	pol, j := r.pol, &r.j
	j.OnFailure = pol.onFailure.val
	j.OnSuccess = pol.onSuccess.val
	j.OnMissed = pol.onMissed.val
	j.HookTimeout = time.Duration(pol.hookTimeout.val) * time.Millisecond
	j.Retry = r.p.retryOf(pol.retry, true)
}

// schedule resolves and parses the job's schedule in its time zone, and
// checks its jitter against it. A parsed schedule goes into info for the
// cross-job checks.
func (r *jobResolver) schedule() {
	sched := r.str("schedule", func(s string) string {
		if strings.TrimSpace(s) == "" {
			return "must not be empty"
		}
		return ""
	})
	r.j.Schedule = sched.val
	switch {
	case r.vals["schedule"] == nil:
		r.missing("schedule", `missing schedule: a cron expression ("*/5 * * * *", "*/10 * * * * *", "@hourly", "@every 90s")`)
	case sched.at != nil:
		s, err := parseSchedule(sched.val, r.pol.loc)
		if err != nil {
			r.p.errorf(sched.at, "%s", err)
		} else {
			r.info.sched, r.info.schedVal = s, sched.at
			r.p.checkJitter(r.pol.jitter, s, sched)
		}
	}
}

// command resolves what the job runs: command (by the shell) or args
// (directly), exactly one of them.
func (r *jobResolver) command() {
	cmd := r.str("command", store.NotEmpty)
	r.j.Command = cmd.val
	args := get(r.p, r.vals, "args", setting[[]string]{}, r.p.asStrings, func(a []string) string {
		switch {
		case len(a) == 0:
			return "must not be empty: the first element is the program"
		case a[0] == "":
			return "the first element (the program) must not be empty"
		}
		return ""
	})
	r.j.Args = args.val
	cv, av := r.vals["command"], r.vals["args"]
	switch {
	case cv != nil && av != nil:
		later := av
		if cv.line > av.line {
			later = cv
		}
		r.p.errorf(later, "set either command (run by the shell) or args (run directly), not both")
	case cv == nil && av == nil:
		here := &value{field: r.field, job: r.rj.name, jobLevel: true, line: r.rj.line, col: r.rj.col}
		r.p.errorf(here, "missing command: set command (run by the shell) or args (run directly)")
	}
}

// process resolves the job's process: its environment, working directory,
// and the user and group it runs as.
func (r *jobResolver) process() {
	r.j.Env = get(r.p, r.vals, "env", setting[map[string]string]{}, r.p.asStringMap, nil).val
	r.j.Workdir = r.str("workdir", store.NotEmpty).val
	r.j.User = r.str("user", store.NotEmpty).val
	group := r.str("group", store.NotEmpty)
	r.j.Group = group.val
	if r.j.Group != "" && r.j.User == "" {
		r.p.errorf(group.at, "group needs user: the job runs as user, with group as its primary group")
	}
}

// parseSchedule is schedule.Parse, with a panic turned into an error so that
// Parse never panics.
func parseSchedule(expr string, loc *time.Location) (s schedule.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("bad schedule %q: internal error in the schedule parser (please report): %v", expr, r)
		}
	}()
	return schedule.Parse(expr, loc)
}

// checkRetention: backend.retention prunes finished runs by slot age, so it
// must cover the largest maxLate (plus the job's jitterMs: a jittered run
// is claimed up to maxLate after its start), or a late claim would find its
// run gone and run it again.
func (p *parser) checkRetention(retention setting[time.Duration], infos []jobInfo) {
	late := func(i *jobInfo) int64 { return i.pol.maxLate.val + i.pol.jitter.val }
	var worst *jobInfo
	for i := range infos {
		if worst == nil || late(&infos[i]) > late(worst) {
			worst = &infos[i]
		}
	}
	if worst == nil {
		return
	}
	need := time.Duration(late(worst)) * time.Millisecond
	if retention.val >= need {
		return
	}
	what, val := "maxLateMs", fmt.Sprint(worst.pol.maxLate.val)
	if worst.pol.jitter.val > 0 {
		what, val = "maxLateMs + jitterMs", fmt.Sprintf("%d + %d", worst.pol.maxLate.val, worst.pol.jitter.val)
	}
	if retention.at != nil {
		p.errorf(retention.at, "retention %s must be at least the largest %s (%s, job %q, from %s): a late claim must still find its run",
			retention.val, what, val, worst.name, worst.pol.maxLate.origin())
		return
	}
	p.errorf(worst.pol.maxLate.at, "%s %s is longer than backend.retention (%s, the built-in default): raise backend.retention to at least %s",
		what, val, retention.val, need)
}

// checkOverlap refuses overlap: skip, replace and queue on a claim-only
// backend: its store keeps no lease to see the job's previous run by, so
// they would silently not be enforced. Reported once where it is set (a
// job, or defaults).
func (p *parser) checkOverlap(b *Backend, infos []jobInfo) {
	p.needLeases(b, infos, func(pol policy) (*value, string) {
		ov := pol.overlap
		if ov.val == "allow" {
			return nil, ""
		}
		return ov.at, fmt.Sprintf("overlap: %s cannot be enforced on backend %s: %s; use overlap: allow (the default there), or a backend that keeps leases (docs/backends.md)",
			ov.val, b.Describe(), overlapWhy[ov.val])
	})
}

// checkKeepRuns refuses keepRuns on a claim-only backend: its store
// forgets runs by its own retention and has no way to delete a job's
// older runs, so the bound would silently not hold. Reported once where
// it is set (a job, or defaults).
func (p *parser) checkKeepRuns(b *Backend, infos []jobInfo) {
	p.needLeases(b, infos, func(pol policy) (*value, string) {
		return pol.keepRuns.at, fmt.Sprintf("keepRuns cannot be enforced on backend %s: a claim-only store forgets its runs by its own retention and cannot delete a job's older runs; remove keepRuns, or use a backend that keeps leases (docs/backends.md)", b.Describe())
	})
}

// needLeases refuses, on a claim-only backend, a job's setting that only
// a lease can enforce: refused returns where the job's policy sets it and
// why it cannot hold (nil where it is not set, or allowed). Each is
// reported once where it is set (a job, or defaults).
func (p *parser) needLeases(b *Backend, infos []jobInfo, refused func(policy) (*value, string)) {
	if b.Store == nil || b.Leases() {
		return
	}
	seen := map[*value]bool{}
	for _, in := range infos {
		at, msg := refused(in.pol)
		if at == nil || seen[at] {
			continue
		}
		seen[at] = true
		p.errorf(at, "%s", msg)
	}
}

// overlapWhy says why a claim-only store cannot hold each exclusive
// overlap policy.
var overlapWhy = map[string]string{
	"skip": "a claim-only store remembers that a slot was claimed, not whether its run still runs",
	"replace": "a claim-only store remembers that a slot was claimed, not whether its run still runs, " +
		"so the next slot's claim cannot wait for the replaced command to stop and both would run at once",
	"queue": "a claim-only store remembers that a slot was claimed, not whether its run still runs, " +
		"so a waiting slot cannot learn when the running one ends",
}

// checkClaimOnly applies docs/spec.md#s2 to the backends whose memory of a
// claim expires (store.Settings.Memory): each job's maxLate must be at
// most 1/retentionFactor of it, and a limit on the claims remembered must
// hold for every schedule.
func (p *parser) checkClaimOnly(b *Backend, typ setting[string], infos []jobInfo) {
	if b.Store == nil {
		return
	}
	prefix := "backend." + b.Type + "."
	for _, lim := range b.Store.Memory() {
		at := p.vals[prefix+lim.Key]
		if at == nil {
			at = typ.at
		}
		desc := fmt.Sprintf("%s%s (%s)", prefix, lim.Key, lim.Value())
		p.checkMaxLate(infos, desc, lim.Ms, at)
		p.checkJitterMemory(infos, desc, lim.Ms)
		if lim.MaxClaims > 0 {
			p.checkMaxClaims(infos, lim, desc)
		}
	}
}

// checkMaxLate: every job's maxLate must be at most 1/retentionFactor of
// a claim-only store's memory (ms, described by desc, set at at). Problems
// made by one inherited maxLate are reported once, at it.
func (p *parser) checkMaxLate(infos []jobInfo, desc string, ms int64, at *value) {
	const why = "retention must exceed maxLate + clock skew + the longest pause"
	type group struct {
		at   *value
		val  int64
		jobs []string
	}
	var groups []*group
	byAt := map[*value]*group{}
	for _, in := range infos {
		ml := in.pol.maxLate
		if ml.val*retentionFactor <= ms {
			continue
		}
		if ml.jobLevel() {
			p.errorf(ml.at, "maxLateMs %d must be at most half of %s: %s", ml.val, desc, why)
			continue
		}
		g := byAt[ml.at]
		if g == nil {
			g = &group{at: ml.at, val: ml.val}
			byAt[ml.at] = g
			groups = append(groups, g)
		}
		g.jobs = append(g.jobs, in.name)
	}
	for _, g := range groups {
		jobs := jobList(g.jobs)
		if g.at != nil {
			p.errorf(g.at, "maxLateMs %d must be at most half of %s: %s (%s)", g.val, desc, why, jobs)
			continue
		}
		p.errorf(at, "the built-in maxLateMs %d must be at most half of %s: %s (%s); lower defaults.maxLateMs or raise the retention", g.val, desc, why, jobs)
	}
}

// checkMaxClaims refuses a schedule with more slots within lim.Ms than the
// store remembers claims per job.
func (p *parser) checkMaxClaims(infos []jobInfo, lim store.Limit, desc string) {
	window := time.Duration(lim.Ms) * time.Millisecond
	for _, in := range infos {
		if in.sched == nil || in.pol.badZone {
			continue
		}
		if n, at := maxSlotsWithin(in.sched, window, lim.MaxClaims); n > lim.MaxClaims {
			p.errorf(in.schedVal, "more than %d slots within %s, e.g. the window ending %s): %s",
				lim.MaxClaims, strings.TrimSuffix(desc, ")"), at.UTC().Format(time.RFC3339), lim.Fix)
		}
	}
}

func jobList(names []string) string {
	const show = 5
	quoted := make([]string, 0, show)
	for i, n := range names {
		if i == show {
			break
		}
		quoted = append(quoted, strconv.Quote(n))
	}
	s := "jobs " + strings.Join(quoted, ", ")
	if len(names) == 1 {
		s = "job " + quoted[0]
	}
	if len(names) > show {
		s += fmt.Sprintf(" and %d more", len(names)-show)
	}
	return s
}

// idmpProbeFrom and idmpProbeSpan fix the stretch of time in which
// maxSlotsWithin looks for the densest window. Nine days from Saturday
// 2026-10-24 include every weekday, the end and the start of a month and the
// fall-back days of the EU (2026-10-25) and the US (2026-11-01), when
// elapsed-time schedules have an extra hour of slots.
var (
	idmpProbeFrom = time.Date(2026, 10, 24, 0, 0, 0, 0, time.UTC)
	idmpProbeSpan = 9 * 24 * time.Hour
)

// maxSlotsWithin returns the largest number of slots of s in a window of
// length w (from < slot <= from+w) found in the probe stretch, stopping as
// soon as it exceeds limit; and the end of the window where it found it.
func maxSlotsWithin(s schedule.Schedule, w time.Duration, limit int) (int, time.Time) {
	// Slots are at least a second apart (whole seconds, or @every of 1s or
	// more), so a window of at most limit seconds holds at most limit.
	if w <= time.Duration(limit)*time.Second {
		return 0, time.Time{}
	}
	end := idmpProbeFrom.Add(idmpProbeSpan)
	// Few slots in the whole stretch: no window can hold more.
	if len(schedule.Between(s, idmpProbeFrom, end, limit+1)) <= limit {
		return 0, time.Time{}
	}
	var q []time.Time // slots of the current window, oldest first
	best, bestAt := 0, time.Time{}
	for t := idmpProbeFrom; ; {
		next := s.Next(t)
		if next.IsZero() || next.After(end) || !next.After(t) {
			break
		}
		t = next
		for len(q) > 0 && !q[0].After(next.Add(-w)) {
			q = q[1:]
		}
		q = append(q, next)
		if len(q) > best {
			best, bestAt = len(q), next
			if best > limit {
				break
			}
		}
	}
	return best, bestAt
}
