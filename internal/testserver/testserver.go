// Package testserver lets a test require a real store. A test that cannot
// reach its server skips locally and fails when ANARCHON_TEST_REQUIRE names
// that server or is "all" (CI sets "all"), saying which server and how to
// start it. No test counts a missing server as a pass.
package testserver

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Server is a store the tests use, on this machine by default.
type Server struct {
	Name  string // as ANARCHON_TEST_REQUIRE names it: postgres, redis, rabbitmq, nats
	Title string
	Addr  string // host:port dialled to see whether it answers
	Start string // the command that starts it
}

// The stores, with the commands .ci/run uses to start them.
var (
	Postgres = Server{"postgres", "PostgreSQL", "127.0.0.1:5432",
		"pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"}
	Redis = Server{"redis", "Redis", "127.0.0.1:6379",
		`redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log`}
	RabbitMQ = Server{"rabbitmq", "RabbitMQ", "127.0.0.1:5672", "rabbitmq-server -detached"}
	NATS     = Server{"nats", "NATS JetStream", "127.0.0.1:4222",
		"start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log"}
)

// Required reports whether ANARCHON_TEST_REQUIRE demands the server.
func (s Server) Required() bool {
	req := os.Getenv("ANARCHON_TEST_REQUIRE")
	return req == "all" || slices.Contains(strings.Split(req, ","), s.Name)
}

// Answering returns nil when the server answers at addr (s.Addr when
// empty), else an error that names it and says how to start it.
func (s Server) Answering(addr string) error {
	if addr == "" {
		addr = s.Addr
	}
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return fmt.Errorf("%s is not answering at %s (%w); start it with:\n    %s", s.Title, addr, err, s.Start)
	}
	return conn.Close()
}

// Require skips or fails t unless the server answers at addr (s.Addr when
// empty). It returns the address it reached.
func (s Server) Require(t testing.TB, addr string) string {
	t.Helper()
	if addr == "" {
		addr = s.Addr
	}
	err := s.Answering(addr)
	if err == nil {
		return addr
	}
	if s.Required() {
		t.Fatalf("%v\n(ANARCHON_TEST_REQUIRE=%s requires it)", err, os.Getenv("ANARCHON_TEST_REQUIRE"))
	}
	t.Skipf("%v\n(set ANARCHON_TEST_REQUIRE=all to make this a failure)", err)
	return ""
}
