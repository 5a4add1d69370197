package store

import "context"

// Testing says how the test harnesses (the e2e suite, the chaos harness,
// the bench) reach a store's server and keep one test's data apart from
// another's: the one description of a store's test server.
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
	// stream, a key namespace) and says how to select and remove it.
	Isolate func(ctx context.Context, p IsolateParams) (Isolation, error)
}

// Variant is one configuration of a store the harnesses run.
type Variant struct {
	Name string
	Keys map[string]any
}

// IsolateParams are what Testing.Isolate gets.
type IsolateParams struct {
	URL string // the server's address
	ID  string // unique to the test: letters, digits and _
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
