package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/anarchon/anarchon/internal/cluster"
	"github.com/anarchon/anarchon/internal/sanitize"
)

// InstanceRecord is one instance as `cluster --json` prints it
// (docs/spec.md#s6-cli).
type InstanceRecord struct {
	Instance  string   `json:"instance"`
	Host      string   `json:"host"`
	PID       int      `json:"pid"`
	Version   string   `json:"version"`
	Tags      []string `json:"tags"`
	StartedAt string   `json:"started_at"`
	LastSeen  string   `json:"last_seen"`
	Alive     bool     `json:"alive"`
	SkewMs    int64    `json:"skew_ms"`
	JobsHash  string   `json:"jobs_hash"`
	Jobs      int      `json:"jobs"`
	// Outdated: alive, with a version older than the newest live one.
	Outdated bool `json:"outdated"`
	// Drift are the jobs this instance defines differently from another
	// live one, or lacks.
	Drift []string `json:"drift"`
}

// InstanceRecordOf converts m, sanitising what came from the store.
func InstanceRecordOf(m cluster.Member) InstanceRecord {
	rec := InstanceRecord{
		Instance: sanitize.Line(m.Name), Host: sanitize.Line(m.Host), PID: m.PID, Version: sanitize.Line(m.Version),
		Tags: []string{}, StartedAt: stamp(m.StartedAt), LastSeen: stamp(m.LastSeen), Alive: m.Alive,
		SkewMs: m.SkewMs, JobsHash: sanitize.Line(m.JobsHash), Jobs: len(m.Jobs), Outdated: m.Outdated,
		Drift: []string{},
	}
	for _, t := range m.Tags {
		rec.Tags = append(rec.Tags, sanitize.Line(t))
	}
	for _, j := range m.Drift {
		rec.Drift = append(rec.Drift, sanitize.Line(j))
	}
	return rec
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// WriteClusterJSON prints one JSON object per instance and line, live
// ones first.
func WriteClusterJSON(w io.Writer, v cluster.View) error {
	enc := json.NewEncoder(w)
	for _, m := range ordered(v) {
		if err := enc.Encode(InstanceRecordOf(m)); err != nil {
			return fmt.Errorf("write cluster: %w", err)
		}
	}
	return nil
}

// ordered is v's members, live ones first, each part by name.
func ordered(v cluster.View) []cluster.Member {
	out := make([]cluster.Member, 0, len(v.Members))
	for _, alive := range []bool{true, false} {
		for _, m := range v.Members {
			if m.Alive == alive {
				out = append(out, m)
			}
		}
	}
	return out
}

// WriteClusterTable prints the instances as an aligned table, then one
// line per drifting job and per outdated instance.
func WriteClusterTable(w io.Writer, v cluster.View) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tHOST\tVERSION\tSTATE\tLAST SEEN\tSKEW\tJOBS\tDRIFT")
	for _, m := range ordered(v) {
		rec := InstanceRecordOf(m)
		state := "alive"
		switch {
		case !m.Alive:
			state = "gone"
		case m.Outdated:
			state = "alive, outdated"
		}
		drift := "-"
		if len(rec.Drift) > 0 {
			drift = strings.Join(rec.Drift, ",")
		}
		ago := v.Now.Sub(m.LastSeen).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\t%dms\t%d (%s)\t%s\n", rec.Instance, rec.Host, rec.Version, state,
			ago, rec.SkewMs, rec.Jobs, rec.JobsHash, drift)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write cluster: %w", err)
	}
	for _, d := range v.Drift {
		fmt.Fprintf(w, "drift: job %s: %s differ: %s\n", sanitize.Line(d.Job),
			sanitize.Line(strings.Join(d.Fields, ", ")), sanitize.Line(cluster.Describe(d)))
	}
	for _, m := range v.Members {
		if m.Outdated {
			fmt.Fprintf(w, "outdated: %s runs %s, older than %s\n", sanitize.Line(m.Name), sanitize.Line(m.Version), sanitize.Line(v.Newest))
		}
	}
	return nil
}
