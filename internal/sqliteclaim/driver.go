package sqliteclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/store"
)

// Settings are backend.sqlite.
type Settings struct {
	Path        string
	BusyTimeout time.Duration
}

// Section defaults.
const (
	defaultPath          = "/var/lib/anarchon/anarchon.db"
	defaultBusyTimeoutMs = 5000
)

func init() {
	store.Register(store.Driver{
		Name:    "sqlite",
		Summary: "SQLite: a file on one host, for a single instance (or several on the same host); leases",
		Keys: []store.Key{
			{Name: "path", Kind: store.String},
			{Name: "busyTimeoutMs", Kind: store.Int},
		},
		Parse: func(s store.Section) store.Settings {
			return Settings{
				Path:        s.Path("path", defaultPath),
				BusyTimeout: time.Duration(s.Int("busyTimeoutMs", defaultBusyTimeoutMs, store.Millis(0))) * time.Millisecond,
			}
		},
		Local: true,
		Open: func(ctx context.Context, p store.OpenParams) (claim.Backend, error) {
			c := p.Settings.(Settings)
			return New(ctx, Options{Path: c.Path, BusyTimeout: c.BusyTimeout, Log: p.Log})
		},
		Testing: &store.Testing{
			Isolate: func(_ context.Context, p store.IsolateParams) (store.Isolation, error) {
				return store.Isolation{Keys: map[string]any{"path": p.Dir + "/anarchon.db"}}, nil
			},
		},
	})
}

// Describe implements store.Settings.
func (s Settings) Describe() string { return fmt.Sprintf("sqlite (%s)", s.Path) }

// Leases implements store.Settings: SQLite keeps a lease on every run.
func (Settings) Leases() bool { return true }

// Memory implements store.Settings: finished runs are kept until
// backend.retention prunes them.
func (Settings) Memory() []store.Limit { return nil }
