// Package redisclaim holds anarchon's Redis backends (docs/spec.md#s2,
// docs/spec.md#s3): one backend type "redis" whose strategy
// (backend.redis.strategy) picks how the claim is decided.
//
//   - lease (lease.go, lease_runs.go): the lease decision table of
//     docs/spec.md#s3-1 as one Lua script per operation; a claim.Leaser,
//     claim.Pruner and claim.Recorder.
//   - stream-id, idmp, script, auto (claimonly.go, streamid.go, idmp.go,
//     script.go, results.go, claimonly_record.go): the claim-only
//     strategies of docs/spec.md#s3-2, one claim.Backend and
//     claim.Recorder type, ClaimOnly (NewClaimOnly); auto runs idmp where
//     the server has XADD IDMP (Redis 8.6+) and script elsewhere.
//
// Every strategy records the outcome of a slot no attempt ran (a note:
// skipped, missed, unknown; claim.Recorder) with the claim's own
// primitive, on the keys the claim decides with, so that a note and the
// claims of its slot are decided against each other in one atomic step and
// the claim path costs nothing more: a later claim of a noted slot is done
// (lease) or lost (claim-only). ListRuns lists notes like runs and selects
// by status before it applies the limit.
//
// CheckStrategy answers, for anarchond validate, whether a server can run a
// strategy and which one auto picks, without opening a backend.
//
// # Connecting
//
// Every strategy talks to Redis through a go-redis redis.UniversalClient,
// made from backend.redis.url. The URL names one of three topologies:
//
//	single server  redis://[user[:password]@]host[:port][/db][?option=value...]
//	               rediss://... (TLS), unix:///path/to/redis.sock[?db=N]
//	Cluster        redis://[user[:password]@]seed1:6379,redis://seed2:6379,...
//	               or redis://...@seed1:6379?addr=seed2:6379&addr=seed3:6379
//	               or one seed with ?cluster=true (a configuration endpoint)
//	Sentinel       redis://[user[:password]@]sentinel1:26379,redis://sentinel2:26379/db?master_name=mymaster
//	               (or ?addr=sentinel2:26379 for the other sentinels)
//
// The rules, in order: master_name set -> Sentinel; cluster=true, or more
// than one address (a comma-separated list of URLs or addr= options) ->
// Cluster; otherwise one server. In a list, every URL has the same scheme;
// user info, database and options may be written on any one of them (or
// repeated identically). Options are go-redis's (dial_timeout, read_timeout,
// pool_size, max_retries, protocol, client_name, skip_verify for rediss, ...:
// see redis.ParseURL, ParseClusterURL and ParseFailoverURL); an unknown one
// is an error.
//
// Credentials: the URL's user info is the ACL user and password of the Redis
// servers that hold the data (the master and replicas, or the cluster
// nodes), in every topology. backend.redis.passwordFile, if set, overrides
// the password. Sentinels are reached without AUTH unless the URL sets
// sentinel_username=NAME and/or sentinel_password_file=PATH. A password
// never goes in a query option (password=... is refused): the password
// never appears in a log line or an error (secret.Redact, and every error of
// New is scrubbed of it: secret.Scrub).
//
// Cluster holds only database 0: a cluster URL with another database is an
// error. A Sentinel URL with replica_only is refused (claims write to the
// master); route_by_latency and route_randomly send reads to replicas
// (go-redis's failover cluster client), which the cheap read tolerates.
// backend.redis.tls (Options.TLS) sets the CA, client certificate and
// server name; it turns TLS on for a redis:// URL too.
// Over TLS, each server's certificate is checked against the name the
// client dialled (the name in the URL, or the one Cluster or Sentinel
// announce).
//
// # Redis Cluster
//
// Every key of one job carries the hash tag {<namespace>:<job>}, so that all
// of them live in one cluster slot and one script may touch them all. The
// only key outside a job's slot is the index of jobs, <namespace>:jobs, which
// no script touches and no claim waits for (index.go): a shard that is down
// stops the claims of its own jobs only.
//
// # Failover
//
// A Cluster client reloads its map of slots to nodes on every error a
// failover causes (a connection error, MOVED, CLUSTERDOWN, READONLY:
// follow.go) and at least every backend.redis.reloadIntervalMs (Options.
// ReloadInterval), so that claims reach the promoted replica as soon as
// Redis promotes it. A Sentinel client asks the sentinels for the master
// whenever it connects, and drops its connections to the old master when
// they announce the new one. With backend.redis.waitReplicas (Options.
// WaitReplicas), a won claim is answered only once that many replicas hold
// it (WAIT, link.go), so that a failover cannot lose a claim already
// answered won, at the cost of a round trip and the replicas' delay.
//
// # Server versions
//
// The lease strategy needs Redis 7.0 or later (EVALSHA_RO for the cheap
// read; Valkey 7.2 and later report themselves as Redis 7.2); New refuses an
// older server, naming its version. stream-id runs on any Redis with
// streams (5.0); script needs 6.2 (XADD MINID, exclusive XREVRANGE ranges);
// idmp needs XADD IDMP (Redis 8.6), which is asked of the server itself
// (COMMAND DOCS XADD). In a Cluster the check asks one node: upgrade every
// node before switching to idmp.
package redisclaim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/secret"
)

