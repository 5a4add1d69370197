package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/testserver"
	"github.com/jackc/pgx/v5"
)

// Database is the database every server of a cluster has for the test.
const Database = "anarchon"

// Cluster is a primary and its standbys, under one temporary directory
// that the test's end removes, after stopping every server.
type Cluster struct {
	t       testing.TB
	bin     string
	own     *owner
	dir     string
	servers []*Server
}

// Server is one postmaster of a cluster.
type Server struct {
	c    *Cluster
	Name string
	Port int
	data string
	log  string
}

// NewCluster prepares a cluster's directory; Primary starts its first
// server.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := Require(t)
	own, _ := runAs()
	dir, err := os.MkdirTemp("", "anarchon-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := own.chown(dir); err != nil {
		t.Fatalf("give %s to the postgres user: %v", dir, err)
	}
	c := &Cluster{t: t, bin: bin, own: own, dir: dir}
	t.Cleanup(c.remove)
	return c
}

// remove stops every server at once (immediate: nothing to keep) and
// deletes the directory.
func (c *Cluster) remove() {
	for _, s := range c.servers {
		_ = c.own.command(c.bin, "pg_ctl", "stop", "-D", s.data, "-m", "immediate", "-w", "-t", "30").Run()
	}
	if c.t.Failed() {
		for _, s := range c.servers {
			if b, err := os.ReadFile(s.log); err == nil {
				c.t.Logf("server log of %s (port %d):\n%s", s.Name, s.Port, tail(b, 4000))
			}
		}
	}
	_ = os.RemoveAll(c.dir)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// run runs a server program as the servers' owner; its output is in the
// error.
func (c *Cluster) run(name string, args ...string) error {
	cmd := c.own.command(c.bin, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, tail(out.Bytes(), 4000))
	}
	return nil
}

// conf is what every server adds to its postgresql.conf. fsync is off:
// the tests kill processes, never the machine, and the kernel keeps what
// a killed process wrote.
const conf = `
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = ''
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
fsync = off
shared_buffers = 16MB
max_connections = 200
log_min_messages = warning
`

// newServer reserves a port and a data directory for name.
func (c *Cluster) newServer(name string) (*Server, error) {
	ports, err := testserver.FreePorts(1)
	if err != nil {
		return nil, err
	}
	port := ports[0]
	s := &Server{c: c, Name: name, Port: port, data: filepath.Join(c.dir, name), log: filepath.Join(c.dir, name+".log")}
	return s, nil
}

// appendConf adds text to one of s's configuration files.
func (s *Server) appendConf(file, text string) error {
	f, err := os.OpenFile(filepath.Join(s.data, file), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Primary initialises and starts the cluster's primary, with the
// database Database.
func (c *Cluster) Primary(name string) *Server {
	c.t.Helper()
	s, err := c.newServer(name)
	if err == nil {
		err = c.run("initdb", "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	}
	if err == nil {
		err = s.appendConf("postgresql.conf", fmt.Sprintf(conf, s.Port))
	}
	if err == nil {
		err = s.start()
	}
	if err == nil {
		err = s.createDatabase()
	}
	if err != nil {
		c.t.Fatalf("start the primary %s: %v", name, err)
	}
	return s
}

// Standby copies primary with pg_basebackup -R (a replication slot of
// its name) and starts it streaming; primary_conninfo names it
// application_name=name, as synchronous_standby_names does.
func (c *Cluster) Standby(primary *Server, name string) *Server {
	c.t.Helper()
	s, err := c.newServer(name)
	if err == nil {
		err = c.run("pg_basebackup", "-D", s.data, "-h", "127.0.0.1", "-p", fmt.Sprint(primary.Port), "-U", "postgres",
			"-R", "-X", "stream", "-C", "-S", name, "--no-sync", "--checkpoint=fast")
	}
	if err == nil {
		err = s.appendConf("postgresql.conf", fmt.Sprintf("port = %d\n", s.Port))
	}
	if err == nil {
		err = s.appendConf("postgresql.auto.conf", fmt.Sprintf(
			"primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'\n", primary.Port, name))
	}
	if err == nil {
		err = s.start()
	}
	if err == nil {
		err = primary.AwaitStandby(context.Background(), name, false)
	}
	if err != nil {
		c.t.Fatalf("start the standby %s of %s: %v", name, primary.Name, err)
	}
	return s
}

// start starts s and waits until it accepts connections.
func (s *Server) start() error {
	s.c.servers = append(s.c.servers, s)
	return s.c.run("pg_ctl", "start", "-D", s.data, "-l", s.log, "-w", "-t", "60")
}

// Addr is s's host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// DSN is a key=value DSN of the database Database on s alone.
func (s *Server) DSN() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", s.Port, Database)
}

// MultiDSN is a key=value DSN naming every server given, in that order.
func MultiDSN(servers ...*Server) string {
	hosts, ports := "", ""
	for i, s := range servers {
		if i > 0 {
			hosts, ports = hosts+",", ports+","
		}
		hosts, ports = hosts+"127.0.0.1", ports+fmt.Sprint(s.Port)
	}
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable", hosts, ports, Database)
}

// createDatabase creates Database, connected to the database postgres.
func (s *Server) createDatabase() error {
	dsn := strings.Replace(s.DSN(), "dbname="+Database, "dbname=postgres", 1)
	return s.withConn(context.Background(), dsn, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+Database)
		return err
	})
}

// Exec runs one statement on a connection of its own to s.
func (s *Server) Exec(ctx context.Context, sql string, args ...any) error {
	return s.withConn(ctx, s.DSN(), func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("%s on %s: %w", sql, s.Name, err)
		}
		return nil
	})
}

// QueryRow scans the one row of sql on a connection of its own to s.
func (s *Server) QueryRow(ctx context.Context, sql string, dest ...any) error {
	return s.withConn(ctx, s.DSN(), func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, sql).Scan(dest...)
	})
}

// withConn runs f on a connection of its own to dsn (a database of s),
// all within 30 s.
func (s *Server) withConn(ctx context.Context, dsn string, f func(ctx context.Context, conn *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", s.Name, err)
	}
	defer conn.Close(context.Background())
	return f(ctx, conn)
}
