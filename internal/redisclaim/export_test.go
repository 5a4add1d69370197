package redisclaim

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
)

// NewClient makes the client New would make for rawURL, for tests that
// inspect the server directly.
func NewClient(rawURL, passwordFile string) (redis.UniversalClient, Topology, error) {
	cc, err := parseURL(rawURL, passwordFile)
	if err != nil {
		return nil, "", err
	}
	return cc.newClient(), cc.Topology, nil
}

// LeaseClaimSHA is the SHA1 of the claim script, as EVALSHA sends it.
var LeaseClaimSHA = leaseClaim.Hash()

// LeaseClaim is the claim script.
var LeaseClaim = leaseClaim

// IDMPArgs is the idmp claim's XADD for req on namespace ns, as go-redis
// would send it (built in a pipeline that is never run).
func IDMPArgs(ns string, req claim.Request) []any {
	b := &ClaimOnly{link: link{ns: ns}, maxLen: DefaultHistoryMaxLen, idmpMax: MaxIDMPMaxSize}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	return c.Pipeline().XAdd(context.Background(), b.idmpArgs(req)).Args()
}

// HasToken is hasToken.
var HasToken = hasToken

// IDMPSetup runs the idmp strategy's stream setup script on key.
func IDMPSetup(ctx context.Context, c redis.UniversalClient, key string, durationSec, maxSize int64) ([]any, error) {
	return idmpSetup.Run(ctx, c, []string{key}, durationSec, maxSize).Slice()
}

// Confirm runs the wait for replicas of the lease run (job, slot) claimed
// with tok, as a won claim does.
func Confirm(ctx context.Context, b claim.Backend, job string, slot int64, tok claim.Token) error {
	lb := b.(*Backend)
	return lb.confirm(ctx, written{job: job, key: lb.keys(job).state, kind: "hash", at: strconv.FormatInt(slot, 10), token: tok})
}

// NeedsReload is needsReload.
var NeedsReload = needsReload
