package redisclaim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/testserver"
)

// Private Redis deployments for the failover tests and the replica
// benchmark: redis-server processes on free loopback ports, in a
// temporary directory, each killed when the test ends.

// redisBins returns the paths of redis-server and redis-cli, or skips t
// (fails it when ANARCHON_TEST_REQUIRE requires redis) naming what is
// missing.
func redisBins(t testing.TB) (server, cli string) {
	t.Helper()
	var missing []string
	server, err := exec.LookPath("redis-server")
	if err != nil {
		missing = append(missing, "redis-server")
	}
	cli, err = exec.LookPath("redis-cli")
	if err != nil {
		missing = append(missing, "redis-cli")
	}
	if len(missing) == 0 {
		return server, cli
	}
	msg := fmt.Sprintf("%s not found in PATH: the failover tests start their own Redis processes; install Redis 7 (apt-get install redis-server, which brings both)",
		strings.Join(missing, " and "))
	if testserver.For("redis").Required() {
		t.Fatalf("%s\n(ANARCHON_TEST_REQUIRE=%s requires it)", msg, os.Getenv("ANARCHON_TEST_REQUIRE"))
	}
	t.Skipf("%s\n(set ANARCHON_TEST_REQUIRE=all to make this a failure)", msg)
	return "", ""
}

// freePort returns a loopback port nothing listens on; with bus, port +
// 10000 (a Cluster node's bus) is free too.
func freePort(t testing.TB, bus bool) int {
	t.Helper()
	for range 100 {
		ports, err := testserver.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		port := ports[0]
		if !bus {
			return port
		}
		if port+10000 > 65535 {
			continue
		}
		if lb, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			lb.Close()
			return port
		}
	}
	t.Fatal("no free loopback port")
	return 0
}

// redisProc is one redis-server process.
type redisProc struct {
	Port int
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startRedis starts redis-server (or, with --sentinel among args, a
// sentinel) on port with conf, a configuration file's text, in a
// directory of its own, and waits until it answers PING.
func startRedis(t testing.TB, port int, conf string, args ...string) *redisProc {
	t.Helper()
	server, _ := redisBins(t)
	dir := t.TempDir()
	conf = fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsave \"\"\nappendonly no\nrepl-diskless-sync-delay 0\nlogfile %s\n%s",
		port, dir, filepath.Join(dir, "redis.log"), conf)
	file := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &redisProc{Port: port, Addr: "127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{}),
		log: filepath.Join(dir, "redis.log")}
	p.cmd = exec.Command(server, append([]string{file}, args...)...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
	defer c.Close()
	await(t, 10*time.Second, "redis-server on "+p.Addr+" to answer", func() error {
		select {
		case <-p.done:
			return errStop{fmt.Errorf("redis-server on %s exited: %s", p.Addr, p.tail())}
		default:
		}
		err := c.Ping(context.Background()).Err()
		if redis.IsAuthError(err) {
			return nil // it answers, and wants a password
		}
		return err
	})
	return p
}

// kill sends SIGKILL and waits for the process to end.
func (p *redisProc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// tail is the end of the process's log.
func (p *redisProc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// client is a plain client of the process, closed when t ends.
func (p *redisProc) client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// errStop ends an await at once.
type errStop struct{ error }

// await calls cond every 20 ms until it returns nil, failing t after
// limit (or at once on errStop) with what it last returned.
func await(t testing.TB, limit time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		var stop errStop
		if errors.As(err, &stop) || time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// role is what ROLE says the process is: master, slave or sentinel.
func role(ctx context.Context, c *redis.Client) (string, error) {
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", errors.New("empty ROLE reply")
	}
	s, _ := v[0].(string)
	return s, nil
}

// redisCluster is a private Redis Cluster.
type redisCluster struct {
	nodes []*redisProc
	URL   string
}

// startCluster starts 6 nodes (cluster-node-timeout 2000 ms) and makes
// them a cluster of 3 masters with a replica each (redis-cli --cluster
// create), and waits until every node sees it whole, every replica in
// sync.
func startCluster(t testing.TB) *redisCluster {
	t.Helper()
	_, cli := redisBins(t)
	rc := &redisCluster{}
	var addrs, urls []string
	for range 6 {
		p := startRedis(t, freePort(t, true), "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 2000\n")
		rc.nodes = append(rc.nodes, p)
		addrs = append(addrs, p.Addr)
		urls = append(urls, "redis://"+p.Addr)
	}
	rc.URL = strings.Join(urls, ",")
	var out bytes.Buffer
	create := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")...)
	create.Stdout, create.Stderr = &out, &out
	if err := create.Run(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out.String())
	}
	for _, p := range rc.nodes {
		c := p.client(t)
		await(t, 30*time.Second, p.Addr+" to see the whole cluster", func() error { return clusterWhole(t.Context(), c) })
	}
	return rc
}

// clusterWhole returns nil once c's node sees cluster_state ok, 6 known
// nodes and, on a replica, its link to the master up.
func clusterWhole(ctx context.Context, c *redis.Client) error {
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:6") {
		return fmt.Errorf("cluster info: %s", info)
	}
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return err
	}
	var masters, replicas int
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		switch {
		case len(f) > 8 && strings.Contains(f[2], "master"):
			masters++
		case len(f) > 3 && strings.Contains(f[2], "slave") && f[3] != "-":
			replicas++
		}
	}
	if masters != 3 || replicas != 3 {
		return fmt.Errorf("%d masters with slots and %d replicas:\n%s", masters, replicas, nodes)
	}
	repl, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return errors.New("replica not in sync yet")
	}
	return nil
}

// node returns the process listening on addr.
func (rc *redisCluster) node(addr string) *redisProc {
	for _, p := range rc.nodes {
		if p.Addr == addr {
			return p
		}
	}
	return nil
}

// replicaOf returns the replica of the master at addr, from CLUSTER NODES.
func (rc *redisCluster) replicaOf(t testing.TB, addr string) *redisProc {
	t.Helper()
	nodes, err := rc.node(addr).client(t).ClusterNodes(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // addr -> id
	type rep struct{ addr, master string }
	var reps []rep
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		a, _, _ := strings.Cut(f[1], "@")
		ids[a] = f[0]
		if strings.Contains(f[2], "slave") {
			reps = append(reps, rep{a, f[3]})
		}
	}
	for _, r := range reps {
		if r.master == ids[addr] {
			return rc.node(r.addr)
		}
	}
	t.Fatalf("no replica of %s in CLUSTER NODES:\n%s", addr, nodes)
	return nil
}
