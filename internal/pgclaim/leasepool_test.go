package pgclaim

import (
	"context"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// TestLeaseCallsDoNotWaitForClaims: with every connection of the claims'
// pool taken (a burst of claims on a loaded machine), a running attempt's
// renewal, result and release still go through at once, on connections of
// their own. Before, they queued for the pool with the claims.
func TestLeaseCallsDoNotWaitForClaims(t *testing.T) {
	b := open(t, newSchema(t)+".runs")
	slot := time.Now().UnixMilli()
	r1 := claimOnce(t, b, "busy", slot)
	r2 := claimOnce(t, b, "busy", slot+1000)
	held := make([]func(), 0, b.pool.Config().MaxConns)
	for range b.pool.Config().MaxConns {
		c, err := b.pool.Acquire(t.Context())
		if err != nil {
			t.Fatalf("taking the claims' connections: %v", err)
		}
		held = append(held, c.Release)
	}
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	// The claims' pool is exhausted: a claim now waits.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := b.Renew(ctx, r1.Fence(1), time.Minute); err != nil {
		t.Fatalf("renew while every claim connection is taken: %v", err)
	}
	fin := claim.Finish{Status: claim.StatusSucceeded}
	if err := b.Finish(ctx, r1.Fence(1), fin); err != nil {
		t.Fatalf("finish while every claim connection is taken: %v", err)
	}
	if err := b.Release(ctx, r2.Fence(1)); err != nil {
		t.Fatalf("release while every claim connection is taken: %v", err)
	}
}

// The lease calls' connections come out of pool_max_conns, not on top.
func TestSplitConns(t *testing.T) {
	for _, tc := range []struct{ total, claims, leases int32 }{
		{16, 12, 4}, {4, 2, 2}, {2, 1, 2}, {1, 1, 2}, {40, 30, 10},
	} {
		if c, l := splitConns(tc.total); c != tc.claims || l != tc.leases {
			t.Errorf("splitConns(%d) = %d, %d; want %d, %d", tc.total, c, l, tc.claims, tc.leases)
		}
	}
}
