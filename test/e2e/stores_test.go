package e2e

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	// The stores anarchond is built with register themselves.
	_ "github.com/anarchon/anarchon/internal/cli"
	"github.com/anarchon/anarchon/internal/testserver"
)

// store is a configuration of a registered store the scripts run against
// (testserver.Targets). The scripts' crontabs name sqlite; each script's
// store and its own place in it are selected by ANARCHON_* overrides, so
// one script proves the same behaviour on every store.
type store struct {
	testserver.Target
	// dirs are the script folders under testdata that apply to it.
	dirs []string
	// namesWinner: a lost claim's answer names the winner (lease stores,
	// NATS), so the work spread learns its peers ([peers] in scripts).
	namesWinner bool
}

// The script folders: common to every store; lease (takeover, fencing) for
// lease stores; network (start-up while the store is down) for stores
// reached over the network; resend (claims re-sent through cuts,
// blackholes and delays, exactly once after) for stores that recognise a
// re-sent claim; network-lease (a runner cut off past its lease) for lease
// stores reached over the network.
const (
	dirCommon       = "common"
	dirLease        = "lease"
	dirNetwork      = "network"
	dirResend       = "resend"
	dirNetworkLease = "network-lease"
)

// quirk is what the registry cannot say about a store for these scripts.
type quirk struct {
	// namesWinner: a claim-only store whose answer to a lost claim names
	// the winner.
	namesWinner bool
	// noResend: a claim whose answer is lost is not recognised when it is
	// re-sent.
	noResend bool
}

// quirks are the stores' quirks, by store (variant) name.
var quirks = map[string]quirk{
	// A NATS loser reads the stored claim, whose instance won.
	"nats": {namesWinner: true},
	// A RabbitMQ claim whose answer is lost is skipped (unknown), by
	// design.
	"rabbitmq": {noResend: true},
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// stores are the registered stores' configurations, each with the script
// folders that apply to it.
func stores() ([]store, error) {
	targets, err := testserver.Targets()
	if err != nil {
		return nil, err
	}
	out := make([]store, 0, len(targets))
	for _, t := range targets {
		q := quirks[t.Name]
		leases, network := t.Settings.Leases(), !t.Driver.Local
		st := store{Target: t, dirs: []string{dirCommon}, namesWinner: leases || q.namesWinner}
		if leases {
			st.dirs = append(st.dirs, dirLease)
		}
		if network {
			st.dirs = append(st.dirs, dirNetwork)
		}
		if network && !q.noResend {
			st.dirs = append(st.dirs, dirResend)
		}
		if network && leases {
			st.dirs = append(st.dirs, dirNetworkLease)
		}
		if t.Name == "sqlite" {
			st.dirs = append(st.dirs, dirDashboard)
		}
		out = append(out, st)
	}
	return out, nil
}

// setup gives one script its own place in st (its own table, stream, key
// namespace or file), selects it by ANARCHON_* overrides and registers
// the cleanup that leaves nothing behind.
func (st store) setup(env *testscript.Env, id string) error {
	var place testserver.Place
	err := admin(func(ctx context.Context) error {
		var err error
		place, err = st.Isolate(ctx, st.URL, "e2e_"+id, env.WorkDir)
		return err
	})
	if err != nil {
		return err
	}
	env.Defer(func() {
		if err := admin(place.Cleanup); err != nil {
			env.T().Log(err)
		}
	})
	for _, kv := range place.Env() {
		name, val, _ := strings.Cut(kv, "=")
		env.Setenv(name, val)
	}
	return nil
}

// admin runs one administrative operation on a store, bounded in time (a
// cleanup may retry: a daemon killed a moment ago may still hold locks).
func admin(op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return op(ctx)
}
