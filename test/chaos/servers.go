package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/anarchon/anarchon/internal/testserver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
)

// server is a store server the harness runs for one chaos run, so that it
// can restart it without disturbing anyone else. Its data directory is in
// the run directory and survives restarts (the claims must).
type server struct {
	title string   // for messages
	argv  []string // the command line; the same at every start
	addr  string   // host:port it listens on
	log   string   // its stdout and stderr, appended across restarts
	// ready answers nil once the server serves requests.
	ready func(ctx context.Context) error

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// startRedis starts a private Redis with an fsync'd append-only file in
// dir, so that a restart keeps every claim.
func startRedis(ctx context.Context, dir, shared string) (*server, error) {
	return startPrivate(ctx, dir, shared, "redis", "redis-server", func(port string) []string {
		return []string{"--bind", "127.0.0.1", "--port", port, "--save", "",
			"--appendonly", "yes", "--appendfsync", "always", "--dir", dir, "--daemonize", "no"}
	}, func(ctx context.Context, addr string) error {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer c.Close()
		return c.Ping(ctx).Err() // LOADING while it reads the AOF
	})
}

// startNATS starts a private NATS server with JetStream on disk in dir.
func startNATS(ctx context.Context, dir, shared string) (*server, error) {
	return startPrivate(ctx, dir, shared, "nats", "nats-server", func(port string) []string {
		return []string{"-a", "127.0.0.1", "-p", port, "-js", "-sd", dir}
	}, func(ctx context.Context, addr string) error {
		nc, err := nats.Connect("nats://"+addr, nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(ctx)
		return err
	})
}

// startPrivate starts a private server of kind (redis, nats) in dir: the
// program prog from PATH on a free loopback port, with the arguments args
// makes for that port, ready once ready answers nil at its address. Its
// log is dir/KIND.log; shared names the shared server in the message when
// prog is not installed.
func startPrivate(ctx context.Context, dir, shared, kind, prog string, args func(port string) []string,
	ready func(ctx context.Context, addr string) error) (*server, error) {
	bin, err := exec.LookPath(prog)
	if err != nil {
		return nil, fmt.Errorf("private %s: %w (or run with -private-servers=false to use %s)", kind, err, shared)
	}
	ports, err := testserver.FreePorts(1)
	if err != nil {
		return nil, err
	}
	port := fmt.Sprint(ports[0])
	addr := "127.0.0.1:" + port
	s := &server{
		title: "private " + kind + " " + addr,
		argv:  append([]string{bin}, args(port)...),
		addr:  addr,
		log:   filepath.Join(dir, kind+".log"),
		ready: func(ctx context.Context) error { return ready(ctx, addr) },
	}
	return s, s.firstStart(ctx, dir)
}

func (s *server) firstStart(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", s.title, err)
	}
	return s.start(ctx)
}

// start starts the server and waits until it answers.
func (s *server) start(ctx context.Context) error {
	logf, err := os.OpenFile(s.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", s.title, err)
	}
	defer logf.Close()
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C of the harness must not stop it
	// before the daemons are stopped.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", s.title, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	err = await(ctx, storeTimeout, func(ctx context.Context) error {
		select {
		case <-s.done:
			return permanent{fmt.Errorf("exited: %v (see %s)", cmd.ProcessState, s.log)}
		default:
		}
		return s.ready(ctx)
	})
	if err != nil {
		_ = s.stop() // the error that matters is that it did not answer
		return fmt.Errorf("%s does not answer: %w", s.title, err)
	}
	return nil
}

// stop stops the server gracefully (SIGTERM: Redis and NATS flush their
// files) and waits for it; SIGKILL after 15 s.
func (s *server) stop() error {
	if s.cmd == nil {
		return nil
	}
	defer func() { s.cmd = nil }()
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("%s: SIGTERM: %w", s.title, err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		return errors.New(s.title + ": killed: no exit within 15s of SIGTERM")
	}
}
