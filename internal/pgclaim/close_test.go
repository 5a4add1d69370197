package pgclaim

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/faultproxy"
)

// TestCloseDoesNotHangOnALostReply: a connection whose replies a network
// fault swallows (requests delivered, replies dropped) must not hold
// Close, and with it the daemon's exit, forever.
func TestCloseDoesNotHangOnALostReply(t *testing.T) {
	table := newSchema(t) + ".runs"
	open(t, table) // migrate without the proxy
	u, err := url.Parse(testDSN())
	if err != nil {
		t.Skipf("%s is not a URL: %v", dsnEnv, err)
	}
	p, err := faultproxy.Start("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	u.Host = p.Addr()
	b, err := New(t.Context(), Options{DSN: u.String(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	p.SetMode(faultproxy.Blackhole)
	inFlight := make(chan struct{})
	go func() {
		close(inFlight)
		// No deadline: as a caller that forgot one would.
		b.Claim(context.Background(), claim.Request{Job: "j", Slot: time.Now().UnixMilli(), Token: claim.NewToken(),
			Instance: "x", MaxLate: time.Hour, Lease: time.Minute, MaxAttempts: 1})
	}()
	<-inFlight
	closed := make(chan error, 1)
	t0 := time.Now()
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		t.Logf("Close returned after %v: %v", time.Since(t0).Round(time.Millisecond), err)
	case <-time.After(closeTimeout + 10*time.Second):
		t.Fatalf("Close still waiting %v after a blackhole", closeTimeout+10*time.Second)
	}
}
