package redisclaim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/store"
	"github.com/anarchon/anarchon/internal/storetls"
)

// Settings are backend.redis.
type Settings struct {
	URL          string
	Strategy     string // lease | stream-id | idmp | script | auto
	PasswordFile string
	DurationSec  int   // strategyOptions.durationSec (idmp)
	WindowMs     int64 // strategyOptions.windowMs (script)
	TLS          storetls.Settings
	// ReloadIntervalMs is how often a Cluster client reloads its slot map
	// when no error asks for it (reloadIntervalMs; 0: the default,
	// DefaultReloadInterval).
	ReloadIntervalMs int64
	// WaitReplicas and WaitTimeoutMs: a won claim (and a lease Finish) is
	// answered only once that many replicas hold it (WAIT); 0 waits for
	// none. WaitTimeoutMs 0 is the default, DefaultWaitTimeout.
	WaitReplicas  int
	WaitTimeoutMs int64
}

// Section defaults and bounds.
const (
	defaultURL         = "redis://127.0.0.1:6379/0"
	defaultDurationSec = 3600
	defaultWindowMs    = 3600000
	// maxDurationSec is the largest IDMP-DURATION Redis accepts.
	maxDurationSec = 86400
	// Bounds of reloadIntervalMs: more often than every 100 ms is a
	// CLUSTER SLOTS storm; a failover is followed on its errors anyway.
	minReloadMs, maxReloadMs = 100, 600_000
	// maxWaitTimeoutMs bounds waitTimeoutMs: below go-redis's default
	// read timeout (3 s), which would cut a longer WAIT off.
	maxWaitTimeoutMs = 2_000
)

func init() {
	store.Register(store.Driver{
		Name:    "redis",
		Summary: "Redis: strategy lease (leases, fenced writes) or a claim-only strategy (stream-id, idmp, script, auto)",
		Keys: store.NetworkKeys("url",
			store.Key{Name: "strategy", Kind: store.String},
			store.Key{Name: "strategyOptions", Kind: store.Map, Children: []store.Key{
				{Name: "durationSec", Kind: store.Int},
				{Name: "windowMs", Kind: store.Int},
			}},
			store.Key{Name: "reloadIntervalMs", Kind: store.Int},
			store.Key{Name: "waitReplicas", Kind: store.Int},
			store.Key{Name: "waitTimeoutMs", Kind: store.Int},
		),
		Parse:   parse,
		Open:    open,
		Check:   check,
		Testing: testServer,
	})
}

// parse reads backend.redis.
func parse(s store.Section) store.Settings {
	c := Settings{
		URL:          s.String("url", defaultURL, store.URL("redis", "rediss", "unix")),
		Strategy:     s.String("strategy", StrategyLease, store.OneOf(StrategyLease, StrategyStreamID, StrategyIDMP, StrategyScript, StrategyAuto)),
		PasswordFile: s.Path("passwordFile", ""),
		DurationSec:  int(s.Int("strategyOptions.durationSec", defaultDurationSec, store.IntRange(1, maxDurationSec))),
		WindowMs:     s.Int("strategyOptions.windowMs", defaultWindowMs, store.Millis(1)),
		TLS:          s.TLS(),
		// 0: the built-in defaults (Options.withDefaults).
		ReloadIntervalMs: s.Int("reloadIntervalMs", 0, store.IntRange(minReloadMs, maxReloadMs)),
		WaitReplicas:     int(s.Int("waitReplicas", 0, store.IntRange(0, MaxWaitReplicas))),
		WaitTimeoutMs:    s.Int("waitTimeoutMs", 0, store.IntRange(1, maxWaitTimeoutMs)),
	}
	if s.Set("waitTimeoutMs") && !s.Set("waitReplicas") {
		s.Errorf("waitTimeoutMs", "waitTimeoutMs is set but waitReplicas is not: set waitReplicas (the replicas a claim waits for), or remove waitTimeoutMs")
	}
	if c.WaitReplicas > 0 && strings.HasPrefix(c.URL, "unix:") {
		s.Errorf("waitReplicas", "waitReplicas needs replicas, and a unix:// URL names one local server: use a redis:// URL of the master, a Sentinel or a Cluster URL, or remove waitReplicas")
	}
	return c
}

