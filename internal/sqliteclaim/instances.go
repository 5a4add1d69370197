package sqliteclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sqlclaim"
)

// The instances' heartbeat records (docs/spec.md#s6-cluster): the table
// instances, one row per instance name (schema migration 5). A beat is
// one upsert stamped with the store's clock (nowMs, the host's: the file
// is on one host), preceded by a delete of the rows past their retention.
// Tags and jobs are JSON text.

var _ claim.Registry = (*Backend)(nil)

// instancesV5 is schema migration 5.
const instancesV5 = `CREATE TABLE instances (
		name       TEXT    NOT NULL PRIMARY KEY,
		host       TEXT    NOT NULL DEFAULT '',
		pid        INTEGER NOT NULL DEFAULT 0,
		version    TEXT    NOT NULL DEFAULT '',
		tags       TEXT    NOT NULL DEFAULT '[]',  -- JSON array
		started_at INTEGER NOT NULL DEFAULT 0,     -- ms, the instance's clock
		last_seen  INTEGER NOT NULL,               -- ms, store time of the last beat
		expires_at INTEGER NOT NULL,               -- ms, store time: last_seen + the beat's ttl
		retain_ms  INTEGER NOT NULL DEFAULT 0,     -- kept this long after expires_at
		skew_ms    INTEGER NOT NULL DEFAULT 0,     -- the instance's clock minus the store's
		jobs       TEXT    NOT NULL DEFAULT '{}',  -- JSON object: job -> definition hash
		jobs_hash  TEXT    NOT NULL DEFAULT ''
	);`

// SQL of the instance records.
const (
	listInstancesSQL = `SELECT ` + sqlclaim.InstanceColumns + `, ` + nowMs + ` FROM instances
		WHERE expires_at + retain_ms > ` + nowMs

	pruneInstancesSQL = `DELETE FROM instances WHERE expires_at + retain_ms <= ` + nowMs

	// beatSQL: ?7 is the ttl in ms, ?9 the instance's clock at the beat
	// (0: unknown, no skew).
	beatSQL = `INSERT INTO instances (` + sqlclaim.InstanceColumns + `)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ` + nowMs + `, ` + nowMs + ` + ?7, ?8,
			CASE WHEN ?9 = 0 THEN 0 ELSE ?9 - ` + nowMs + ` END, ?10, ?11)
		` + sqlclaim.UpsertInstance
)

// Beat prunes the records past their retention and writes inst's.
func (b *Backend) Beat(ctx context.Context, inst claim.Instance, ttl time.Duration) (claim.Instance, error) {
	if err := inst.Check(); err != nil {
		return claim.Instance{}, err
	}
	tags, jobs, err := instanceJSON(inst)
	if err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	}
	if err := b.lockWrite(ctx); err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	}
	defer b.unlockWrite()
	if _, err := b.db.ExecContext(ctx, pruneInstancesSQL); err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: prune: %w", inst.Name, err)
	}
	got, err := scanInstance(b.db.QueryRowContext(ctx, beatSQL, inst.Name, inst.Host, inst.PID, inst.Version,
		tags, claim.MillisOf(inst.StartedAt), ttl.Milliseconds(), inst.Retain.Milliseconds(), claim.MillisOf(inst.LastSeen), jobs, inst.JobsHash))
	if err != nil {
		return claim.Instance{}, fmt.Errorf("beat of %s: %w", inst.Name, err)
	}
	return got, nil
}

// Instances returns every record within its retention, and the store's
// time.
func (b *Backend) Instances(ctx context.Context) ([]claim.Instance, time.Time, error) {
	var now int64
	out, err := queryAll(ctx, b.db, func(s sqlclaim.Scanner) (claim.Instance, error) { return scanInstance(s, &now) },
		listInstancesSQL)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read instance records: %w", err)
	}
	if len(out) == 0 {
		if err := b.db.QueryRowContext(ctx, `SELECT `+nowMs).Scan(&now); err != nil {
			return nil, time.Time{}, fmt.Errorf("read the store's time: %w", err)
		}
	}
	return out, time.UnixMilli(now).UTC(), nil
}

// instanceJSON is inst's tags and jobs as JSON text.
func instanceJSON(inst claim.Instance) (tags, jobs string, err error) {
	t, err := json.Marshal(nonNil(inst.Tags))
	if err != nil {
		return "", "", err
	}
	j, err := json.Marshal(inst.Jobs)
	if err != nil {
		return "", "", err
	}
	if inst.Jobs == nil {
		j = []byte("{}")
	}
	return string(t), string(j), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// scanInstance reads the columns of sqlclaim.InstanceColumns, then extra.
func scanInstance(s sqlclaim.Scanner, extra ...any) (claim.Instance, error) {
	var (
		i                                           claim.Instance
		tags, jobs                                  string
		started, seen, expires, retain, skew, pid64 int64
	)
	dest := append([]any{&i.Name, &i.Host, &pid64, &i.Version, &tags, &started, &seen, &expires,
		&retain, &skew, &jobs, &i.JobsHash}, extra...)
	if err := s.Scan(dest...); err != nil {
		return claim.Instance{}, err
	}
	if err := json.Unmarshal([]byte(tags), &i.Tags); err != nil {
		return claim.Instance{}, fmt.Errorf("instance %s: tags: %w", i.Name, err)
	}
	if err := json.Unmarshal([]byte(jobs), &i.Jobs); err != nil {
		return claim.Instance{}, fmt.Errorf("instance %s: jobs: %w", i.Name, err)
	}
	i.PID, i.SkewMs = int(pid64), skew
	i.StartedAt, i.LastSeen, i.ExpiresAt = claim.TimeOfMillis(started), claim.TimeOfMillis(seen), claim.TimeOfMillis(expires)
	i.Retain = time.Duration(retain) * time.Millisecond
	return i, nil
}
