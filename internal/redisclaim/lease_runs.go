package redisclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
)

// Notes and status of the lease strategy (see lease.go).

// Record stores n as the state of (n.Job, n.Slot) unless the job's state
// already holds the slot (a claim, or an earlier note): one script
// (lua/lease_record.lua), atomic with every claim of the job, that stamps
// the note with store time (n.At is not used). A later claim of the slot
// is answered done. As with a claim, the first write of a job that has no
// state yet is sent again after the SADD of the job to the index of jobs
// (waited for at most indexGrace).
func (b *Backend) Record(ctx context.Context, n claim.Note) (bool, error) {
	if err := checkNote(n, 0); err != nil {
		return false, fmt.Errorf("record %s@%d: %w", n.Job, n.Slot, err)
	}
	k := b.keys(n.Job)
	keys := []string{k.state, k.notes, k.history}
	args := []any{n.Slot, string(n.Status), n.Reason, n.HeldBy, n.Instance, b.maxLen, ""}
	wait := b.idx.touch(n.Job)
	v, err := leaseRecord.Run(ctx, b.c, keys, args...).Slice()
	wait(ctx)
	if first, _ := firstString(v); err == nil && first == "index" {
		args[len(args)-1] = "1"
		b.idx.force(n.Job)(ctx)
		v, err = leaseRecord.Eval(ctx, b.c, keys, args...).Slice()
	}
	if err != nil {
		return false, fmt.Errorf("record %s@%d: %w", n.Job, n.Slot, err)
	}
	switch first, _ := firstString(v); first {
	case "recorded":
		return true, nil
	case "exists":
		return false, nil
	}
	return false, fmt.Errorf("record %s@%d: unexpected script reply %v", n.Job, n.Slot, v)
}

// ListRuns returns recent runs and notes, newest slot first (then by job),
// at most q.Limit (default 50) of those in q.Statuses (all when empty).
// Each job's runs are indexed by state: running in :live, settled in
// :slots, notes in :notes; it reads only the indexes of the states q
// selects, the newest n slots of each, merges them, and reads the runs in
// that order until it has the limit. Where a selected run may lie beyond
// the n read (the indexes held more, and too few runs in the states asked
// for were found), it reads again with 4n.
func (b *Backend) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	jobs, err := listJobs(ctx, b.c, b.jobsKey(), q)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	l := &leaseListing{b: b, q: q, limit: listLimit(q), jobs: jobs, src: sourcesOf(q), runs: map[runKey]*claim.Run{}}
	if len(jobs) == 0 || !(l.src.live || l.src.slots || l.src.notes) {
		return nil, nil
	}
	for n := int64(l.limit); ; n *= 4 {
		cands, more, err := l.candidates(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out, err := l.pick(ctx, cands)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		if len(out) >= l.limit || !more {
			return out, nil
		}
	}
}

// listSources are the indexes of a job a listing reads.
type listSources struct{ live, slots, notes bool }

// sourcesOf is the indexes that hold the runs q selects: :live the running
// runs (an earlier version's are also in :slots), :slots the settled ones,
// :notes the notes (an earlier version's Prune may also index them in
// :slots).
func sourcesOf(q claim.ListQuery) listSources {
	if len(q.Statuses) == 0 {
		return listSources{live: true, slots: true, notes: true}
	}
	var s listSources
	for _, st := range q.Statuses {
		switch {
		case st == claim.StatusRunning:
			s.live = true
		case st.Noted():
			s.notes = true
		case st.Final():
			s.slots = true
		}
	}
	return s
}

// leaseListing is one ListRuns: the runs read so far (nil: gone) survive
// from one reading of the indexes to the next.
type leaseListing struct {
	b     *Backend
	q     claim.ListQuery
	limit int
	jobs  []string
	src   listSources
	runs  map[runKey]*claim.Run
}

// candidates reads the indexes of every job, the newest n slots of
// :slots and :notes, all of :live, and returns their slots, newest first,
// down to the oldest slot below which one of them (more: any) may hold
// others.
func (l *leaseListing) candidates(ctx context.Context, n int64) (cands []runKey, more bool, err error) {
	type read struct {
		job   string
		key   string
		slots *redis.StringSliceCmd
		full  bool // a capped read that came back full
	}
	var reads []read
	if _, err := l.b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, job := range l.jobs {
			// :live first: a run that settles in between is then read in
			// both, and never in neither.
			k := l.b.keys(job)
			if l.src.live {
				reads = append(reads, read{job: job, key: k.live, slots: p.HKeys(ctx, k.live)})
			}
			for _, idx := range []struct {
				on  bool
				key string
			}{{l.src.slots, k.slots}, {l.src.notes, k.notes}} {
				if idx.on {
					reads = append(reads, read{job: job, key: idx.key, slots: p.ZRevRange(ctx, idx.key, 0, n-1), full: true})
				}
			}
		}
		return nil
	}); err != nil {
		return nil, false, fmt.Errorf("read the slots: %w", err)
	}
	seen := map[runKey]bool{}
	bound := int64(-1) // the slots from bound up were all read
	for _, r := range reads {
		got := r.slots.Val()
		for i, s := range got {
			slot, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, false, fmt.Errorf("%s holds %q, not a slot", r.key, s)
			}
			if k := (runKey{r.job, slot}); !seen[k] {
				seen[k] = true
				cands = append(cands, k)
			}
			if r.full && int64(len(got)) == n && i == len(got)-1 {
				// The index may hold older slots than its lowest read.
				bound, more = max(bound, slot), true
			}
		}
	}
	cands = slices.DeleteFunc(cands, func(k runKey) bool { return k.slot < bound })
	slices.SortFunc(cands, func(a, b runKey) int {
		return cmp.Or(cmp.Compare(b.slot, a.slot), cmp.Compare(a.job, b.job))
	})
	return cands, more, nil
}

// pick reads the runs of cands in order, in ever larger pipelines (the
// first of the limit), and returns the first limit of them in the states
// q selects.
func (l *leaseListing) pick(ctx context.Context, cands []runKey) ([]claim.Run, error) {
	var out []claim.Run
	for i, chunk := 0, l.limit; i < len(cands) && len(out) < l.limit; chunk *= 2 {
		end := min(len(cands), i+chunk)
		if err := l.read(ctx, cands[i:end]); err != nil {
			return nil, err
		}
		for _, k := range cands[i:end] {
			if r := l.runs[k]; r != nil && l.q.Wants(r.Status) && len(out) < l.limit {
				out = append(out, *r)
			}
		}
		i = end
	}
	return out, nil
}

// read reads the runs of keys not read yet, in one pipeline.
func (l *leaseListing) read(ctx context.Context, keys []runKey) error {
	keys = slices.DeleteFunc(slices.Clone(keys), func(k runKey) bool { _, ok := l.runs[k]; return ok })
	if len(keys) == 0 {
		return nil
	}
	states := make([]*redis.StringCmd, len(keys))
	if _, err := l.b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			states[i] = p.HGet(ctx, l.b.keys(k.job).state, strconv.FormatInt(k.slot, 10))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the runs: %w", err)
	}
	for i, k := range keys {
		raw, err := states[i].Result()
		if errors.Is(err, redis.Nil) {
			l.runs[k] = nil // pruned between the two reads
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s@%d: %w", k.job, k.slot, err)
		}
		run, err := decodeRun(k.job, k.slot, raw)
		if err != nil {
			return fmt.Errorf("%s@%d: %w", k.job, k.slot, err)
		}
		l.runs[k] = &run
	}
	return nil
}
