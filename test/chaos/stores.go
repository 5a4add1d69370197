package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/anarchon/anarchon/internal/testserver"
)

// backendNames are the rows of the harness, as test/e2e and
// cmd/anarchon-bench name them.
var backendNames = []string{
	"sqlite", "postgres", "redis-lease", "redis-stream-id", "redis-script",
	"redis-auto", "nats", "rabbitmq",
}

// The shared servers, from the same variables and defaults as the tests.
var (
	pgDSN     = envOr("ANARCHON_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	redisURL  = envOr("ANARCHON_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	natsURL   = envOr("ANARCHON_TEST_NATS_URL", "nats://127.0.0.1:4222")
	rabbitURL = envOr("ANARCHON_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
)

// The shared servers by kind, with the commands .ci/run starts them with.
var servers = map[string]testserver.Server{
	"postgres": testserver.Postgres, "redis": testserver.Redis,
	"rabbitmq": testserver.RabbitMQ, "nats": testserver.NATS,
}

// storeTimeout bounds one administrative operation on a store.
const storeTimeout = 30 * time.Second

// store is the backend of one run: where it is, its isolated namespace,
// and how to restart and clean it.
type store struct {
	name     string // the row: sqlite, postgres, redis-lease, ...
	kind     string // backend.type: sqlite, postgres, redis, nats, rabbitmq
	strategy string // redis only
	lease    bool   // takeover with attempt+1
	url      string // URL or DSN of the store itself ("" for sqlite)
	ns       string // namespace of the run (also names the table or stream)
	dir      string // the run directory
	private  *server
	// restarts: the run may restart the store (see setRestart).
	restarts bool
}

// openStore prepares the backend name for a run in dir: it starts a
// private server (redis-*, nats, when private) or checks that the shared
// one answers, and creates the run's namespace where the store needs one.
func openStore(ctx context.Context, name, dir string, private bool) (*store, error) {
	id := testserver.RandomID()
	// Absolute: the crontab's relative paths are the crontab's directory's.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("run directory %s: %w", dir, err)
	}
	s := &store{name: name, dir: abs, ns: "chaos-" + id}
	switch {
	case name == "sqlite":
		s.kind, s.lease = "sqlite", true
		return s, nil
	case name == "postgres":
		s.kind, s.lease, s.url = "postgres", true, pgDSN
		if err := reachable("postgres", testserver.HostPort(pgDSN)); err != nil {
			return nil, err
		}
		if err := testserver.PostgresExec(ctx, pgDSN, "CREATE SCHEMA "+pgSchema(s.ns)); err != nil {
			return nil, err
		}
		return s, nil
	case strings.HasPrefix(name, "redis-"):
		s.kind, s.strategy, s.url = "redis", strings.TrimPrefix(name, "redis-"), redisURL
		s.lease = s.strategy == "lease"
		if !private {
			return s, reachable("redis", testserver.HostPort(redisURL))
		}
		srv, err := startRedis(ctx, filepath.Join(dir, "redis"))
		if err != nil {
			return nil, err
		}
		s.private, s.url = srv, "redis://"+srv.addr+"/0"
		return s, nil
	case name == "nats":
		s.kind, s.url = "nats", natsURL
		if !private {
			return s, reachable("nats", testserver.HostPort(natsURL))
		}
		srv, err := startNATS(ctx, filepath.Join(dir, "nats"))
		if err != nil {
			return nil, err
		}
		s.private, s.url = srv, "nats://"+srv.addr
		return s, nil
	case name == "rabbitmq":
		s.kind, s.url = "rabbitmq", rabbitURL
		return s, reachable("rabbitmq", testserver.HostPort(rabbitURL))
	}
	return nil, fmt.Errorf("unknown backend %q (want one of %s)", name, strings.Join(backendNames, ", "))
}

// network reports whether the store is reached over TCP (through a fault
// proxy per instance).
func (s *store) network() bool { return s.kind != "sqlite" }

// addr is the host:port the proxies forward to.
func (s *store) addr() string { return testserver.HostPort(s.url) }

// setRestart decides whether the run restarts the store: on (nil) for a
// private server, which only this run uses; on request (*on) for
// PostgreSQL, whose shared cluster every client sees restart. SQLite has
// no server; RabbitMQ takes minutes to restart and never is.
func (s *store) setRestart(on *bool) {
	switch {
	case s.private != nil:
		s.restarts = on == nil || *on
	case s.kind == "postgres":
		s.restarts = on != nil && *on
	}
}

// canRestart reports whether the run may restart the store.
func (s *store) canRestart() bool { return s.restarts }

// backendConfig is the crontab's backend section, with the store reached
// at hostport (an instance's proxy; ignored for sqlite).
func (s *store) backendConfig(hostport string) map[string]any {
	b := map[string]any{"type": s.kind}
	switch s.kind {
	case "sqlite":
		b["sqlite"] = map[string]any{"path": filepath.Join(s.dir, "anarchon.db"), "busyTimeoutMs": 5000}
	case "postgres":
		b["postgres"] = map[string]any{"dsn": testserver.WithHost(s.url, hostport), "table": pgSchema(s.ns) + ".runs"}
	case "redis":
		b["redis"] = map[string]any{"url": testserver.WithHost(s.url, hostport), "strategy": s.strategy,
			"strategyOptions": map[string]any{"windowMs": claimRetentionMs, "durationSec": claimRetentionMs / 1000}}
	case "nats":
		b["nats"] = map[string]any{"url": testserver.WithHost(s.url, hostport), "stream": natsStream(s.ns), "duplicateWindowMs": claimRetentionMs}
	case "rabbitmq":
		b["rabbitmq"] = map[string]any{"url": testserver.WithHost(s.url, hostport), "slotTtlMs": claimRetentionMs}
	}
	return b
}

// directEnv overrides an instance's crontab so that a command reaches the
// store itself, not the instance's proxy.
func (s *store) directEnv() []string {
	if !s.network() {
		return nil
	}
	return []string{"ANARCHON_BACKEND_" + strings.ToUpper(s.kind) + urlKey(s.kind) + "=" + s.url}
}

func urlKey(kind string) string {
	if kind == "postgres" {
		return "_DSN"
	}
	return "_URL"
}

// restart stops the store and starts it again, calling down just before
// it stops and up once it answers again.
func (s *store) restart(ctx context.Context, down, up func()) error {
	switch {
	case s.private != nil:
		down()
		if err := s.private.stop(); err != nil {
			return err
		}
		if err := s.private.start(ctx); err != nil {
			return err
		}
		up()
		return nil
	case s.kind == "postgres":
		versions, err := os.ReadDir("/etc/postgresql")
		if err != nil || len(versions) == 0 {
			return fmt.Errorf("postgres restart: no cluster under /etc/postgresql: %v", err) //nolint:errorlint // err is nil when the directory is empty
		}
		down()
		cmd := exec.CommandContext(ctx, "pg_ctlcluster", "--skip-systemctl-redirect", versions[0].Name(), "main", "restart", "-m", "fast")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("postgres restart: %w: %s", err, out)
		}
		if err := await(ctx, storeTimeout, func(ctx context.Context) error { return testserver.PostgresExec(ctx, s.url, "SELECT 1") }); err != nil {
			return fmt.Errorf("postgres after its restart: %w", err)
		}
		up()
		return nil
	}
	return errors.New("this store is not restarted by the harness")
}

