package pgclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sqlclaim"
)

// The instances' heartbeat records (docs/spec.md#s6-cluster): the table
// <table>_instances, one row per instance name (schema migration 9). A
// beat is one statement: it deletes the other rows past their retention
// and upserts the instance's row, stamped with the server's clock read
// once (last_seen, expires_at, and the skew against the instance's
// clock). The table belongs to the runs table, as its namespace.

var _ claim.Registry = (*Backend)(nil)

// instancesV9 is schema migration 9.
const instancesV9 = `	CREATE TABLE {{instances}} (
		name       text    PRIMARY KEY,
		host       text    NOT NULL DEFAULT '',
		pid        bigint  NOT NULL DEFAULT 0,
		version    text    NOT NULL DEFAULT '',
		tags       text[]  NOT NULL DEFAULT '{}',
		started_at bigint  NOT NULL DEFAULT 0,     -- ms, the instance's clock
		last_seen  bigint  NOT NULL,               -- ms, server time of the last beat
		expires_at bigint  NOT NULL,               -- ms, server time: last_seen + the beat's ttl
		retain_ms  bigint  NOT NULL DEFAULT 0,     -- kept this long after expires_at
		skew_ms    bigint  NOT NULL DEFAULT 0,     -- the instance's clock minus the server's
		jobs       jsonb   NOT NULL DEFAULT '{}',  -- job -> definition hash
		jobs_hash  text    NOT NULL DEFAULT ''
	);
`

// SQL of the instance records.
const (
	listInstancesSQL = `WITH now AS (SELECT {{now}} AS ms)
		SELECT ` + sqlclaim.InstanceColumns + `, now.ms FROM now LEFT JOIN {{instances}} ON expires_at + retain_ms > now.ms`

	// beatSQL: $7 is the ttl in ms, $9 the instance's clock at the beat
	// (0: unknown, no skew).
	beatSQL = `WITH now AS (SELECT {{now}} AS ms),
		pruned AS (DELETE FROM {{instances}} AS i USING now
			WHERE i.expires_at + i.retain_ms <= now.ms AND i.name <> $1)
		INSERT INTO {{instances}} AS i (` + sqlclaim.InstanceColumns + `)
		SELECT $1, $2, $3, $4, $5, $6, now.ms, now.ms + $7, $8,
			CASE WHEN $9::bigint = 0 THEN 0 ELSE $9::bigint - now.ms END, $10, $11 FROM now
		` + sqlclaim.UpsertInstance
)

// Beat prunes the other records past their retention and writes inst's,
// in one statement.
func (b *Backend) Beat(ctx context.Context, inst claim.Instance, ttl time.Duration) (claim.Instance, error) {
	if err := inst.Check(); err != nil {
		return claim.Instance{}, err
	}
	jobs, err := json.Marshal(inst.Jobs)
	if err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	}
	if inst.Jobs == nil {
		jobs = []byte("{}")
	}
	tags := make([]string, len(inst.Tags))
	for k, t := range inst.Tags {
		tags[k] = cleanText(t)
	}
	rows, err := b.pool.Query(ctx, b.names.expand(beatSQL), cleanText(inst.Name), cleanText(inst.Host), inst.PID,
		cleanText(inst.Version), tags, claim.MillisOf(inst.StartedAt), ttl.Milliseconds(), inst.Retain.Milliseconds(),
		claim.MillisOf(inst.LastSeen), string(jobs), cleanText(inst.JobsHash))
	if err != nil {
		return claim.Instance{}, b.wrap(fmt.Errorf("beat of %s: %w", inst.Name, err))
	}
	got, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (claim.Instance, error) {
		return scanInstance(row)
	})
	if err != nil {
		return claim.Instance{}, b.wrap(fmt.Errorf("beat of %s: %w", inst.Name, err))
	}
	return got, nil
}

// Instances returns every record within its retention, and the server's
// time, in one statement.
func (b *Backend) Instances(ctx context.Context) ([]claim.Instance, time.Time, error) {
	rows, err := b.pool.Query(ctx, b.names.expand(listInstancesSQL))
	if err != nil {
		return nil, time.Time{}, b.wrap(fmt.Errorf("read instance records: %w", err))
	}
	defer rows.Close()
	var (
		out []claim.Instance
		now int64
	)
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, time.Time{}, b.wrap(fmt.Errorf("read instance records: %w", err))
		}
		if vals[0] == nil { // no record: the LEFT JOIN's row of now alone
			now, _ = vals[len(vals)-1].(int64)
			continue
		}
		i, err := scanInstance(rows, &now)
		if err != nil {
			return nil, time.Time{}, b.wrap(fmt.Errorf("read instance records: %w", err))
		}
		out = append(out, i)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, b.wrap(fmt.Errorf("read instance records: %w", err))
	}
	return out, time.UnixMilli(now).UTC(), nil
}

// scanInstance reads the columns of sqlclaim.InstanceColumns, then extra.
func scanInstance(row pgx.Row, extra ...any) (claim.Instance, error) {
	var (
		i                                    claim.Instance
		pid                                  int64
		started, seen, expires, retain, skew int64
		jobs                                 []byte
	)
	dest := append([]any{&i.Name, &i.Host, &pid, &i.Version, &i.Tags, &started, &seen, &expires,
		&retain, &skew, &jobs, &i.JobsHash}, extra...)
	if err := row.Scan(dest...); err != nil {
		return claim.Instance{}, err
	}
	if err := json.Unmarshal(jobs, &i.Jobs); err != nil {
		return claim.Instance{}, fmt.Errorf("instance %s: jobs: %w", i.Name, err)
	}
	i.PID, i.SkewMs = int(pid), skew
	i.StartedAt, i.LastSeen, i.ExpiresAt = claim.TimeOfMillis(started), claim.TimeOfMillis(seen), claim.TimeOfMillis(expires)
	i.Retain = time.Duration(retain) * time.Millisecond
	return i, nil
}
