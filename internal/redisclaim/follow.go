package redisclaim

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Following a failover (see the package documentation, # Failover).
//
// go-redis's Cluster client reloads its map of slots to nodes on a timer
// (ClusterStateReloadInterval, 60 s by default) and after MOVED and
// READONLY answers, but not after a connection error: when a master dies,
// every command for its slots fails on the dead node until the timer
// fires, however soon Redis promotes the replica. follower is a client
// hook that asks for a reload (ClusterClient.ReloadState, which go-redis
// runs in the background, one at a time, at most every 200 ms) on every
// error a failover or a resharding causes: a connection error (refused,
// reset, closed, timed out), MOVED, ASK, CLUSTERDOWN, READONLY, TRYAGAIN,
// MASTERDOWN and LOADING. The first command after the replica's promotion
// that fails brings the reload that finds it.

// DefaultReloadInterval is backend.redis.reloadIntervalMs's default: how
// often a Cluster client reloads the slot map when no error asks for it.
const DefaultReloadInterval = 5 * time.Second

// reloadLogEvery bounds the follower's log lines: one per interval.
const reloadLogEvery = 10 * time.Second

// follower is the hook of a Cluster client (also a Sentinel set with
// route_by_latency or route_randomly, which go-redis runs as one).
type follower struct {
	reload func(context.Context)
	log    *zap.Logger
	// logged is the last log line's time, in unix ns.
	logged *atomic.Int64
}

// newFollower returns the hook that makes c follow failovers, or nil when
// c is not a Cluster client (a single server has nothing to follow; a
// Sentinel client asks the sentinels for the master on each new
// connection and drops its connections when they announce a new one).
func newFollower(c redis.UniversalClient, log *zap.Logger) redis.Hook {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	return follower{reload: cc.ReloadState, log: log, logged: new(atomic.Int64)}
}

// follow makes c follow failovers (newFollower), if it is a Cluster client.
func follow(c redis.UniversalClient, log *zap.Logger) {
	if h := newFollower(c, log); h != nil {
		c.AddHook(h)
	}
}

func (f follower) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f follower) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		f.check(ctx, err)
		return err
	}
}

func (f follower) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !f.check(ctx, err) {
			for _, cmd := range cmds {
				if f.check(ctx, cmd.Err()) {
					break
				}
			}
		}
		return err
	}
}

// check asks for a reload when err calls for one, and reports whether it
// did.
func (f follower) check(ctx context.Context, err error) bool {
	if !needsReload(err) {
		return false
	}
	f.reload(context.WithoutCancel(ctx))
	now := time.Now().UnixNano()
	if last := f.logged.Load(); now-last >= int64(reloadLogEvery) && f.logged.CompareAndSwap(last, now) {
		f.log.Warn("redis cluster: a node failed or moved slots; reloading the map of slots (logged once per 10 s)", zap.Error(err))
	}
	return true
}

// reloadPrefixes are the server's answers that mean the slot map (or a
// node's role) changed.
var reloadPrefixes = []string{"MOVED", "ASK", "CLUSTERDOWN", "READONLY", "TRYAGAIN", "MASTERDOWN", "LOADING"}

// needsReload reports whether err is a connection error or an answer of
// reloadPrefixes. A context cancelled by the caller is not: only a
// deadline (a node that stopped answering) is.
func needsReload(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, redis.ErrClosed) {
		return false
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		for _, p := range reloadPrefixes {
			if redis.HasErrorPrefix(err, p) {
				return true
			}
		}
		return false
	}
	var nerr net.Error
	return errors.As(err, &nerr) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