// cleanup removes the run's namespace from the store (the private
// server's data stays in the run directory) unless keep, and stops the
// private server.
func (s *store) cleanup(keep bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var err error
	if !keep {
		switch s.kind {
		case "postgres":
			// A daemon killed a moment ago may still hold locks: retry.
			for range 5 {
				if err = testserver.PostgresExec(ctx, s.url, "DROP SCHEMA "+pgSchema(s.ns)+" CASCADE"); err == nil {
					break
				}
				time.Sleep(time.Second)
			}
		case "redis":
			err = testserver.DeleteRedisNamespaceAt(ctx, s.url, s.ns)
		case "nats":
			err = testserver.DeleteNATSStream(ctx, s.url, natsStream(s.ns))
		case "rabbitmq":
			// The gate queues expire after slotTtlMs; the history does not.
			err = testserver.DeleteRabbitQueuesAt(s.url, s.ns+".history")
		}
		if err != nil {
			err = fmt.Errorf("clean %s namespace %s: %w", s.name, s.ns, err)
		}
	}
	if s.private != nil {
		err = errors.Join(err, s.private.stop())
	}
	return err
}

// pgSchema is the PostgreSQL schema of a namespace (identifiers: no "-").
func pgSchema(ns string) string { return strings.ReplaceAll(ns, "-", "_") }

// natsStream is the JetStream stream of a namespace.
func natsStream(ns string) string { return strings.ToUpper(strings.ReplaceAll(ns, "-", "_")) }

// reachable checks that the shared server named kind answers at addr; if
// not, the error says how to start it.
func reachable(kind, addr string) error { return servers[kind].Answering(addr) }

// permanent is an error of await's try that no retry can fix.
type permanent struct{ error }

// await calls try until it succeeds, fails with a permanent error, or d
// has passed; it returns the last error then.
func await(ctx context.Context, d time.Duration, try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
		err := try(tctx)
		tcancel()
		if err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) {
			return p.error
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
