package redisclaim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/redisclaim"
)

// TestRedisSectionChecks: the failover keys of backend.redis are checked
// at their place, with the fix.
func TestRedisSectionChecks(t *testing.T) {
	for _, tc := range []struct{ redis, want string }{
		{"{reloadIntervalMs: 50}", `:3: backend.redis.reloadIntervalMs: must be between 100 and 600000, not 50`},
		{"{waitReplicas: -1}", `:3: backend.redis.waitReplicas: must be between 0 and 16, not -1`},
		{"{waitReplicas: 17}", `:3: backend.redis.waitReplicas: must be between 0 and 16, not 17`},
		{"{waitReplicas: 1, waitTimeoutMs: 0}", `:3: backend.redis.waitTimeoutMs: must be between 1 and 2000, not 0`},
		{"{waitReplicas: 1, waitTimeoutMs: 5000}", `:3: backend.redis.waitTimeoutMs: must be between 1 and 2000, not 5000`},
		{"{waitTimeoutMs: 100}", `:3: backend.redis.waitTimeoutMs: waitTimeoutMs is set but waitReplicas is not`},
		{`{url: "unix:///run/redis.sock", waitReplicas: 1}`, `:3: backend.redis.waitReplicas: waitReplicas needs replicas, and a unix:// URL names one local server`},
	} {
		yaml := "backend:\n  type: redis\n  redis: " + tc.redis + "\njobs: []\n"
		_, err := config.Parse("c.yaml", []byte(yaml), config.LoadOptions{Environ: []string{},
			Hostname: func() (string, error) { return "h", nil }})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", tc.redis, tc.want, err)
		}
	}
	yaml := "backend:\n  type: redis\n  redis: {reloadIntervalMs: 2000, waitReplicas: 1, waitTimeoutMs: 300}\njobs: []\n"
	cfg, err := config.Parse("c.yaml", []byte(yaml), config.LoadOptions{Environ: []string{},
		Hostname: func() (string, error) { return "h", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Backend.Store.(redisclaim.Settings); s.ReloadIntervalMs != 2000 || s.WaitReplicas != 1 || s.WaitTimeoutMs != 300 {
		t.Errorf("parsed %+v", s)
	}
}

// TestNeedsReload: the errors a failover or a resharding causes make a
// Cluster client reload its slot map; the caller's cancellation, a refusal
// and a missing key do not.
func TestNeedsReload(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{redis.ErrClosed, false},
		{redis.Nil, false},
		{errors.New("NOPERM this user has no permissions"), false},
		{fmt.Errorf("claim: %w", dialErr), true},
		{io.EOF, true},
		{syscall.ECONNRESET, true},
		{context.DeadlineExceeded, true},
		{redisErr("MOVED 3999 127.0.0.1:6381"), true},
		{redisErr("ASK 3999 127.0.0.1:6381"), true},
		{redisErr("CLUSTERDOWN The cluster is down"), true},
		{redisErr("READONLY You can't write against a read only replica."), true},
		{redisErr("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{redisErr("MASTERDOWN Link with MASTER is down"), true},
		{redisErr("NOPERM this user has no permissions"), false},
		{redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
	} {
		if got := redisclaim.NeedsReload(tc.err); got != tc.want {
			t.Errorf("needsReload(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// redisErr is a server's error reply.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestClusterSeedsNoneAnswer: a Cluster seed list where no node serves is
// one error naming every seed and what it answered.
func TestClusterSeedsNoneAnswer(t *testing.T) {
	plain := startRedis(t, freePort(t, false), "")
	locked := startRedis(t, freePort(t, false), "requirepass s3cret-other\n")
	closed := fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
	url := fmt.Sprintf("redis://:pw-secret@%s,redis://%s,redis://%s", closed, plain.Addr, locked.Addr)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := redisclaim.New(ctx, redisclaim.Options{URL: url, Namespace: "seeds"})
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, want := range []string{
		"no node of the Redis Cluster would serve: ",
		closed + ": dial tcp " + closed + ": connect: connection refused",
		plain.Addr + ": answers, but is not a Cluster node (cluster support disabled)",
		locked.Addr + ": WRONGPASS",
		"check the seed addresses of backend.redis.url",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error must name %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "pw-secret") {
		t.Errorf("the error shows the password: %s", msg)
	}
}

// TestCheckTopologySingle: validate names the server, its role and
// replicas; a URL naming a replica is refused, and so is waitReplicas
// above the replicas the master has.
func TestCheckTopologySingle(t *testing.T) {
	master, replica := startPair(t)
	ctx := t.Context()
	topo, err := redisclaim.CheckTopology(ctx, redisclaim.Options{URL: "redis://" + master.Addr + "/0", WaitReplicas: 1})
	want := regexp.MustCompile(`^redis topology: one server ` + regexp.QuoteMeta(master.Addr) + ` \(Redis 7\.[0-9.]+, master\), 1 connected replica$`)
	if err != nil || !want.MatchString(topo.String()) {
		t.Errorf("master: got %q, %v", topo, err)
	}
	_, err = redisclaim.CheckTopology(ctx, redisclaim.Options{URL: "redis://" + master.Addr + "/0", WaitReplicas: 2})
	if err == nil || !strings.Contains(err.Error(), "backend.redis.waitReplicas is 2 but a master has 1 replica up: every claim would wait waitTimeoutMs and fail") {
		t.Errorf("waitReplicas 2: got %v", err)
	}
	_, err = redisclaim.CheckTopology(ctx, redisclaim.Options{URL: "redis://" + replica.Addr + "/0"})
	if err == nil || !strings.Contains(err.Error(), "is a replica (role slave): claims would be refused (READONLY); point backend.redis.url at the master") {
		t.Errorf("replica: got %v", err)
	}
}
