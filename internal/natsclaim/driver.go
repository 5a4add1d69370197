package natsclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/store"
	"github.com/anarchon/anarchon/internal/storetls"
)

// Settings are backend.nats.
type Settings struct {
	URL               string
	PasswordFile      string // overrides the URL's password (or token)
	Stream            string
	DuplicateWindowMs int64
	// Replicas is the replica count of the stream the backend creates; 0
	// (not set) chooses from the cluster's size at open.
	Replicas         int
	PlacementCluster string
	PlacementTags    []string
	TLS              storetls.Settings
}

// Section defaults.
const (
	defaultURL         = "nats://127.0.0.1:4222"
	defaultStream      = "ANARCHON"
	defaultDupWindowMs = 3600000
)

func init() {
	store.Register(store.Driver{
		Name:    "nats",
		Summary: "NATS JetStream: claim-only, a publish with the run's message id, remembered for duplicateWindowMs",
		Keys: store.NetworkKeys("url",
			store.Key{Name: "stream", Kind: store.String},
			store.Key{Name: "duplicateWindowMs", Kind: store.Int},
			store.Key{Name: "replicas", Kind: store.Int},
			store.Key{Name: "placementCluster", Kind: store.String},
			store.Key{Name: "placementTags", Kind: store.Strings},
		),
		Parse: func(s store.Section) store.Settings {
			return Settings{
				URL:               s.String("url", defaultURL, store.URL("nats", "tls", "ws", "wss")),
				PasswordFile:      s.Path("passwordFile", ""),
				Stream:            s.String("stream", defaultStream, store.Matches(store.NamePattern, "stream name", store.NameLike)),
				DuplicateWindowMs: s.Int("duplicateWindowMs", defaultDupWindowMs, store.Millis(1)),
				Replicas:          int(s.Int("replicas", 0, store.IntRange(1, MaxReplicas))),
				PlacementCluster:  s.String("placementCluster", "", store.NotEmpty),
				PlacementTags:     s.Strings("placementTags", store.NotEmpty),
				TLS:               s.TLS(),
			}
		},
		Open:    open,
		Check:   check,
		Testing: testServer,
	})
}

// options are the backend's options of the section.
func options(c Settings) (Options, error) {
	tlsConfig, err := store.TLSConfig("nats", c.TLS)
	if err != nil {
		return Options{}, err
	}
	return Options{
		URL:              c.URL,
		PasswordFile:     c.PasswordFile,
		TLS:              tlsConfig,
		Stream:           c.Stream,
		DuplicateWindow:  time.Duration(c.DuplicateWindowMs) * time.Millisecond,
		Replicas:         c.Replicas,
		PlacementCluster: c.PlacementCluster,
		PlacementTags:    c.PlacementTags,
	}, nil
}

// check is what validate prints of the store: the topology found (a
// single server or a cluster of N), the stream's replicas and leader, and
// what weakens it; replicas above the cluster's size are refused.
func check(ctx context.Context, st store.Settings) (string, error) {
	o, err := options(st.(Settings))
	if err != nil {
		return "", err
	}
	r, err := Inspect(ctx, o)
	if err != nil {
		return "", fmt.Errorf("open nats backend: %w", err)
	}
	return r.String(), nil
}

func open(ctx context.Context, p store.OpenParams) (claim.Backend, error) {
	o, err := options(p.Settings.(Settings))
	if err != nil {
		return nil, err
	}
	o.Namespace, o.Log, o.Name = p.Namespace, p.Log, "anarchond"
	if p.Instance != "" {
		o.Name += " " + p.Instance
	}
	return New(ctx, o)
}

// Describe implements store.Settings.
func (c Settings) Describe() string {
	return fmt.Sprintf("nats (%s, stream %s)", secret.Redact(c.URL), c.Stream)
}

// Leases implements store.Settings: NATS is claim-only.
func (Settings) Leases() bool { return false }

// Memory implements store.Settings: the stream's duplicate window
// remembers a claim's message id for duplicateWindowMs.
func (c Settings) Memory() []store.Limit {
	return []store.Limit{{Key: "duplicateWindowMs", Ms: c.DuplicateWindowMs}}
}
