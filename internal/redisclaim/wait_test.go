package redisclaim_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/redisclaim"
)

// startPair starts a private master and its replica, in sync; it returns
// them.
func startPair(t testing.TB) (master, replica *redisProc) {
	t.Helper()
	master = startRedis(t, freePort(t, false), "")
	replica = startRedis(t, freePort(t, false), fmt.Sprintf("replicaof 127.0.0.1 %d\n", master.Port))
	rcl := replica.client(t)
	mcl := master.client(t)
	await(t, 20*time.Second, "the replica to sync", func() error {
		info, err := rcl.Info(t.Context(), "replication").Result()
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			return errors.New("replica not in sync")
		}
		if err == nil {
			info, err = mcl.Info(t.Context(), "replication").Result()
		}
		if err == nil && !strings.Contains(info, "connected_slaves:1") {
			return errors.New("the master does not list its replica")
		}
		return err
	})
	return master, replica
}

// TestWaitReplicas: with waitReplicas, a win is answered once the replica
// holds it; with more replicas asked than there are, or the replica gone,
// a claim is no decision (ErrNotReplicated), and the same claim re-sent
// once the replicas are there again wins (its own claim, re-sent).
func TestWaitReplicas(t *testing.T) {
	master, replica := startPair(t)
	url := "redis://" + master.Addr + "/0"
	for _, strategy := range []string{redisclaim.StrategyLease, redisclaim.StrategyStreamID, redisclaim.StrategyScript} {
		t.Run(strategy, func(t *testing.T) {
			one := openOn(t, url, "w1-"+strategy, strategy, func(o *redisclaim.Options) { o.WaitReplicas = 1 })
			two := openOn(t, url, "w2-"+strategy, strategy, func(o *redisclaim.Options) {
				o.WaitReplicas, o.WaitTimeout = 2, 50*time.Millisecond
			})
			req := request("job", time.Now().UnixMilli())
			req.Now = time.Now()
			if res, err := one.Claim(t.Context(), req); err != nil || res.Outcome != claim.Won {
				t.Fatalf("waitReplicas 1 with 1 replica: want won, got %+v %v", res, err)
			}
			if err := finishOnce(t, one, req); err != nil {
				t.Fatalf("finish with waitReplicas 1: %v", err)
			}
			req2 := request("job", time.Now().UnixMilli())
			req2.Now = time.Now()
			if _, err := two.Claim(t.Context(), req2); !errors.Is(err, redisclaim.ErrNotReplicated) {
				t.Fatalf("waitReplicas 2 with 1 replica: want ErrNotReplicated, got %v", err)
			}
		})
	}
	// The replica gone: no decision, until it is back.
	b := openOn(t, url, "gone", redisclaim.StrategyLease, func(o *redisclaim.Options) {
		o.WaitReplicas, o.WaitTimeout = 1, 100*time.Millisecond
	})
	replica.kill()
	await(t, 10*time.Second, "the master to lose its replica", func() error {
		info, err := master.client(t).Info(t.Context(), "replication").Result()
		if err == nil && !strings.Contains(info, "connected_slaves:0") {
			err = errors.New("replica still connected")
		}
		return err
	})
	req := request("job", time.Now().UnixMilli())
	if _, err := b.Claim(t.Context(), req); !errors.Is(err, redisclaim.ErrNotReplicated) {
		t.Fatalf("replica gone: want ErrNotReplicated, got %v", err)
	}
	startRedis(t, freePort(t, false), fmt.Sprintf("replicaof 127.0.0.1 %d\n", master.Port))
	await(t, 20*time.Second, "the re-sent claim to win once a replica is back", func() error {
		res, err := b.Claim(t.Context(), req)
		if err == nil && (res.Outcome != claim.Won || res.Attempt != 1) {
			return errStop{fmt.Errorf("the re-sent claim was answered %+v", res)}
		}
		return err
	})
}

// finishOnce records req's run as succeeded.
func finishOnce(t *testing.T, b claim.Backend, req claim.Request) error {
	return b.Finish(t.Context(), req.Fence(1), claim.Finish{Status: claim.StatusSucceeded, StartedAt: time.Now(), FinishedAt: time.Now()})
}

// TestConfirmFindsALostWrite: the wait for replicas first checks, on the
// master, that the write is there: one a failover lost is no decision.
func TestConfirmFindsALostWrite(t *testing.T) {
	master, _ := startPair(t)
	b := openOn(t, "redis://"+master.Addr+"/0", "lost", redisclaim.StrategyLease, func(o *redisclaim.Options) { o.WaitReplicas = 1 })
	err := redisclaim.Confirm(t.Context(), b, "job", 12345, claim.NewToken())
	if !errors.Is(err, redisclaim.ErrNotReplicated) || !strings.Contains(err.Error(), "not on the master") {
		t.Fatalf("a write that is not there: want ErrNotReplicated (not on the master), got %v", err)
	}
}

// BenchmarkClaimWaitReplicas: the won claim of a fresh slot on a private
// master with one replica on loopback, with waitReplicas 0 and 1
// (backend.redis.waitReplicas): what the wait for the replica costs a
// claim (the confirm script and WAIT: one round trip more, and the
// replica's acknowledgement).
func BenchmarkClaimWaitReplicas(b *testing.B) {
	master, _ := startPair(b)
	url := "redis://" + master.Addr + "/0"
	for _, strategy := range []string{redisclaim.StrategyLease, redisclaim.StrategyStreamID} {
		for _, n := range []int{0, 1} {
			b.Run(fmt.Sprintf("%s/waitReplicas=%d", strategy, n), func(b *testing.B) {
				be := openOn(b, url, fmt.Sprintf("bench-%s-%d-%d", strategy, n, time.Now().UnixNano()), strategy,
					func(o *redisclaim.Options) { o.WaitReplicas = n })
				claimtest.BenchUncontended(b, be)
			})
		}
	}
}
