package testserver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/store"
)

// Target is one configuration of a registered store that the harnesses
// run: a variant of it (store.Testing.Variants), or the store as it is
// when it has none.
type Target struct {
	// Name is the variant's ("redis-lease"), or the store's.
	Name   string
	Driver *store.Driver
	// Keys are the section keys that select the variant.
	Keys map[string]any
	// Server is the store's test server; nil for a store that needs none
	// (a file).
	Server *Server
	// URL is the server's address ("" without a server).
	URL string
	// Settings are the section with Keys and URL, as the store parses it:
	// whether the variant keeps leases, what it remembers.
	Settings store.Settings
}

// Targets are the configurations of every registered store that
// describes its tests (store.Driver.Testing), by store name, each store's
// variants in its order.
func Targets() ([]Target, error) {
	var out []Target
	for _, d := range store.Drivers() {
		for _, t := range targetsOf(d) {
			st, err := parse(t.Driver.Name, t.sectionKeys(t.URL, nil))
			if err != nil {
				return nil, fmt.Errorf("the section of %s: %w", t.Name, err)
			}
			t.Settings = st
			out = append(out, t)
		}
	}
	return out, nil
}

// targetsOf are d's targets, without their settings.
func targetsOf(d *store.Driver) []Target {
	if d.Testing == nil {
		return nil
	}
	variants := d.Testing.Variants
	if len(variants) == 0 {
		variants = []store.Variant{{Name: d.Name}}
	}
	srv := serverOf(d)
	out := make([]Target, 0, len(variants))
	for _, v := range variants {
		t := Target{Name: v.Name, Driver: d, Keys: v.Keys, Server: srv}
		if srv != nil {
			t.URL = srv.URL
		}
		out = append(out, t)
	}
	return out
}

// Names are the names of Targets, in their order.
func Names() []string {
	var names []string
	for _, d := range store.Drivers() {
		for _, t := range targetsOf(d) {
			names = append(names, t.Name)
		}
	}
	return names
}

// Find returns the target named name.
func Find(name string) (Target, error) {
	ts, err := Targets()
	if err != nil {
		return Target{}, err
	}
	for _, t := range ts {
		if t.Name == name {
			return t, nil
		}
	}
	return Target{}, fmt.Errorf("unknown store %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// URLKey is the section key that holds the server's address ("" for a
// store without a server).
func (t Target) URLKey() string {
	if t.Server == nil {
		return ""
	}
	return t.Server.URLKey
}

// URLEnv is the ANARCHON_* variable that overrides the crontab's address
// of the server ("" for a store without a server).
func (t Target) URLEnv() string {
	if t.URLKey() == "" {
		return ""
	}
	return envName(t.Driver.Name, t.URLKey())
}

// Isolate gives one test its own place in t's store, on the server at url
// (t.URL, or a server of the harness's own): id is unique to the test (a
// letter, then letters, digits and _), dir a directory it owns. Place's
// Cleanup removes it.
func (t Target) Isolate(ctx context.Context, url, id, dir string) (Place, error) {
	var iso store.Isolation
	if f := t.Driver.Testing.Isolate; f != nil {
		var err error
		iso, err = f(ctx, store.IsolateParams{URL: url, ID: id, Dir: dir})
		if err != nil {
			return Place{}, fmt.Errorf("%s: isolate %s: %w", t.Name, id, err)
		}
	}
	return Place{Target: t, URL: url, Namespace: iso.Namespace, Keys: t.sectionKeys(url, iso.Keys), cleanup: iso.Cleanup}, nil
}

// sectionKeys are t's keys, the address url and then more.
func (t Target) sectionKeys(url string, more map[string]any) map[string]any {
	keys := maps.Clone(t.Keys)
	if keys == nil {
		keys = map[string]any{}
	}
	if k := t.URLKey(); k != "" && url != "" {
		keys[k] = url
	}
	maps.Copy(keys, more)
	return keys
}

// Place is one test's own place in a store.
type Place struct {
	Target Target
	// URL is the server's address the place is on.
	URL string
	// Namespace is the crontab's namespace to use; "": any.
	Namespace string
	// Keys are the section's keys: the variant's, the address and the
	// isolation's.
	Keys    map[string]any
	cleanup func(ctx context.Context) error
}

// Cleanup removes what the test left in the store.
func (p Place) Cleanup(ctx context.Context) error {
	if p.cleanup == nil {
		return nil
	}
	if err := p.cleanup(ctx); err != nil {
		return fmt.Errorf("%s: clean up: %w", p.Target.Name, err)
	}
	return nil
}

// Backend is the crontab's backend block that selects the place, with
// extra section keys over its own (the address of a proxy, say).
func (p Place) Backend(extra map[string]any) map[string]any {
	keys := maps.Clone(p.Keys)
	maps.Copy(keys, extra)
	return backendBlock(p.Target.Driver.Name, keys)
}

// Env are the ANARCHON_* overrides ("NAME=value") that select the place in
// any crontab: the backend type, the namespace and the section's keys.
func (p Place) Env() []string {
	name := p.Target.Driver.Name
	env := []string{"ANARCHON_BACKEND_TYPE=" + name}
	if p.Namespace != "" {
		env = append(env, "ANARCHON_NAMESPACE="+p.Namespace)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Keys)) {
		env = append(env, envName(name, k)+"="+fmt.Sprint(p.Keys[k]))
	}
	return env
}

// envName is the variable that overrides key of the section of store:
// ANARCHON_BACKEND_<STORE>_<KEY>, a dotted key's "." as "_".
func envName(store, key string) string {
	return "ANARCHON_BACKEND_" + strings.ToUpper(store+"_"+strings.ReplaceAll(key, ".", "_"))
}

// backendBlock is the crontab's backend block for the store name with the
// section keys (dotted keys nested as maps).
func backendBlock(name string, keys map[string]any) map[string]any {
	section := map[string]any{}
	for k, v := range keys {
		m := section
		parts := strings.Split(k, ".")
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = v
	}
	return map[string]any{"type": name, name: section}
}

// parse reads the section of the store name with keys as the crontab
// loader does, the environment aside.
func parse(name string, keys map[string]any) (store.Settings, error) {
	data, err := yaml.Marshal(map[string]any{"backend": backendBlock(name, keys), "jobs": []any{}})
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse("(test server)", data, config.LoadOptions{Environ: []string{}})
	if err != nil {
		return nil, err
	}
	return cfg.Backend.Store, nil
}
