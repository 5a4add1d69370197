package redisclaim

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/testserver"
)

// saddCount is a hook that counts SADDs.
type saddCount struct{ n *atomic.Int32 }

func (h saddCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h saddCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "sadd" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h saddCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestIndexerNeverHoldsAClaim: with the index's server not answering (a
// listener that never replies), a job's first claim waits for its SADD at
// most indexGrace, later claims not at all, and each sends one more SADD
// while none has landed; once one lands, claims send none.
func TestIndexerNeverHoldsAClaim(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer close(done)
	defer l.Close()
	go func() { // accepts, never answers
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }()
		}
	}()
	var n atomic.Int32
	c := redis.NewClient(&redis.Options{Addr: l.Addr().String(), MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
	defer c.Close()
	c.AddHook(saddCount{&n})
	x := newIndexer(c, "ns:jobs", zap.NewNop())
	defer x.close()
	ctx := t.Context()
	t0 := time.Now()
	x.touch("a")(ctx)
	if d := time.Since(t0); d < indexGrace-10*time.Millisecond || d > indexGrace+200*time.Millisecond {
		t.Errorf("the first claim waited %v for the index, want about %v", d, indexGrace)
	}
	t0 = time.Now()
	x.touch("a")(ctx) // the first SADD still in flight: none more, no wait
	if d := time.Since(t0); d > 20*time.Millisecond {
		t.Errorf("a later claim waited %v for the index", d)
	}
	waitFor(t, func() bool { x.mu.Lock(); defer x.mu.Unlock(); return x.jobs["a"].inFlight == nil })
	t0 = time.Now()
	x.touch("a")(ctx) // the first failed: one more, no wait
	if d := time.Since(t0); d > 20*time.Millisecond {
		t.Errorf("a later claim waited %v for the index", d)
	}
	waitFor(t, func() bool { return n.Load() == 2 })
}

// TestIndexerOncePerJob: with the server answering, a job's first claim
// finds the job indexed when it returns, and later claims send nothing;
// force sends again.
func TestIndexerOncePerJob(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testserver.For("redis").Require(t, "")})
	defer c.Close()
	var n atomic.Int32
	c.AddHook(saddCount{&n})
	key := "anarchon-test-indexer:" + time.Now().Format("150405.000000000")
	defer c.Del(context.Background(), key)
	x := newIndexer(c, key, zap.NewNop())
	defer x.close()
	ctx := t.Context()
	x.touch("a")(ctx)
	if ok, err := c.SIsMember(ctx, key, "a").Result(); !ok || err != nil {
		t.Fatalf("after the first claim the job must be indexed: %v %v", ok, err)
	}
	for range 5 {
		x.touch("a")(ctx)
	}
	x.force("a")(ctx)
	if got := n.Load(); got != 2 {
		t.Errorf("want 2 SADDs (the first, the forced), got %d", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
	}
}
