package store

import "context"

// Testing says how the test harnesses (the end-to-end scripts, the chaos
// harness, the bench) reach a store's server and keep one test's data
// apart from another's: the one description of a store's test server.
// internal/testserver turns it into what the harnesses use.
//
// Section keys here (Variant.Keys, Isolation.Keys) are named as Section
// names them, relative to the section and dotted below a map:
// "strategy", "strategyOptions.windowMs".
type Testing struct {
	// Require is the server's name in ANARCHON_TEST_REQUIRE ("postgres");
	// "" for a store that needs no server (a file).
	Require string
	// Title names the server in messages ("PostgreSQL").
	Title string
	// URLEnv is the variable that points the tests at another server
	// (ANARCHON_TEST_POSTGRES_DSN), URL the address used without it.
	URLEnv, URL string
	// URLKey is the section key that holds the address ("dsn", "url").
	URLKey string
	// Start is the command that starts the server on this machine.
	Start string
	// Variants are the configurations the harnesses run, each a name
	// ("redis-lease") and the section keys that select it; none: one
	// configuration, named as the store.
	Variants []Variant
	// Isolate gives one test its own place in the store (a schema, a
	// stream, a key namespace) and says how to select and remove it. Nil:
	// the tests share the store as it is.
	Isolate func(ctx context.Context, p IsolateParams) (Isolation, error)
}

// Variant is one configuration of a store the harnesses run.
type Variant struct {
	Name string
	Keys map[string]any
}

// IsolateParams are what Testing.Isolate gets.
type IsolateParams struct {
	URL string // the server's address ("" for a store without one)
	// ID is unique to the test: a letter, then letters, digits and _
	// (at most 40). It may name the test's namespace, schema or stream.
	ID  string
	Dir string // a directory the test owns, for a store that is a file
}

// Isolation is one test's place in a store.
type Isolation struct {
	// Namespace, when not "", is the crontab's namespace to use.
	Namespace string
	// Keys are section keys that select the place (a table, a stream).
	Keys map[string]any
	// Cleanup removes what the test left; nil: nothing to remove.
	Cleanup func(ctx context.Context) error
}
