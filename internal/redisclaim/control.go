package redisclaim

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
)

// The jobs' control records (docs/spec.md#s6-control), on every strategy:
//
//	{<ns>:<job>}:control  hash  version, paused, until, reason, by, at,
//	                            triggers (claim.EncodeTriggers's JSON text)
//	<ns>:controls         set   the names of the jobs that have one
//
// A write is one script on the job's hash (lua/control_set.lua) that
// compares its version with the caller's and sets the whole record, or
// refuses (claim.ErrConflict). The hash carries the job's hash tag, so it
// lives in the job's cluster slot like the job's other keys.
//
// Listing every record in one read needs their names: SCAN would have to
// visit every node of a cluster, which one client cannot do in one call,
// and <ns>:jobs is no fit (Prune removes a job from it once its runs are
// gone, and a job paused longer than backend.retention has none). So the
// job is added to the set <ns>:controls, outside the job's slot, with an
// SADD sent before the script: a name in the set whose hash was never
// written reads as no record, and a written hash is always listed. Names
// are never removed (a resumed job keeps its record, not paused). Controls
// reads the set and then every listed hash in one pipeline (one round trip
// per cluster node).

// controlSet is lua/control_set.lua.
var (
	//go:embed lua/control_set.lua
	controlSetLua string
	controlSet    = redis.NewScript(controlSetLua)
)

var (
	_ claim.Controller = (*Backend)(nil)
	_ claim.Controller = (*ClaimOnly)(nil)
)

// controls reads and writes the control records of namespace ns.
type controls struct {
	c  redis.UniversalClient
	ns string
}

func (k controls) key(job string) string { return "{" + k.ns + ":" + job + "}:control" }
func (k controls) index() string         { return k.ns + ":controls" }

// Controls returns every control record of the namespace.
func (b *Backend) Controls(ctx context.Context) ([]claim.Control, error) {
	return controls{b.c, b.ns}.list(ctx)
}

// SetControl writes c over the record at prevVersion.
func (b *Backend) SetControl(ctx context.Context, c claim.Control, prevVersion int64) (claim.Control, error) {
	return controls{b.c, b.ns}.set(ctx, c, prevVersion)
}

// Controls returns every control record of the namespace.
func (b *ClaimOnly) Controls(ctx context.Context) ([]claim.Control, error) {
	return controls{b.c, b.ns}.list(ctx)
}

// SetControl writes c over the record at prevVersion.
func (b *ClaimOnly) SetControl(ctx context.Context, c claim.Control, prevVersion int64) (claim.Control, error) {
	return controls{b.c, b.ns}.set(ctx, c, prevVersion)
}

// list reads the index, then every listed record in one pipeline.
func (k controls) list(ctx context.Context) ([]claim.Control, error) {
	jobs, err := k.c.SMembers(ctx, k.index()).Result()
	if err != nil {
		return nil, fmt.Errorf("read control records: read %s: %w", k.index(), err)
	}
	jobs = slices.DeleteFunc(jobs, func(j string) bool { return checkJob(j) != nil })
	if len(jobs) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(jobs))
	_, err = k.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, job := range jobs {
			cmds[i] = p.HGetAll(ctx, k.key(job))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read control records: %w", err)
	}
	out := make([]claim.Control, 0, len(jobs))
	for i, cmd := range cmds {
		h := cmd.Val()
		if len(h) == 0 {
			continue // listed, never written
		}
		c, err := parseControl(jobs[i], h)
		if err != nil {
			return nil, fmt.Errorf("read control records: %s: %w", k.key(jobs[i]), err)
		}
		out = append(out, c)
	}
	return out, nil
}

// parseControl reads a record's hash.
func parseControl(job string, h map[string]string) (claim.Control, error) {
	c := claim.Control{Job: job, Reason: h["reason"], By: h["by"], Paused: h["paused"] == "1"}
	for _, f := range []struct {
		name string
		to   *int64
	}{{"version", &c.Version}, {"until", &c.Until}, {"at", &c.At}} {
		v, err := strconv.ParseInt(h[f.name], 10, 64)
		if err != nil {
			return claim.Control{}, fmt.Errorf("field %s: %w", f.name, err)
		}
		*f.to = v
	}
	var err error
	if c.Triggers, err = claim.DecodeTriggers(h["triggers"]); err != nil {
		return claim.Control{}, fmt.Errorf("field triggers: %w", err)
	}
	return c, nil
}

// set adds the job to the index, then compares and sets its record.
func (k controls) set(ctx context.Context, c claim.Control, prevVersion int64) (claim.Control, error) {
	if err := c.Check(); err != nil {
		return claim.Control{}, err
	}
	if err := checkJob(c.Job); err != nil {
		return claim.Control{}, fmt.Errorf("set control: %w", err)
	}
	if err := k.c.SAdd(ctx, k.index(), c.Job).Err(); err != nil {
		return claim.Control{}, fmt.Errorf("set control of %s: add it to %s: %w", c.Job, k.index(), err)
	}
	paused := "0"
	if c.Paused {
		paused = "1"
	}
	trig, err := claim.EncodeTriggers(c.Triggers)
	if err != nil {
		return claim.Control{}, fmt.Errorf("set control of %s: %w", c.Job, err)
	}
	res, err := controlSet.Run(ctx, k.c, []string{k.key(c.Job)},
		prevVersion, paused, c.Until, c.Reason, c.By, c.At, trig).Int64Slice()
	switch {
	case err != nil:
		return claim.Control{}, fmt.Errorf("set control of %s: %w", c.Job, err)
	case len(res) != 2:
		return claim.Control{}, fmt.Errorf("set control of %s: unexpected reply %v", c.Job, res)
	case res[0] == 0:
		return claim.Control{}, fmt.Errorf("set control of %s at version %d (stored %d): %w", c.Job, prevVersion, res[1], claim.ErrConflict)
	}
	c.Version = res[1]
	if len(c.Triggers) == 0 {
		c.Triggers = nil
	}
	return c, nil
}
