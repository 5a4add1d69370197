package natsclaim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/anarchon/anarchon/internal/testserver"
)

// natsCluster is a local NATS cluster: nats-server processes with
// JetStream, each on free loopback ports with its own store directory,
// routed to each other (one server alone is in no cluster). The test's
// cleanup stops them.
type natsCluster struct {
	t     *testing.T
	name  string
	nodes []*natsNode
}

// natsNode is one server of a natsCluster.
type natsNode struct {
	name string
	port int    // clients
	dir  string // its configuration, store and log
	bin  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func (n *natsNode) log() string { return filepath.Join(n.dir, "nats.log") }

// natsBinary is the nats-server the cluster tests start; without it they
// skip, or fail under ANARCHON_TEST_REQUIRE.
func natsBinary(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(natsServerBin); err == nil {
		return natsServerBin
	}
	bin, err := exec.LookPath("nats-server")
	if err == nil {
		return bin
	}
	msg := fmt.Sprintf("nats-server is not installed (%v); install it (apt-get install nats-server, or a release from https://github.com/nats-io/nats-server/releases) to run the NATS cluster tests", err)
	if testserver.For("nats").Required() {
		t.Fatalf("%s\n(ANARCHON_TEST_REQUIRE=%s requires it)", msg, os.Getenv("ANARCHON_TEST_REQUIRE"))
	}
	t.Skip(msg)
	return ""
}

// freePorts returns n TCP ports of 127.0.0.1 nothing listens on now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := testserver.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// startNATSCluster starts a cluster of size servers, n1..n<size>, and
// waits until every server answers JetStream requests (the cluster has
// elected its JetStream meta leader).
func startNATSCluster(t *testing.T, size int) *natsCluster {
	t.Helper()
	bin := natsBinary(t)
	base := t.TempDir()
	ports := freePorts(t, 2*size)
	c := &natsCluster{t: t, name: "anarchon-test"}
	if size == 1 {
		c.name = "" // a single server, in no cluster
	}
	routes := make([]string, size)
	for i := range size {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[size+i])
	}
	t.Cleanup(c.stop)
	for i := range size {
		n := &natsNode{name: fmt.Sprintf("n%d", i+1), port: ports[i], dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), bin: bin}
		conf := fmt.Sprintf("server_name: %s\nlisten: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\n",
			n.name, n.port, filepath.Join(n.dir, "js"))
		if c.name != "" {
			conf += fmt.Sprintf("cluster { name: %s\n listen: \"127.0.0.1:%d\"\n routes: [%s] }\n",
				c.name, ports[size+i], strings.Join(routes, ", "))
		}
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.dir, "nats.conf"), []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		c.start(n)
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		c.awaitJetStream(n, 60*time.Second)
	}
	c.awaitPlacement(size, 60*time.Second)
	return c
}

// start starts n's process, its output appended to its log.
func (c *natsCluster) start(n *natsNode) {
	c.t.Helper()
	logf, err := os.OpenFile(n.log(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	n.cmd = exec.Command(n.bin, "-c", filepath.Join(n.dir, "nats.conf"))
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	// Gone with the test binary, whatever ends it.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		c.t.Fatalf("start nats-server %s: %v", n.name, err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(n.cmd, n.done)
}

// restart starts the killed server again, on its store, and waits until
// it answers JetStream requests.
func (c *natsCluster) restart(name string) {
	c.t.Helper()
	n := c.node(name)
	c.start(n)
	c.awaitJetStream(n, 60*time.Second)
}

// awaitPlacement waits until the cluster places a stream of r replicas:
// its JetStream meta leader knows r servers (they announce themselves a
// little after they answer).
func (c *natsCluster) awaitPlacement(r int, within time.Duration) {
	c.t.Helper()
	nc, err := nats.Connect(c.urls(""))
	if err != nil {
		c.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "READY", Subjects: []string{"ready.>"}, Replicas: r})
		if err == nil {
			err = js.DeleteStream(ctx, "READY")
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the cluster does not place a stream of %d replicas after %v: %v", r, within, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// awaitJetStream waits until n answers a JetStream request.
func (c *natsCluster) awaitJetStream(n *natsNode, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-n.done:
			c.t.Fatalf("nats-server %s exited: %v\n%s", n.name, n.cmd.ProcessState, tail(n.log()))
		default:
		}
		if last = jetStreamAnswers(n.url()); last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("nats-server %s does not answer JetStream requests after %v: %v\n%s", n.name, within, last, tail(n.log()))
}

func jetStreamAnswers(u string) error {
	nc, err := nats.Connect(u, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// node returns the server named name.
func (c *natsCluster) node(name string) *natsNode {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	c.t.Fatalf("no server %q in the cluster", name)
	return nil
}

// urls is the comma-separated list of the servers' URLs, but skip's.
func (c *natsCluster) urls(skip string) string {
	var out []string
	for _, n := range c.nodes {
		if n.name != skip {
			out = append(out, n.url())
		}
	}
	return strings.Join(out, ",")
}

// kill kills the server with SIGKILL and waits for it to exit.
func (c *natsCluster) kill(name string) {
	c.t.Helper()
	n := c.node(name)
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Fatalf("kill -9 %s: %v", name, err)
	}
	<-n.done
}

// stop stops every server still running: SIGTERM, SIGKILL after 10 s.
func (c *natsCluster) stop() {
	for _, n := range c.nodes {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range c.nodes {
		select {
		case <-n.done:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
}

// tail is the end of a server's log, for a failure's message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const keep = 3000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}

// streamLeader asks js's servers for the stream's leader, within 300 ms.
// ok reports whether the stream answered: not during an election or while
// its servers are down. A single server's stream names no leader.
func streamLeader(js jetstream.JetStream, stream string) (leader string, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", false
	}
	if info := s.CachedInfo(); info.Cluster != nil {
		return info.Cluster.Leader, true
	}
	return "", true
}
