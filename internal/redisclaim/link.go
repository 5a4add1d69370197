package redisclaim

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// link is what the lease and claim-only backends share about their
// connection: the client, the index of jobs kept off the claim path
// (index.go), and the wait for replicas (backend.redis.waitReplicas).
type link struct {
	c     redis.UniversalClient
	owned bool // close closes c
	ns    string
	idx   *indexer
	wait  replicaWait
	log   *zap.Logger
	// beats counts the instance records' beats (instances.go).
	beats atomic.Int64
}

// replicaWait is backend.redis.waitReplicas and waitTimeoutMs: n 0 waits
// for nothing.
type replicaWait struct {
	n       int
	timeout time.Duration
}

// Defaults of the wait for replicas.
const (
	// DefaultWaitTimeout is backend.redis.waitTimeoutMs's default.
	DefaultWaitTimeout = 500 * time.Millisecond
	// MaxWaitReplicas bounds backend.redis.waitReplicas.
	MaxWaitReplicas = 16
)

// ErrNotReplicated is the error of a write that fewer replicas than
// backend.redis.waitReplicas acknowledged within waitTimeoutMs, or that
// a failover lost before they did: no decision; the caller sends it again
// with the same token.
var ErrNotReplicated = errors.New("not acknowledged by backend.redis.waitReplicas replicas")

//go:embed lua/confirm.lua
var confirmLua string

var confirmScript = redis.NewScript(confirmLua)

func newLink(c redis.UniversalClient, owned bool, o Options) link {
	return link{
		c: c, owned: owned, ns: o.Namespace, log: o.Log,
		idx:  newIndexer(c, o.Namespace+":jobs", o.Log),
		wait: replicaWait{n: o.WaitReplicas, timeout: o.WaitTimeout},
	}
}

// close stops the index's SADDs and closes the client if the backend owns it.
func (l *link) close() error {
	l.idx.close()
	if !l.owned {
		return nil
	}
	if err := l.c.Close(); err != nil {
		return fmt.Errorf("close redis client: %w", err)
	}
	return nil
}

// jobsKey is the set of the namespace's job names.
func (l *link) jobsKey() string { return l.ns + ":jobs" }

// written is one write to confirm: in the hash key at field at (kind
// "hash"), or the stream key's entry at (kind "stream"), carrying token;
// settled asks the hash's run to be finished or interrupted.
type written struct {
	job, key, kind, at string
	token              claim.Token
	settled            bool
}

// confirm returns nil at once without waitReplicas; with it, nil when the
// write w is on the master of its key and at least waitReplicas replicas
// hold it: the confirm script (lua/confirm.lua) and WAIT, on one
// connection to that master. Otherwise an error wrapping
// ErrNotReplicated, or the connection's error: the caller answers no
// decision.
func (l *link) confirm(ctx context.Context, w written) error {
	if l.wait.n == 0 {
		return nil
	}
	conn, err := l.masterConn(ctx, w.key)
	if err != nil {
		return fmt.Errorf("wait for replicas: %w", err)
	}
	defer conn.Close()
	settled := ""
	if w.settled {
		settled = "1"
	}
	keys := []string{w.key, "{" + l.ns + ":" + w.job + "}:confirm"}
	args := []any{w.kind, w.at, string(w.token), settled}
	var check *redis.Cmd
	var acked *redis.Cmd
	_, err = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		check = confirmScript.EvalSha(ctx, p, keys, args...)
		acked = p.Do(ctx, "WAIT", l.wait.n, l.wait.timeout.Milliseconds())
		return nil
	})
	if redis.HasErrorPrefix(check.Err(), "NOSCRIPT") {
		_, err = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			check = confirmScript.Eval(ctx, p, keys, args...)
			acked = p.Do(ctx, "WAIT", l.wait.n, l.wait.timeout.Milliseconds())
			return nil
		})
	}
	return l.judge(ctx, check, acked, err)
}

// judge reads the confirm script's and WAIT's answers.
func (l *link) judge(ctx context.Context, check, acked *redis.Cmd, err error) error {
	if err == nil {
		err = check.Err()
	}
	if err != nil {
		// Not through the client's hooks: classify and follow here.
		if cc, ok := l.c.(*redis.ClusterClient); ok && needsReload(err) {
			cc.ReloadState(context.WithoutCancel(ctx))
		}
		return fmt.Errorf("wait for replicas: %w", refusals{ns: l.ns}.classify(err))
	}
	if s, _ := check.Text(); s != "ok" {
		return fmt.Errorf("the write is not on the master (lost in a failover?): %w", ErrNotReplicated)
	}
	n, err := acked.Int64()
	if err != nil {
		return fmt.Errorf("wait for replicas: WAIT: %w", err)
	}
	if n < int64(l.wait.n) {
		return fmt.Errorf("%d of %d replicas acknowledged the write within %v: %w", n, l.wait.n, l.wait.timeout, ErrNotReplicated)
	}
	return nil
}

// masterConn is one connection to the master that holds key.
func (l *link) masterConn(ctx context.Context, key string) (*redis.Conn, error) {
	switch c := l.c.(type) {
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("find the master of %s: %w", key, err)
		}
		return node.Conn(), nil
	case *redis.Client:
		return c.Conn(), nil
	default:
		return nil, fmt.Errorf("backend.redis.waitReplicas needs a single, Sentinel or Cluster client, not %T", l.c)
	}
}
