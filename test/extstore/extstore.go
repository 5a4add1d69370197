// Package extstore is the worked example of docs/write-a-backend.md: a
// store added as one package that registers itself. Its store, "memory",
// keeps runs in this process (the lease backend of
// internal/claim/memclaim), one set of runs per backend.memory.name shared
// by every opening, so that `status` sees what `run` did in the same
// process. It is for tests: no anarchond is built with it.
package extstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/store"
)

// Settings are backend.memory.
type Settings struct {
	// Name selects one set of runs of the process.
	Name string
}

// defaultName is backend.memory.name's default.
const defaultName = "default"

func init() {
	store.Register(store.Driver{
		Name:    "memory",
		Summary: "memory: runs kept in this process only, for tests; leases",
		Keys:    []store.Key{{Name: "name", Kind: store.String}},
		Parse: func(s store.Section) store.Settings {
			return Settings{Name: s.String("name", defaultName, store.Matches(store.NamePattern, "store name", store.NameLike))}
		},
		// Nothing to wait for at start-up: the store is in the process.
		Local: true,
		Open: func(_ context.Context, p store.OpenParams) (claim.Backend, error) {
			return open(p.Settings.(Settings).Name, p.Clock), nil
		},
		Testing: &store.Testing{
			// No server; each test gets a set of runs of its own.
			Isolate: func(_ context.Context, p store.IsolateParams) (store.Isolation, error) {
				return store.Isolation{
					Keys:    map[string]any{"name": p.ID},
					Cleanup: func(context.Context) error { forget(p.ID); return nil },
				}, nil
			},
		},
	})
}

// Describe implements store.Settings.
func (s Settings) Describe() string { return fmt.Sprintf("memory (%s)", s.Name) }

// Leases implements store.Settings: memclaim keeps a lease on every run.
func (Settings) Leases() bool { return true }

// Memory implements store.Settings: runs are kept until backend.retention
// prunes them.
func (Settings) Memory() []store.Limit { return nil }

var (
	mu   sync.Mutex
	sets = map[string]*memclaim.Backend{}
)

// open returns the set of runs called name, made on first use with store
// time from c. Its Close does nothing: the runs outlive every opening.
func open(name string, c clock.Clock) *memclaim.Backend {
	mu.Lock()
	defer mu.Unlock()
	b := sets[name]
	if b == nil {
		b = memclaim.New(c)
		sets[name] = b
	}
	return b
}

// forget drops the set of runs called name.
func forget(name string) {
	mu.Lock()
	defer mu.Unlock()
	delete(sets, name)
}