// check answers, for validate, what the URL reaches (topology, replicas:
// waitReplicas is refused above what a master has), whether the server
// can run the strategy, and which one auto picks.
func check(ctx context.Context, st store.Settings) (string, error) {
	c := st.(Settings)
	o, err := c.options()
	if err != nil {
		return "", err
	}
	o.Strategy = c.Strategy
	eff, err := CheckStrategy(ctx, o)
	if err != nil {
		return "", err
	}
	topo, err := CheckTopology(ctx, o)
	if err != nil {
		return "", err
	}
	if eff == c.Strategy {
		return topo.String(), nil
	}
	// What the server made of the strategy first, then what it is.
	return fmt.Sprintf("redis strategy %s: using %s on this server\n%s", c.Strategy, eff, topo), nil
}

// open dispatches on backend.redis.strategy.
func open(ctx context.Context, p store.OpenParams) (claim.Backend, error) {
	c := p.Settings.(Settings)
	o, err := c.options()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	o.Namespace, o.Log = p.Namespace, p.Log
	switch c.Strategy {
	case StrategyLease, "":
		return New(ctx, o)
	case StrategyStreamID, StrategyIDMP, StrategyScript, StrategyAuto:
		o.Strategy = c.Strategy
		o.IDMPDuration = time.Duration(c.DurationSec) * time.Second
		o.IDMPMaxSize = MaxIDMPMaxSize
		o.Window = time.Duration(c.WindowMs) * time.Millisecond
		return NewClaimOnly(ctx, o)
	default:
		return nil, fmt.Errorf("unknown redis strategy %q (want lease, stream-id, idmp, script or auto)", c.Strategy)
	}
}

// options are the Options the section gives every use of the server.
func (c Settings) options() (Options, error) {
	tc, err := store.TLSConfig("redis", c.TLS)
	if err != nil {
		return Options{}, err
	}
	return Options{URL: c.URL, PasswordFile: c.PasswordFile, TLS: tc,
		ReloadInterval: time.Duration(c.ReloadIntervalMs) * time.Millisecond,
		WaitReplicas:   c.WaitReplicas, WaitTimeout: time.Duration(c.WaitTimeoutMs) * time.Millisecond}, nil
}

// Describe implements store.Settings.
func (c Settings) Describe() string {
	return fmt.Sprintf("redis %s (%s)", c.Strategy, secret.Redact(c.URL))
}

// Leases implements store.Settings: only the lease strategy keeps a lease
// on every run.
func (c Settings) Leases() bool { return c.Strategy == StrategyLease }

// Memory implements store.Settings: idmp remembers a job's claims for
// durationSec (and at most IDMP-MAXSIZE of them), script looks back
// windowMs; auto may use either. stream-id, like lease, keeps every claim
// until backend.retention.
func (c Settings) Memory() []store.Limit {
	var out []store.Limit
	if c.Strategy == StrategyIDMP || c.Strategy == StrategyAuto {
		auto := ""
		if c.Strategy == StrategyAuto {
			auto = " (strategy auto uses idmp on servers that have it)"
		}
		out = append(out, store.Limit{
			Key: "strategyOptions.durationSec", Ms: int64(c.DurationSec) * 1000, Unit: time.Second,
			MaxClaims: MaxIDMPMaxSize,
			Fix: fmt.Sprintf("the idmp strategy%s remembers at most %d claims per job (IDMP-MAXSIZE) and would forget slots early; lower durationSec, or use strategy script or lease",
				auto, MaxIDMPMaxSize),
		})
	}
	if c.Strategy == StrategyScript || c.Strategy == StrategyAuto {
		out = append(out, store.Limit{Key: "strategyOptions.windowMs", Ms: c.WindowMs})
	}
	return out
}
