package claim

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
)

// OpenParams is what a backend's factory gets to open its store.
type OpenParams struct {
	Config *config.Config
	Log    *zap.Logger
	Clock  clock.Clock
}

// Factory opens a backend from the config; it checks the store is reachable
// and migrates its schema where it has one.
type Factory func(ctx context.Context, p OpenParams) (Backend, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a backend available under backend.type name. Backend
// packages call it from init; registering a name twice panics.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("claim: backend %q registered twice", name))
	}
	registry[name] = f
}

// Types lists the registered backend types, sorted.
func Types() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Open opens the backend named by p.Config.Backend.Type.
func Open(ctx context.Context, p OpenParams) (Backend, error) {
	typ := p.Config.Backend.Type
	registryMu.RLock()
	f, ok := registry[typ]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("backend.type %q is not built into this binary (have %v)", typ, Types())
	}
	if p.Log == nil {
		p.Log = zap.NewNop()
	}
	if p.Clock == nil {
		p.Clock = clock.Real{}
	}
	b, err := f(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("open %s backend: %w", typ, err)
	}
	return b, nil
}
