package status

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sanitize"
)

// Job is what `anarchond jobs` knows of one job: the crontab's entry, its
// next slot, its control record and its newest run or note.
type Job struct {
	Name, Schedule, Timezone string
	// Next is the job's next slot; zero when it has none.
	Next time.Time
	// Control is the job's control record (Version 0: none); Now is when
	// it was read, by this host's clock, to tell whether its pause holds.
	Control claim.Control
	Now     time.Time
	// Last is the job's newest run or note; nil when the store has none.
	Last *claim.Run
	// Recent are the job's newest runs and notes, newest slot first, as
	// many as ReadJobs was asked for (Recent[0] is Last).
	Recent []claim.Run
	// Tags are the tags an instance needs to schedule the job;
	// PerInstance: every such instance runs each slot; NotHere: this
	// instance lacks the tags (docs/spec.md#s6-placement).
	Tags        []string
	PerInstance bool
	NotHere     bool
	// Drift are the groups of fields the live instances define
	// differently (cluster.JobDrift.Fields); nil when they agree.
	Drift []string
}

// JobRecord is one job as `jobs --json` prints it (docs/spec.md#s6-cli).
type JobRecord struct {
	Job          string   `json:"job"`
	Schedule     string   `json:"schedule"`
	Timezone     string   `json:"timezone"`
	NextSlot     *string  `json:"next_slot"`
	NextSlotMs   *int64   `json:"next_slot_ms"`
	Paused       bool     `json:"paused"`
	PausedUntil  *string  `json:"paused_until"`
	PausedReason string   `json:"paused_reason"`
	PausedBy     string   `json:"paused_by"`
	LastStatus   *string  `json:"last_status"`
	LastSlotMs   *int64   `json:"last_slot_ms"`
	Tags         []string `json:"tags"`
	PerInstance  bool     `json:"per_instance"`
	RunsHere     bool     `json:"runs_here"`
	// Drift: the live instances define the job differently
	// (docs/spec.md#s6-cluster); DriftFields names the fields.
	Drift       bool     `json:"drift"`
	DriftFields []string `json:"drift_fields"`
}

// JobRecordOf converts j, sanitising what came from the crontab and the
// store to one line each. The pause fields are set only while the pause
// holds (paused until a time already past reads as not paused).
func JobRecordOf(j Job) JobRecord {
	rec := JobRecord{
		Job: sanitize.Line(j.Name), Schedule: sanitize.Line(j.Schedule), Timezone: sanitize.Line(j.Timezone),
		Tags: append([]string{}, j.Tags...), PerInstance: j.PerInstance, RunsHere: !j.NotHere,
		DriftFields: []string{},
	}
	if !j.Next.IsZero() {
		s, ms := j.Next.UTC().Format(time.RFC3339Nano), j.Next.UnixMilli()
		rec.NextSlot, rec.NextSlotMs = &s, &ms
	}
	if c := j.Control; c.PausedAt(j.Now) {
		rec.Paused = true
		rec.PausedReason, rec.PausedBy = sanitize.Line(c.Reason), sanitize.Line(c.By)
		if !c.UntilTime().IsZero() {
			s := c.UntilTime().Format(time.RFC3339Nano)
			rec.PausedUntil = &s
		}
	}
	if j.Last != nil {
		st, ms := sanitize.Line(string(j.Last.Status)), j.Last.Slot
		rec.LastStatus, rec.LastSlotMs = &st, &ms
	}
	if len(j.Drift) > 0 {
		rec.Drift = true
		for _, f := range j.Drift {
			rec.DriftFields = append(rec.DriftFields, sanitize.Line(f))
		}
	}
	return rec
}

// WriteJobsJSON prints one JSON object per job and line.
func WriteJobsJSON(w io.Writer, jobs []Job) error {
	enc := json.NewEncoder(w)
	for _, j := range jobs {
		if err := enc.Encode(JobRecordOf(j)); err != nil {
			return fmt.Errorf("write jobs: %w", err)
		}
	}
	return nil
}

// WriteJobsTable prints the jobs as an aligned table with a header.
func WriteJobsTable(w io.Writer, jobs []Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// RUNS ON only where a job does not simply run on one instance of any.
	placed := slices.ContainsFunc(jobs, func(j Job) bool { return len(j.Tags) > 0 || j.PerInstance || j.NotHere })
	head := "JOB\tSCHEDULE\tZONE\tNEXT\tPAUSED\tLAST\tDRIFT"
	if placed {
		head += "\tRUNS ON"
	}
	fmt.Fprintln(tw, head)
	for _, j := range jobs {
		rec := JobRecordOf(j)
		next, last := "-", "-"
		if rec.NextSlot != nil {
			next = *rec.NextSlot
		}
		if rec.LastStatus != nil {
			last = *rec.LastStatus
			if j.Last.Reason != "" {
				last += " (" + sanitize.Line(j.Last.Reason) + ")"
			}
			last += " " + time.UnixMilli(*rec.LastSlotMs).UTC().Format(time.RFC3339Nano)
		}
		drift := "-"
		if rec.Drift {
			drift = strings.Join(rec.DriftFields, ",")
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", rec.Job, rec.Schedule, rec.Timezone, next, pausedCell(rec), last, drift)
		if placed {
			row += "\t" + runsOnCell(rec)
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write jobs: %w", err)
	}
	return nil
}

// pausedCell is the PAUSED column: "-", or until when, by whom and why.
func pausedCell(rec JobRecord) string {
	if !rec.Paused {
		return "-"
	}
	s := "until resumed"
	if rec.PausedUntil != nil {
		s = "until " + *rec.PausedUntil
	}
	if rec.PausedBy != "" {
		s += " by " + rec.PausedBy
	}
	if rec.PausedReason != "" {
		s += ": " + rec.PausedReason
	}
	return s
}

// runsOnCell is the RUNS ON column: which instances schedule the job (any,
// or those with its tags), "each" when every one of them runs every slot,
// and "(not here)" when this instance lacks the tags.
func runsOnCell(rec JobRecord) string {
	s := "any"
	if len(rec.Tags) > 0 {
		s = "tags " + strings.Join(rec.Tags, ",")
	}
	if rec.PerInstance {
		s += ", each"
	}
	if !rec.RunsHere {
		s += " (not here)"
	}
	return s
}
