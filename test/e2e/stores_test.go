package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
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
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func stores() []store {
	pgURL := envOr("ANARCHON_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	redisURL := envOr("ANARCHON_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	return []store{
		{name: "sqlite", setup: func(*testscript.Env, string) error { return nil }},
		{
			name: "postgres", server: &testserver.Postgres,
			urlEnv: "ANARCHON_BACKEND_POSTGRES_DSN", url: pgURL,
			setup: func(env *testscript.Env, id string) error {
				schema := "e2e_" + id
				if err := pgExec(pgURL, "CREATE SCHEMA "+schema); err != nil {
					return err
				}
				env.Defer(func() {
					// A daemon killed at a failure may still hold locks for
					// a moment: retry a deadlocked drop.
					var err error
					for range 5 {
						if err = pgExec(pgURL, "DROP SCHEMA "+schema+" CASCADE"); err == nil {
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
		{
			name: "redis", server: &testserver.Redis,
			urlEnv: "ANARCHON_BACKEND_REDIS_URL", url: redisURL,
			setup: func(env *testscript.Env, id string) error {
				ns := "e2e-" + id
				env.Defer(func() {
					if err := redisDeleteNamespace(redisURL, ns); err != nil {
						env.T().Log(err)
					}
				})
				env.Setenv("ANARCHON_BACKEND_TYPE", "redis")
				env.Setenv("ANARCHON_BACKEND_REDIS_URL", redisURL)
				env.Setenv("ANARCHON_BACKEND_REDIS_STRATEGY", "lease")
				env.Setenv("ANARCHON_NAMESPACE", ns)
				return nil
			},
		},
	}
}

// hostPort returns the host:port of a store URL ("" if it has none).
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// withHost returns raw with its host:port replaced.
func withHost(raw, hostport string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = hostport
	return u.String()
}

func randomID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func pgExec(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("postgres: %s: %w", sql, err)
	}
	return nil
}

func redisDeleteNamespace(raw, ns string) error {
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, "*"+ns+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		if strings.Contains(iter.Val(), ns) {
			keys = append(keys, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) > 0 {
		return c.Del(ctx, keys...).Err()
	}
	return nil
}
