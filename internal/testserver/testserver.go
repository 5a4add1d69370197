// Package testserver gives the tests and the harnesses (the end-to-end
// scripts, the chaos harness, the bench) the stores they run against, as
// each store describes its test server (store.Driver.Testing): For is one
// store's server, Targets every configuration to run, Target.Isolate one
// test's own place in a store.
//
// A test that cannot reach its server skips locally and fails when
// ANARCHON_TEST_REQUIRE names that server or is "all" (CI sets "all"),
// saying which server and how to start it. No test counts a missing server
// as a pass.
//
// The stores are the registered ones: a harness imports the stores it runs
// (internal/cli imports every store anarchond is built with).
package testserver

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/store"
)

// Server is a store's test server, on this machine by default.
type Server struct {
	Store string // the store's name (store.Driver.Name)
	Name  string // as ANARCHON_TEST_REQUIRE names it: postgres, redis, ...
	Title string
	// URL is the server's address: the value of URLEnv, else the store's
	// default for tests.
	URL    string
	URLEnv string
	// URLKey is the store's section key that holds the address.
	URLKey string
	Addr   string // host:port dialled to see whether it answers
	Start  string // the command that starts it
}

// For returns the test server of the store registered as name. A store
// that is not registered, or needs no server, is the test's mistake: For
// panics.
func For(name string) Server {
	d, ok := store.Lookup(name)
	if !ok {
		panic(fmt.Sprintf("testserver: no store %q is registered (have %v)", name, store.Names()))
	}
	s := serverOf(d)
	if s == nil {
		panic(fmt.Sprintf("testserver: the store %q has no test server", name))
	}
	return *s
}

// serverOf is d's test server; nil when it needs none.
func serverOf(d *store.Driver) *Server {
	t := d.Testing
	if t == nil || t.Require == "" {
		return nil
	}
	u := t.URL
	if v := os.Getenv(t.URLEnv); v != "" && t.URLEnv != "" {
		u = v
	}
	return &Server{Store: d.Name, Name: t.Require, Title: t.Title, URL: u, URLEnv: t.URLEnv, URLKey: t.URLKey,
		Addr: HostPort(u), Start: t.Start}
}

// Servers are the test servers of the registered stores, by store name.
func Servers() []Server {
	var out []Server
	for _, d := range store.Drivers() {
		if s := serverOf(d); s != nil {
			out = append(out, *s)
		}
	}
	return out
}

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
