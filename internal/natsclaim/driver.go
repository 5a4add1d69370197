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
	TLS               storetls.Settings
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
		Keys: []store.Key{
			{Name: "url", Kind: store.String, Secret: true},
			{Name: "passwordFile", Kind: store.String},
			{Name: "stream", Kind: store.String},
			{Name: "duplicateWindowMs", Kind: store.Int},
			store.TLSKey,
		},
		Parse: func(s store.Section) store.Settings {
			return Settings{
				URL:               s.String("url", defaultURL, store.URL("nats", "tls", "ws", "wss")),
				PasswordFile:      s.Path("passwordFile", ""),
				Stream:            s.String("stream", defaultStream, store.Matches(store.NamePattern, "stream name", store.NameLike)),
				DuplicateWindowMs: s.Int("duplicateWindowMs", defaultDupWindowMs, store.Millis(1)),
				TLS:               s.TLS(),
			}
		},
		Open:    open,
		Testing: testServer,
	})
}

func open(ctx context.Context, p store.OpenParams) (claim.Backend, error) {
	c := p.Settings.(Settings)
	name := "anarchond"
	if p.Instance != "" {
		name += " " + p.Instance
	}
	tlsConfig, err := storetls.Config(c.TLS)
	if err != nil {
		return nil, fmt.Errorf("backend.nats.%w", err)
	}
	return New(ctx, Options{
		URL:             c.URL,
		PasswordFile:    c.PasswordFile,
		TLS:             tlsConfig,
		Stream:          c.Stream,
		Namespace:       p.Namespace,
		DuplicateWindow: time.Duration(c.DuplicateWindowMs) * time.Millisecond,
		Name:            name,
		Log:             p.Log,
	})
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
