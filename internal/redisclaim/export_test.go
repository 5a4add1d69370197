package redisclaim

import "github.com/redis/go-redis/v9"

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
