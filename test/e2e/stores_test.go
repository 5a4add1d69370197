package e2e

import (
	"context"
	"os"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/anarchon/anarchon/internal/testserver"
)

// store is a backend the scripts run against. The scripts' crontabs name
// sqlite; the other stores are selected by ANARCHON_* overrides, so one
// script proves the same behaviour on every backend.
type store struct {
	name   string
	server *testserver.Server // nil: no server (sqlite)
	// urlEnv is the override that holds the store's address, and url the
	// store's URL; the fault proxy rewrites the URL's host.
	urlEnv string
	url    string
	// setup isolates one script (its own table or key namespace) and
	// registers the cleanup that leaves nothing behind.
	setup func(env *testscript.Env, id string) error
	// dirs are the script folders under testdata that apply to it.
	dirs []string
	// namesWinner: a lost claim's answer names the winner (lease stores,
	// NATS), so the work spread learns its peers ([peers] in scripts).
	namesWinner bool
}

// The script folders: common to every store; lease (takeover, fencing) for
// lease backends; network (start-up while the store is down) for stores
// reached over the network; resend (claims re-sent through cuts,
// blackholes and delays, exactly once after) for stores that recognise a
// re-sent claim; network-lease (a runner cut off past its lease).
var (
	leaseDirs      = []string{"common", "lease", "network", "resend", "network-lease"}
	claimOnlyDirs  = []string{"common", "network", "resend"}
	rabbitmqDirs   = []string{"common", "network"} // a claim whose answer is lost is skipped (unknown), by design
	localLeaseDirs = []string{"common", "lease"}
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func stores() []store {
	pgURL := envOr("ANARCHON_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	redisURL := envOr("ANARCHON_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	natsURL := envOr("ANARCHON_TEST_NATS_URL", "nats://127.0.0.1:4222")
	rabbitURL := envOr("ANARCHON_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
	return []store{
		{name: "sqlite", dirs: localLeaseDirs, namesWinner: true, setup: func(*testscript.Env, string) error { return nil }},
		{
			name: "postgres", server: &testserver.Postgres, dirs: leaseDirs, namesWinner: true,
			urlEnv: "ANARCHON_BACKEND_POSTGRES_DSN", url: pgURL,
			setup: func(env *testscript.Env, id string) error {
				schema := "e2e_" + id
				if err := admin(func(ctx context.Context) error { return testserver.PostgresExec(ctx, pgURL, "CREATE SCHEMA "+schema) }); err != nil {
					return err
				}
				env.Defer(func() {
					// A daemon killed at a failure may still hold locks for
					// a moment: retry a deadlocked drop.
					var err error
					for range 5 {
						if err = admin(func(ctx context.Context) error {
							return testserver.PostgresExec(ctx, pgURL, "DROP SCHEMA "+schema+" CASCADE")
						}); err == nil {
							return
						}
						time.Sleep(time.Second)
					}
					env.T().Log(err)
				})
				env.Setenv("ANARCHON_BACKEND_TYPE", "postgres")
				env.Setenv("ANARCHON_BACKEND_POSTGRES_DSN", pgURL)
				env.Setenv("ANARCHON_BACKEND_POSTGRES_TABLE", schema+".runs")
				return nil
			},
		},
		redisStore(redisURL, "lease", leaseDirs),
		redisStore(redisURL, "stream-id", claimOnlyDirs),
		redisStore(redisURL, "script", claimOnlyDirs),
		redisStore(redisURL, "auto", claimOnlyDirs),
		{
			name: "nats", server: &testserver.NATS, dirs: claimOnlyDirs, namesWinner: true,
			urlEnv: "ANARCHON_BACKEND_NATS_URL", url: natsURL,
			setup: func(env *testscript.Env, id string) error {
				stream := "E2E_" + id
				env.Defer(func() {
					if err := admin(func(ctx context.Context) error { return testserver.DeleteNATSStream(ctx, natsURL, stream) }); err != nil {
						env.T().Log(err)
					}
				})
				env.Setenv("ANARCHON_BACKEND_TYPE", "nats")
				env.Setenv("ANARCHON_BACKEND_NATS_URL", natsURL)
				env.Setenv("ANARCHON_BACKEND_NATS_STREAM", stream)
				env.Setenv("ANARCHON_NAMESPACE", "e2e-"+id)
				return nil
			},
		},
		{
			name: "rabbitmq", server: &testserver.RabbitMQ, dirs: rabbitmqDirs,
			urlEnv: "ANARCHON_BACKEND_RABBITMQ_URL", url: rabbitURL,
			setup: func(env *testscript.Env, id string) error {
				ns := "e2e-" + id
				env.Defer(func() {
					// Gate queues expire after slotTtlMs; the history
					// stream does not.
					if err := testserver.DeleteRabbitQueuesAt(rabbitURL, ns+".history"); err != nil {
						env.T().Log(err)
					}
				})
				env.Setenv("ANARCHON_BACKEND_TYPE", "rabbitmq")
				env.Setenv("ANARCHON_BACKEND_RABBITMQ_URL", rabbitURL)
				env.Setenv("ANARCHON_BACKEND_RABBITMQ_SLOTTTLMS", "120000")
				env.Setenv("ANARCHON_NAMESPACE", ns)
				return nil
			},
		},
	}
}

// redisStore is Redis with one claim strategy, on its own key namespace.
func redisStore(url, strategy string, dirs []string) store {
	return store{
		name: "redis-" + strategy, server: &testserver.Redis, dirs: dirs, namesWinner: strategy == "lease",
		urlEnv: "ANARCHON_BACKEND_REDIS_URL", url: url,
		setup: func(env *testscript.Env, id string) error {
			ns := "e2e-" + id
			env.Defer(func() {
				if err := admin(func(ctx context.Context) error { return testserver.DeleteRedisNamespaceAt(ctx, url, ns) }); err != nil {
					env.T().Log(err)
				}
			})
			env.Setenv("ANARCHON_BACKEND_TYPE", "redis")
			env.Setenv("ANARCHON_BACKEND_REDIS_URL", url)
			env.Setenv("ANARCHON_BACKEND_REDIS_STRATEGY", strategy)
			env.Setenv("ANARCHON_NAMESPACE", ns)
			return nil
		},
	}
}

// admin runs one administrative operation on a store, bounded in time.
func admin(op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return op(ctx)
}
