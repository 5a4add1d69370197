package rabbitclaim_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/testserver"
)

// RabbitMQ's scripts as the Debian package installs them: run directly,
// not through /usr/sbin's wrappers, which switch to the rabbitmq user and
// read the system node's environment.
const (
	rabbitServerBin = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	rabbitCtlBin    = "/usr/lib/rabbitmq/bin/rabbitmqctl"
)

// rabbitNode is one broker of a private cluster.
type rabbitNode struct {
	name string // the Erlang node name, <name>@localhost
	port int    // AMQP
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

func (n *rabbitNode) url() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.port) }

// rabbitCluster is a cluster of RabbitMQ nodes on loopback ports,
// started and stopped by the test, sharing an Erlang cookie in home.
type rabbitCluster struct {
	t     *testing.T
	home  string
	nodes []*rabbitNode
}

// rabbitBinaries fails (under ANARCHON_TEST_REQUIRE) or skips the test
// when RabbitMQ's scripts are not installed.
func rabbitBinaries(t *testing.T) {
	t.Helper()
	for _, bin := range []string{rabbitServerBin, rabbitCtlBin} {
		if _, err := os.Stat(bin); err != nil {
			msg := fmt.Sprintf("%v; install RabbitMQ (apt-get install rabbitmq-server) to run the RabbitMQ cluster test", err)
			if testserver.For("rabbitmq").Required() {
				t.Fatalf("%s\n(ANARCHON_TEST_REQUIRE=%s requires it)", msg, os.Getenv("ANARCHON_TEST_REQUIRE"))
			}
			t.Skip(msg)
		}
	}
}

// startRabbitCluster starts size nodes at once, waits for each, and joins
// the others to the first.
func startRabbitCluster(t *testing.T, size int) *rabbitCluster {
	t.Helper()
	rabbitBinaries(t)
	c := &rabbitCluster{t: t, home: t.TempDir()}
	cookie := "ANARCHONTEST" + strings.ToUpper(testserver.RandomID())
	if err := os.WriteFile(filepath.Join(c.home, ".erlang.cookie"), []byte(cookie), 0o400); err != nil {
		t.Fatal(err)
	}
	ports, err := testserver.FreePorts(2 * size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	id := testserver.RandomID()
	for i := range size {
		n := &rabbitNode{name: fmt.Sprintf("anarchon-%s-n%d", id, i+1), port: ports[i], dir: filepath.Join(c.home, fmt.Sprintf("n%d", i+1))}
		c.start(n, ports[size+i])
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		c.awaitListener(n, 120*time.Second)
		c.ctl(n, 60*time.Second, "await_startup")
	}
	for _, n := range c.nodes[1:] {
		c.ctl(n, 60*time.Second, "stop_app")
		c.ctl(n, 60*time.Second, "join_cluster", c.nodes[0].name+"@localhost")
		c.ctl(n, 60*time.Second, "start_app")
	}
	out := c.ctl(c.nodes[0], 30*time.Second, "cluster_status")
	for _, n := range c.nodes {
		if !strings.Contains(out, n.name+"@localhost") {
			t.Fatalf("node %s is not in the cluster:\n%s", n.name, out)
		}
	}
	return c
}

// env is the environment of n's processes: its own ports, data and logs,
// the cluster's cookie, none of the system node's settings.
func (c *rabbitCluster) env(n *rabbitNode, distPort int) []string {
	return append(os.Environ(),
		"HOME="+c.home,
		"RABBITMQ_CONF_ENV_FILE=/dev/null",
		"RABBITMQ_NODENAME="+n.name+"@localhost",
		fmt.Sprintf("RABBITMQ_NODE_PORT=%d", n.port),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", distPort),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(n.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(n.dir, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(n.dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(n.dir, "plugins"),
		"ERL_EPMD_ADDRESS=127.0.0.1",
	)
}

// start starts n's broker in a process group of its own.
func (c *rabbitCluster) start(n *rabbitNode, distPort int) {
	c.t.Helper()
	conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\n", n.port)
	for name, body := range map[string]string{"rabbitmq.conf": conf, "plugins": "[].\n"} {
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			c.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(body), 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
	logf, err := os.Create(filepath.Join(n.dir, "server.log"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	n.cmd = exec.Command(rabbitServerBin)
	n.cmd.Dir, n.cmd.Env = n.dir, c.env(n, distPort)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		c.t.Fatalf("start rabbitmq node %s: %v", n.name, err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(n.cmd, n.done)
}

// awaitListener waits until n's AMQP port accepts connections: the
// broker has booted (rabbitmqctl cannot reach a node before it has
// registered).
func (c *rabbitCluster) awaitListener(n *rabbitNode, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-n.done:
			log, _ := os.ReadFile(filepath.Join(n.dir, "server.log"))
			c.t.Fatalf("rabbitmq node %s exited while booting:\n%s", n.name, log)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("rabbitmq node %s does not listen on %d after %v: %v", n.name, n.port, within, err)
		}
	}
}

// ctl runs rabbitmqctl against n and returns its output; a failure fails
// the test with the output and the node's log.
func (c *rabbitCluster) ctl(n *rabbitNode, within time.Duration, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, rabbitCtlBin, append([]string{"-n", n.name + "@localhost"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+c.home, "RABBITMQ_CONF_ENV_FILE=/dev/null", "ERL_EPMD_ADDRESS=127.0.0.1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(n.dir, "server.log"))
		c.t.Fatalf("rabbitmqctl -n %s %s: %v\n%s\nnode log:\n%s", n.name, strings.Join(args, " "), err, out.String(), log)
	}
	return out.String()
}

// kill kills n's broker and its helpers (SIGKILL to its process group)
// and waits for it.
func (c *rabbitCluster) kill(n *rabbitNode) {
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
}

// stop kills every node still running: the data is the test's to drop.
func (c *rabbitCluster) stop() {
	for _, n := range c.nodes {
		c.kill(n)
	}
}

// urls is the backend's URL list with from first, then the others in
// order.
func (c *rabbitCluster) urls(from int) string {
	out := make([]string, len(c.nodes))
	for k := range c.nodes {
		out[k] = c.nodes[(from+k)%len(c.nodes)].url()
	}
	return strings.Join(out, ",")
}
