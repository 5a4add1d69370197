// Package store is the seam between anarchon and the stores it claims
// through. A store is one package: it describes itself in a Driver (its
// crontab section, defaults, validation, head start, how it opens, how the
// test harnesses reach its server) and registers it once, from init. The
// crontab loader, the CLI, the daemon and the harnesses ask the registry;
// none of them names a store. docs/write-a-backend.md walks through one.
package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

// Driver describes one store. Name, Summary, Keys, Parse and Open are
// required.
type Driver struct {
	// Name is the backend.type that selects it, and the name of its
	// section: backend.<Name>.
	Name string
	// Summary is one line for `validate` and the docs: what the store is
	// and when to choose it.
	Summary string
	// Keys are the keys of its section (backend.<Name>.*): the crontab
	// loader refuses others, and each scalar may be overridden by
	// ANARCHON_BACKEND_<NAME>_<KEY>.
	Keys []Key
	// Parse reads the section (defaults, validation with the place of each
	// problem) and returns the settings Open gets. It is called for every
	// registered store, so that a mistake in a section not selected yet is
	// reported too; s.Selected says whether backend.type names this one.
	Parse func(s Section) Settings
	// ClaimAheadMs is the store's built-in claimAheadMs; 0 keeps the
	// general default (100 ms).
	ClaimAheadMs int64
	// Local: the store is a file on this host. Start-up does not wait for
	// it to appear (a path that cannot be opened will not heal); a store
	// reached over the network is retried until it answers.
	Local bool
	// NoControl, when not "", says why the store keeps no control records
	// (claim.NoController): the crontab loader refuses the settings that
	// need them (retry), with this reason.
	NoControl string
	// Open connects, checks the store's version and settings, and
	// migrates its schema where it has one.
	Open func(ctx context.Context, p OpenParams) (claim.Backend, error)
	// Check, if set, is what `validate` asks of the store before opening
	// it, beyond what Open checks; note, when not "", is printed (what
	// the store chose on this server, say).
	Check func(ctx context.Context, s Settings) (note string, err error)
	// Testing says how the test harnesses reach its server; nil for a
	// store that needs none.
	Testing *Testing
}

// Settings is a store's parsed section.
type Settings interface {
	// Describe names the store and where it is, secrets hidden:
	// "redis lease (redis://:xxxxx@cache:6379/0)".
	Describe() string
	// Leases reports whether the store keeps a lease on every running run
	// (a backup takes a run over when its lease ends; overlap: skip is
	// decided against the live lease). A claim-only store remembers that a
	// slot was claimed, not whether its run still runs.
	Leases() bool
	// Memory lists how long a claim-only store remembers a claim; a late
	// claim after that would win again, so every job's maxLate is checked
	// against each limit. Nil for a store that keeps runs until
	// backend.retention prunes them.
	Memory() []Limit
}

// Limit is one bound of a claim-only store's memory of claims.
type Limit struct {
	// Key is the key of the section that sets it ("slotTtlMs").
	Key string
	// Ms is how long a claim is remembered.
	Ms int64
	// Unit is the unit of Key's value: 0 for milliseconds, time.Second
	// for a count of seconds ("durationSec").
	Unit time.Duration
	// MaxClaims, when not 0, is how many claims per job the store
	// remembers within Ms at most; a schedule with more slots in any Ms
	// window is refused, with Fix as the remedy.
	MaxClaims int
	// Fix says what to change when MaxClaims is exceeded.
	Fix string
}

// Value is the key's value as a message shows it: "3600000", or "3600 s"
// for a count of seconds.
func (l Limit) Value() string {
	if l.Unit == time.Second {
		return strconv.FormatInt(l.Ms/1000, 10) + " s"
	}
	return strconv.FormatInt(l.Ms, 10)
}

// OpenParams is what Open gets.
type OpenParams struct {
	Settings Settings
	// Namespace separates clusters sharing one store; Instance names this
	// daemon.
	Namespace, Instance string
	// Retention is backend.retention: how long finished runs are kept.
	Retention time.Duration
	Log       *zap.Logger
	Clock     clock.Clock
}

var (
	mu      sync.RWMutex
	drivers = map[string]*Driver{}
)

// Register makes d available under backend.type d.Name. Store packages
// call it from init; a name registered twice, or a driver without its
// required parts, panics.
func Register(d Driver) {
	if d.Name == "" || d.Summary == "" || d.Parse == nil || d.Open == nil {
		panic(fmt.Sprintf("store: driver %q lacks a name, summary, Parse or Open", d.Name))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := drivers[d.Name]; dup {
		panic(fmt.Sprintf("store: %q registered twice", d.Name))
	}
	drivers[d.Name] = &d
}

// Lookup returns the driver registered as name.
func Lookup(name string) (*Driver, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := drivers[name]
	return d, ok
}

// Drivers returns every registered driver, sorted by name.
func Drivers() []*Driver {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]*Driver, 0, len(drivers))
	for _, d := range drivers {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *Driver) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Names lists the registered backend types, sorted.
func Names() []string {
	ds := Drivers()
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
	}
	return names
}

// Open opens the store typ with p.
func Open(ctx context.Context, typ string, p OpenParams) (claim.Backend, error) {
	d, ok := Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("backend.type %q is not built into this binary (have %v)", typ, Names())
	}
	if p.Log == nil {
		p.Log = zap.NewNop()
	}
	if p.Clock == nil {
		p.Clock = clock.Real{}
	}
	b, err := d.Open(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("open %s backend: %w", typ, err)
	}
	return b, nil
}
