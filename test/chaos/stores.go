package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	// The stores anarchond is built with register themselves.
	_ "github.com/anarchon/anarchon/internal/cli"
	"github.com/anarchon/anarchon/internal/pgclaim"
	"github.com/anarchon/anarchon/internal/testserver"
)

// backendNames are the rows of the harness: the registered stores'
// configurations (testserver.Targets), as test/e2e and cmd/anarchon-bench
// name them.
var backendNames = testserver.Names()

// storeTimeout bounds one administrative operation on a store.
const storeTimeout = 30 * time.Second

// privateServers start a server of the run's own for a store, in dir, by
// store name: the harness may restart it without disturbing anyone else.
// shared is the shared server's address, for the error.
var privateServers = map[string]func(ctx context.Context, dir, shared string) (*server, error){
	"redis": startRedis,
	"nats":  startNATS,
}

// sharedRestarts restart a store's shared server, by store name, calling
// down just before it stops; they return once it answers at url again.
// Every client of the server sees the restart: the run restarts it only
// when asked to (-store-restart).
var sharedRestarts = map[string]func(ctx context.Context, url string, down func()) error{
	"postgres": restartPostgres,
}

// store is the backend of one run: where it is, its own place in it, and
// how to restart and clean it.
type store struct {
	testserver.Target
	lease bool   // takeover with attempt+1
	url   string // the address of the store itself ("" for a file)
	ns    string // the namespace of the run
	place testserver.Place
	// private is the run's own server; nil: the shared one, or none.
	private *server
	// restarts: the run may restart the store (see setRestart).
	restarts bool
}

// openStore prepares the backend name for a run in dir: it starts a
// private server (when private, for a store the harness can run one of)
// or checks that the shared one answers, and gives the run its own place
// in the store.
func openStore(ctx context.Context, name, dir string, private bool) (*store, error) {
	t, err := testserver.Find(name)
	if err != nil {
		return nil, err
	}
	// Absolute: the crontab's relative paths are the crontab's directory's.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("run directory %s: %w", dir, err)
	}
	id := "chaos_" + testserver.RandomID()
	s := &store{Target: t, lease: t.Settings.Leases(), url: t.URL, ns: id}
	if t.Server != nil {
		if start, ok := privateServers[t.Driver.Name]; ok && private {
			srv, err := start(ctx, filepath.Join(dir, t.Driver.Name), t.URL)
			if err != nil {
				return nil, err
			}
			s.private, s.url = srv, testserver.WithHost(t.URL, srv.addr)
		} else if err := t.Server.Answering(testserver.HostPort(t.URL)); err != nil {
			return nil, err
		}
	}
	if s.place, err = t.Isolate(ctx, s.url, id, abs); err != nil {
		return nil, errors.Join(err, s.stopPrivate())
	}
	s.ns = cmp.Or(s.place.Namespace, id)
	return s, nil
}

// network reports whether the store is reached over TCP (through a fault
// proxy per instance).
func (s *store) network() bool { return !s.Driver.Local }

// addr is the host:port the proxies forward to.
func (s *store) addr() string { return testserver.HostPort(s.url) }

// setRestart decides whether the run restarts the store: on (nil) for a
// private server, which only this run uses; on request (*on) for a shared
// server the harness can restart (sharedRestarts). The others never are.
func (s *store) setRestart(on *bool) {
	switch {
	case s.private != nil:
		s.restarts = on == nil || *on
	case sharedRestarts[s.Driver.Name] != nil:
		s.restarts = on != nil && *on
	}
}

// canRestart reports whether the run may restart the store.
func (s *store) canRestart() bool { return s.restarts }

// backendConfig is the crontab's backend section, with the store reached
// at hostport (an instance's proxy; ignored for a store without a server).
// The claim-only stores whose memory expires remember claims for
// claimRetentionMs.
func (s *store) backendConfig(hostport string) map[string]any {
	extra := map[string]any{}
	if s.network() {
		extra[s.URLKey()] = testserver.WithHost(s.url, hostport)
	}
	for _, lim := range s.Settings.Memory() {
		unitMs := int64(max(lim.Unit, time.Millisecond) / time.Millisecond)
		extra[lim.Key] = claimRetentionMs / unitMs
	}
	return s.place.Backend(extra)
}

// directEnv overrides an instance's crontab so that a command reaches the
// store itself, not the instance's proxy.
func (s *store) directEnv() []string {
	if !s.network() {
		return nil
	}
	return []string{s.URLEnv() + "=" + s.url}
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
	case sharedRestarts[s.Driver.Name] != nil:
		if err := sharedRestarts[s.Driver.Name](ctx, s.url, down); err != nil {
			return err
		}
	default:
		return errors.New("this store is not restarted by the harness")
	}
	up()
	return nil
}

// restartPostgres restarts the local PostgreSQL cluster (fast shutdown)
// and waits until it answers at url.
func restartPostgres(ctx context.Context, url string, down func()) error {
	versions, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(versions) == 0 {
		return fmt.Errorf("postgres restart: no cluster under /etc/postgresql: %v", err) //nolint:errorlint // err is nil when the directory is empty
	}
	down()
	cmd := exec.CommandContext(ctx, "pg_ctlcluster", "--skip-systemctl-redirect", versions[0].Name(), "main", "restart", "-m", "fast")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("postgres restart: %w: %s", err, out)
	}
	if err := await(ctx, storeTimeout, func(ctx context.Context) error { return pgclaim.Exec(ctx, url, "SELECT 1") }); err != nil {
		return fmt.Errorf("postgres after its restart: %w", err)
	}
	return nil
}

// cleanup removes the run's place from the store (the private server's
// data stays in the run directory) unless keep, and stops the private
// server.
func (s *store) cleanup(keep bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*storeTimeout)
	defer cancel()
	var err error
	if !keep {
		err = s.place.Cleanup(ctx)
	}
	return errors.Join(err, s.stopPrivate())
}

// stopPrivate stops the private server, if any.
func (s *store) stopPrivate() error {
	if s.private == nil {
		return nil
	}
	return s.private.stop()
}

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
