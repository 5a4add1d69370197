package testserver_test

import (
	"reflect"
	"slices"
	"testing"

	// The stores anarchond is built with register themselves.
	_ "github.com/anarchon/anarchon/internal/cli"
	"github.com/anarchon/anarchon/internal/testserver"
)

// Every registered store is a target, a store with variants once per
// variant, each with its settings as the store parses them.
func TestTargets(t *testing.T) {
	targets, err := testserver.Targets()
	if err != nil {
		t.Fatal(err)
	}
	leases := map[string]bool{}
	for _, tg := range targets {
		leases[tg.Name] = tg.Settings.Leases()
		if (tg.Server == nil) != tg.Driver.Local {
			t.Errorf("%s: server %v, local %v: a store without a server is a file here", tg.Name, tg.Server, tg.Driver.Local)
		}
	}
	want := map[string]bool{
		"sqlite": true, "postgres": true, "redis-lease": true, "redis-stream-id": false,
		"redis-script": false, "redis-auto": false, "nats": false, "rabbitmq": false,
	}
	if !reflect.DeepEqual(leases, want) {
		t.Errorf("targets (name: leases) %v, want %v", leases, want)
	}
	if names := testserver.Names(); len(names) != len(targets) || !slices.Contains(names, "redis-auto") {
		t.Errorf("Names() = %v", names)
	}
	if _, err := testserver.Find("redis"); err == nil {
		t.Error(`Find("redis"): a store with variants is found by its variants' names only`)
	}
}

// A place is selected by a crontab's backend block or by ANARCHON_*
// overrides: the type, the namespace, the variant's keys, the address and
// the isolation's keys, dotted keys nested in the block.
func TestPlace(t *testing.T) {
	tg, err := testserver.Find("redis-script")
	if err != nil {
		t.Fatal(err)
	}
	const url = "redis://127.0.0.1:1/0"
	p, err := tg.Isolate(t.Context(), url, "t_1", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := []string{
		"ANARCHON_BACKEND_TYPE=redis", "ANARCHON_NAMESPACE=t_1",
		"ANARCHON_BACKEND_REDIS_STRATEGY=script", "ANARCHON_BACKEND_REDIS_URL=" + url,
	}
	if got := p.Env(); !slices.Equal(got, wantEnv) {
		t.Errorf("Env() = %q, want %q", got, wantEnv)
	}
	got := p.Backend(map[string]any{"strategyOptions.windowMs": 5})
	want := map[string]any{"type": "redis", "redis": map[string]any{
		"strategy": "script", "url": url, "strategyOptions": map[string]any{"windowMs": 5},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Backend() = %v, want %v", got, want)
	}
	if tg.URLEnv() != "ANARCHON_BACKEND_REDIS_URL" || tg.URLKey() != "url" {
		t.Errorf("URLEnv %q, URLKey %q", tg.URLEnv(), tg.URLKey())
	}
}

// For is a store's test server, as its driver describes it; the address
// comes from the server's ANARCHON_TEST_* variable when it is set.
func TestFor(t *testing.T) {
	t.Setenv("ANARCHON_TEST_NATS_URL", "nats://10.0.0.1:4333")
	s := testserver.For("nats")
	if s.Name != "nats" || s.URL != "nats://10.0.0.1:4333" || s.Addr != "10.0.0.1:4333" || s.Start == "" {
		t.Errorf("For(nats) = %+v", s)
	}
	defer func() {
		if recover() == nil {
			t.Error(`For("sqlite"): no panic for a store without a server`)
		}
	}()
	testserver.For("sqlite")
}
