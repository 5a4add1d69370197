package dashboard

import (
	"slices"
	"strings"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sanitize"
)

// instanceRecord is one instance's heartbeat record as /api/v1/cluster
// prints it (docs/spec.md#s6-dashboard), its strings escaped to one line as
// by status.
type instanceRecord struct {
	Instance    string   `json:"instance"`
	Host        string   `json:"host"`
	PID         int      `json:"pid"`
	Version     string   `json:"version"`
	Tags        []string `json:"tags"`
	StartedAt   *string  `json:"started_at"`
	LastSeen    *string  `json:"last_seen"`
	LastSeenAgo *int64   `json:"last_seen_ago_ms"` // by the store's clock at the read; null where it has none
	SkewMs      int64    `json:"skew_ms"`
	JobsHash    string   `json:"jobs_hash"`
}

// instanceRecordOf converts inst, read at storeNow (zero: the store has no
// clock).
func instanceRecordOf(inst claim.Instance, storeNow time.Time) instanceRecord {
	rec := instanceRecord{
		Instance: sanitize.Line(inst.Name), Host: sanitize.Line(inst.Host), PID: inst.PID,
		Version: sanitize.Line(inst.Version), Tags: []string{}, SkewMs: inst.SkewMs, JobsHash: sanitize.Line(inst.JobsHash),
	}
	for _, t := range inst.Tags {
		rec.Tags = append(rec.Tags, sanitize.Line(t))
	}
	if !inst.StartedAt.IsZero() {
		s := inst.StartedAt.UTC().Format(time.RFC3339Nano)
		rec.StartedAt = &s
	}
	if !inst.LastSeen.IsZero() {
		s := inst.LastSeen.UTC().Format(time.RFC3339Nano)
		rec.LastSeen = &s
		if !storeNow.IsZero() {
			ago := storeNow.Sub(inst.LastSeen).Milliseconds()
			rec.LastSeenAgo = &ago
		}
	}
	return rec
}

// instanceRecords converts every record, sorted by instance name.
func instanceRecords(insts []claim.Instance, storeNow time.Time) []instanceRecord {
	out := make([]instanceRecord, 0, len(insts))
	for _, inst := range insts {
		out = append(out, instanceRecordOf(inst, storeNow))
	}
	slices.SortFunc(out, func(a, b instanceRecord) int { return strings.Compare(a.Instance, b.Instance) })
	return out
}
