package rabbitclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/store"
	"github.com/anarchon/anarchon/internal/storetls"
)

// Settings are backend.rabbitmq.
type Settings struct {
	URL          string
	PasswordFile string // overrides the URL's password
	SlotTTLMs    int64
	TLS          storetls.Settings
}

// Section defaults.
const (
	defaultURL       = "amqp://guest:guest@127.0.0.1:5672/"
	defaultSlotTTLMs = 3600000
	// defaultClaimAheadMs: on RabbitMQ a claim is a confirmed persistent
	// publish into a durable queue per run, and every instance declares
	// and primes each run's queue ahead; at tens of runs a second the
	// broker's p99 answer exceeds 100 ms, and claims answered after the
	// slot delay the job's start (docs/performance.md).
	defaultClaimAheadMs = 500
)

func init() {
	store.Register(store.Driver{
		Name:      "rabbitmq",
		NoControl: whyNoControl,
		Summary:   "RabbitMQ: claim-only, one gate queue per run that remembers its claim for slotTtlMs",
		Keys:      store.NetworkKeys("url", store.Key{Name: "slotTtlMs", Kind: store.Int}),
		Parse: func(s store.Section) store.Settings {
			return Settings{
				URL:          s.String("url", defaultURL, store.URL("amqp", "amqps")),
				PasswordFile: s.Path("passwordFile", ""),
				SlotTTLMs:    s.Int("slotTtlMs", defaultSlotTTLMs, store.Millis(1)),
				TLS:          s.TLS(),
			}
		},
		ClaimAheadMs: defaultClaimAheadMs,
		Open:         open,
		Check:        check,
		Testing:      testServer,
	})
}

func open(ctx context.Context, p store.OpenParams) (claim.Backend, error) {
	c := p.Settings.(Settings)
	tlsConfig, err := store.TLSConfig("rabbitmq", c.TLS)
	if err != nil {
		return nil, err
	}
	return New(ctx, Options{
		URL:           c.URL,
		PasswordFile:  c.PasswordFile,
		TLS:           tlsConfig,
		Namespace:     p.Namespace,
		SlotTTL:       time.Duration(c.SlotTTLMs) * time.Millisecond,
		Instance:      p.Instance,
		HistoryMaxAge: p.Retention,
		Log:           p.Log,
		Clock:         p.Clock,
	})
}

// Describe implements store.Settings.
func (c Settings) Describe() string { return fmt.Sprintf("rabbitmq (%s)", secret.Redact(c.URL)) }

// Leases implements store.Settings: RabbitMQ is claim-only.
func (Settings) Leases() bool { return false }

// Memory implements store.Settings: a gate queue remembers its claim for
// slotTtlMs.
func (c Settings) Memory() []store.Limit { return []store.Limit{{Key: "slotTtlMs", Ms: c.SlotTTLMs}} }