// Defaults of Options.
const (
	DefaultNamespace     = "cron"
	DefaultHistoryMaxLen = 10000
)

// Strategies of backend.redis.strategy.
const (
	StrategyLease    = "lease"
	StrategyStreamID = "stream-id"
	StrategyIDMP     = "idmp"
	StrategyScript   = "script"
	StrategyAuto     = "auto"
)

// Options configures a Redis backend.
type Options struct {
	// Client, if set, is used instead of dialling URL (tests, embedding).
	// The backend does not close a client it was given.
	Client redis.UniversalClient
	// URL is backend.redis.url (see the package documentation). Ignored
	// when Client is set.
	URL string
	// PasswordFile, if set, names a file whose content (without its
	// trailing line breaks; see secret.ReadFile) is the password; it
	// overrides the URL's password.
	PasswordFile string
	// TLS, if set (storetls.Config of backend.redis.tls), is the client
	// TLS configuration: it turns TLS on for a redis:// URL and replaces
	// rediss://'s default (skip_verify in the URL still applies). An empty
	// ServerName checks each server against the name the client dials.
	// Ignored when Client is set.
	TLS *tls.Config
	// Namespace prefixes every key (default "cron"). It must not contain
	// "{" or "}", which would break the keys' cluster hash tags.
	Namespace string
	// HistoryMaxLen caps each job's history stream (XADD MAXLEN ~; default
	// 10000 events); on the claim-only strategies, each job's results
	// stream and its stream of claims (stream-id; idmp keeps at least
	// IDMPMaxSize; script keeps its window instead).
	HistoryMaxLen int64
	// Strategy is the claim-only strategy NewClaimOnly opens: stream-id,
	// idmp, script or auto (backend.redis.strategy). New (the lease
	// strategy) ignores it and the three below.
	Strategy string
	// IDMPDuration is how long the idmp strategy's streams remember a
	// claim (XCFGSET IDMP-DURATION; whole seconds, 1s to 24h; default 1h:
	// backend.redis.strategyOptions.durationSec).
	IDMPDuration time.Duration
	// IDMPMaxSize is the idmp strategy's IDMP-MAXSIZE, the claims a job's
	// stream remembers at most (1 to 10000; default MaxIDMPMaxSize,
	// which configuration validation assumes).
	IDMPMaxSize int64
	// Window is how far back the script strategy looks for a claim of the
	// slot (default 1h: backend.redis.strategyOptions.windowMs).
	Window time.Duration
	// ReloadInterval is how often a Cluster client reloads its map of
	// slots to nodes when no error asks for a reload (every connection
	// error, MOVED, CLUSTERDOWN, READONLY does: follow.go); default
	// DefaultReloadInterval (backend.redis.reloadIntervalMs). Ignored when
	// Client is set, and by the other topologies.
	ReloadInterval time.Duration
	// WaitReplicas, above 0, makes every won claim (and the lease
	// strategy's Finish) wait until that many replicas of its master hold
	// it (WAIT), for at most WaitTimeout (default DefaultWaitTimeout):
	// backend.redis.waitReplicas and waitTimeoutMs. A write they do not
	// all acknowledge in time is answered as no decision (an error
	// wrapping ErrNotReplicated), and the caller sends it again.
	WaitReplicas int
	WaitTimeout  time.Duration
	// Log receives connection and takeover messages; nil discards them.
	// The first backend given a Log also routes go-redis's own (global)
	// log messages to it.
	Log *zap.Logger
}

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if strings.ContainsAny(o.Namespace, "{}") {
		return o, fmt.Errorf("namespace %q: must not contain { or }", o.Namespace)
	}
	if o.HistoryMaxLen < 0 {
		return o, fmt.Errorf("negative history length %d", o.HistoryMaxLen)
	}
	if o.HistoryMaxLen == 0 {
		o.HistoryMaxLen = DefaultHistoryMaxLen
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	} else {
		routeLogs.Do(func() { redis.SetLogger(goRedisLog{o.Log.Named("go-redis")}) })
	}
	if o.Client == nil && o.URL == "" {
		return o, errors.New("backend.redis.url is empty")
	}
	return o.replicationDefaults()
}

