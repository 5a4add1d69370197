package redisclaim

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
)

// The instances' heartbeat records (docs/spec.md#s6-cluster), on every
// strategy: one hash of the namespace,
//
//	<ns>:instances  hash  instance name -> "<expires>:<retain>:<seen>:<skew>:<json>"
//
// a single key, so one cluster slot: a beat is one script on it
// (lua/instance_beat.lua) that stamps the record with Redis TIME (seen,
// expires = seen + ttl, skew = the instance's clock minus TIME) and,
// every pruneEvery beats, deletes the records past their retention; a
// read is one script (lua/instance_list.lua) returning TIME and every
// record. The JSON is claim.EncodeInstance's, its stamps left to the
// prefix.

var (
	//go:embed lua/instance_beat.lua
	instanceBeatLua string
	instanceBeat    = redis.NewScript(instanceBeatLua)
	//go:embed lua/instance_list.lua
	instanceListLua string
	instanceList    = redis.NewScript(instanceListLua)
)

var (
	_ claim.Registry = (*Backend)(nil)
	_ claim.Registry = (*ClaimOnly)(nil)
)

// pruneEvery: one beat in pruneEvery (and the first) prunes the records
// past their retention, which reads them all inside Redis.
const pruneEvery = 12

// registry reads and writes the instance records of namespace ns.
type registry struct {
	c     redis.UniversalClient
	ns    string
	beats *atomic.Int64
}

func (k registry) key() string { return k.ns + ":instances" }

// Beat writes inst's record (both types, through link).
func (l *link) Beat(ctx context.Context, inst claim.Instance, ttl time.Duration) (claim.Instance, error) {
	return registry{l.c, l.ns, &l.beats}.beat(ctx, inst, ttl)
}

// Instances returns every record within its retention, and Redis TIME.
func (l *link) Instances(ctx context.Context) ([]claim.Instance, time.Time, error) {
	return registry{l.c, l.ns, &l.beats}.list(ctx)
}

func (k registry) beat(ctx context.Context, inst claim.Instance, ttl time.Duration) (claim.Instance, error) {
	if err := inst.Check(); err != nil {
		return claim.Instance{}, err
	}
	sent := int64(0)
	if !inst.LastSeen.IsZero() {
		sent = inst.LastSeen.UnixMilli()
	}
	body := inst
	body.LastSeen, body.ExpiresAt, body.SkewMs = time.Time{}, time.Time{}, 0
	data, err := claim.EncodeInstance(body)
	if err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	}
	prune := "0"
	if k.beats.Add(1)%pruneEvery == 1 {
		prune = "1"
	}
	res, err := instanceBeat.Run(ctx, k.c, []string{k.key()}, inst.Name, ttl.Milliseconds(),
		inst.Retain.Milliseconds(), sent, string(data), prune).Int64Slice()
	switch {
	case err != nil:
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	case len(res) != 3:
		return claim.Instance{}, fmt.Errorf("beat of %s: unexpected reply %v", inst.Name, res)
	}
	got, err := claim.DecodeInstance(data)
	if err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	}
	got.LastSeen, got.ExpiresAt, got.SkewMs = time.UnixMilli(res[0]).UTC(), time.UnixMilli(res[1]).UTC(), res[2]
	return got, nil
}

func (k registry) list(ctx context.Context) ([]claim.Instance, time.Time, error) {
	res, err := instanceList.Run(ctx, k.c, []string{k.key()}).StringSlice()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read instance records: %w", err)
	}
	if len(res) < 2 || len(res)%2 != 0 {
		return nil, time.Time{}, fmt.Errorf("read instance records: unexpected reply of %d items", len(res))
	}
	sec, err1 := strconv.ParseInt(res[0], 10, 64)
	usec, err2 := strconv.ParseInt(res[1], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, time.Time{}, fmt.Errorf("read instance records: bad TIME %q %q", res[0], res[1])
	}
	now := time.UnixMilli(sec*1000 + usec/1000).UTC()
	out := make([]claim.Instance, 0, len(res)/2-1)
	for i := 2; i < len(res); i += 2 {
		inst, err := parseInstance(res[i+1])
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("read instance records: %s: %w", res[i], err)
		}
		if !inst.Gone(now) {
			out = append(out, inst)
		}
	}
	return out, now, nil
}

// parseInstance reads "<expires>:<retain>:<seen>:<skew>:<json>".
func parseInstance(v string) (claim.Instance, error) {
	parts := strings.SplitN(v, ":", 5)
	if len(parts) != 5 {
		return claim.Instance{}, fmt.Errorf("malformed record %q", shorten(v))
	}
	var n [4]int64
	for i := range n {
		x, err := strconv.ParseInt(parts[i], 10, 64)
		if err != nil {
			return claim.Instance{}, fmt.Errorf("malformed record %q: %w", shorten(v), err)
		}
		n[i] = x
	}
	inst, err := claim.DecodeInstance([]byte(parts[4]))
	if err != nil {
		return claim.Instance{}, err
	}
	inst.ExpiresAt, inst.Retain = time.UnixMilli(n[0]).UTC(), time.Duration(n[1])*time.Millisecond
	inst.LastSeen, inst.SkewMs = time.UnixMilli(n[2]).UTC(), n[3]
	return inst, nil
}

func shorten(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