// replicationDefaults checks and fills in ReloadInterval, WaitReplicas and
// WaitTimeout.
func (o Options) replicationDefaults() (Options, error) {
	switch {
	case o.ReloadInterval < 0:
		return o, fmt.Errorf("negative reload interval %v", o.ReloadInterval)
	case o.ReloadInterval == 0:
		o.ReloadInterval = DefaultReloadInterval
	}
	if o.WaitReplicas < 0 || o.WaitReplicas > MaxWaitReplicas {
		return o, fmt.Errorf("waitReplicas %d: want 0 to %d", o.WaitReplicas, MaxWaitReplicas)
	}
	// WAIT's timeout is in milliseconds, and 0 would wait for ever.
	return o, defaultMs(&o.WaitTimeout, DefaultWaitTimeout, "wait timeout")
}

// defaultMs sets *d to dflt when it is 0, and refuses a negative *d or one
// shorter than the millisecond Redis counts in; what names it in errors.
func defaultMs(d *time.Duration, dflt time.Duration, what string) error {
	switch {
	case *d < 0:
		return fmt.Errorf("negative %s %v", what, *d)
	case *d == 0:
		*d = dflt
	case *d < time.Millisecond:
		return fmt.Errorf("%s %v is shorter than 1ms", what, *d)
	}
	return nil
}

// goRedisLog sends go-redis's own messages (dial retries, sentinel and
// cluster events) to zap, with any URL password hidden.
type goRedisLog struct{ log *zap.Logger }

func (l goRedisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn(secret.Redact(fmt.Sprintf(format, v...)))
}

// routeLogs is done once per process: go-redis has one global logger.
var routeLogs sync.Once

// connect returns the client of o (o.Client, or a new one from o.URL), its
// refusals classified (refused.go), following failovers (follow.go), and
// checks that Redis answers. owned says whether the backend must close it.
// Its errors name the URL with the password hidden and never contain a
// password; a Cluster whose seeds do not answer is an error naming what
// each seed answered.
func connect(ctx context.Context, o Options) (redis.UniversalClient, bool, error) {
	if o.Client != nil {
		o.Client.AddHook(refusals{ns: o.Namespace})
		follow(o.Client, o.Log)
		if err := o.Client.Ping(ctx).Err(); err != nil {
			return nil, false, fmt.Errorf("connect to redis: %w", secret.Scrub(err))
		}
		return o.Client, false, nil
	}
	where := "redis " + secret.Redact(o.URL)
	cc, err := parseURL(o.URL, o.PasswordFile)
	if err == nil {
		err = cc.applyTLS(o.TLS)
	}
	if err != nil {
		return nil, false, fmt.Errorf("connect to %s: %w", where, err)
	}
	if cc.cluster != nil {
		cc.cluster.ClusterStateReloadInterval = o.ReloadInterval
	}
	c := cc.newClient()
	o.Log.Info("connecting to redis", zap.String("url", secret.Redact(o.URL)),
		zap.String("topology", string(cc.Topology)))
	c.AddHook(refusals{ns: o.Namespace})
	follow(c, o.Log)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		if cc.Topology == Cluster {
			// Say what each seed answered, not only the first error.
			err = probeSeeds(ctx, cc, err)
		}
		return nil, false, fmt.Errorf("connect to %s: %w", where, secret.Scrub(err, cc.secrets...))
	}
	return c, true, nil
}

// serverVersion is the version Redis reports in INFO server (redis_version,
// which Valkey reports too), as major and minor; ok is false when it cannot
// be read (INFO disabled, an unexpected format).
func serverVersion(ctx context.Context, c redis.UniversalClient) (version string, major, minor int, ok bool) {
	info, err := infoFields(ctx, c, "server")
	v, found := info["redis_version"]
	if err != nil || !found {
		return "", 0, 0, false
	}
	major, minor, ok = parseVersion(v)
	return v, major, minor, ok
}

// parseVersion reads "7.0.15" as 7, 0.
func parseVersion(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

// loadScripts loads scripts into the script cache of the server (of every
// master of a cluster), so that the first claims find them there, and so
// that a server that refuses Lua scripting (an ACL user without
// @scripting, a proxy that does not pass EVAL) is one clear error at start
// instead of a failed claim at every slot.
func loadScripts(ctx context.Context, c redis.UniversalClient, scripts ...*redis.Script) error {
	for _, s := range scripts {
		err := s.Load(ctx, c).Err()
		var reply redis.Error
		switch {
		case err == nil:
		case errors.As(err, &reply) && !errors.Is(err, redis.ErrClosed):
			// The server answered, with an error: a refusal.
			return fmt.Errorf("the server refused Lua scripting (SCRIPT LOAD), which every redis strategy needs: %w", err)
		default:
			return fmt.Errorf("load the Lua scripts: %w", err)
		}
	}
	return nil
}
