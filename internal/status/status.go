// Package status renders the runs a store remembers, for `anarchond status`:
// an aligned table for people and one JSON object per line for programs.
// Everything that came from a job or a store passes through internal/sanitize
// first, so a job's output cannot drive the reader's terminal: one-line
// fields keep no line feed or tab (a table row stays one row), the output
// tail keeps its lines.
package status

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sanitize"
)

// Record is one run as `status --json` prints it (docs/spec.md#s6-cli).
type Record struct {
	Job        string  `json:"job"`
	Slot       string  `json:"slot"`
	SlotMs     int64   `json:"slot_ms"`
	Status     string  `json:"status"`
	Attempt    int     `json:"attempt"`
	Instance   string  `json:"instance"`
	Token      string  `json:"token"`
	StartedAt  *string `json:"started_at"`
	FinishedAt *string `json:"finished_at"`
	DurationMs *int64  `json:"duration_ms"`
	ExitCode   *int    `json:"exit_code"`
	OutputTail string  `json:"output_tail"`
	// Reason says why a slot no attempt ran was skipped, missed or
	// unknown; empty for a run.
	Reason string `json:"reason"`
	// HeldBySlotMs is, for a slot skipped for overlap, the slot of the
	// run that held the job (null when not known, and for the others).
	HeldBySlotMs *int64 `json:"held_by_slot_ms"`
	// Kind is scheduled, manual (anarchond trigger) or retry; RequestedBy
	// who asked for a manual run or a retry (null for a scheduled one);
	// RetryOfSlotMs the slot a retry retries (null for the others).
	Kind          string  `json:"kind"`
	RequestedBy   *string `json:"requested_by"`
	RetryOfSlotMs *int64  `json:"retry_of_slot_ms"`
}

// RecordOf converts a run, sanitising its strings: the output tail keeps
// its line feeds and tabs, the other fields are escaped to one line.
func RecordOf(r claim.Run) Record {
	rec := Record{
		Job:        sanitize.Line(r.Job),
		Slot:       time.UnixMilli(r.Slot).UTC().Format(time.RFC3339Nano),
		SlotMs:     r.Slot,
		Status:     sanitize.Line(string(r.Status)),
		Attempt:    r.Attempt,
		Instance:   sanitize.Line(r.Instance),
		Token:      sanitize.Line(string(r.Token)),
		ExitCode:   r.ExitCode,
		OutputTail: sanitize.Text(r.OutputTail),
		Reason:     sanitize.Line(r.Reason),
		Kind:       KindScheduled,
	}
	if r.Kind != "" {
		rec.Kind = sanitize.Line(r.Kind)
		by := sanitize.Line(r.RequestedBy)
		rec.RequestedBy = &by
	}
	if r.RetryOf != 0 {
		o := r.RetryOf
		rec.RetryOfSlotMs = &o
	}
	if r.HeldBy != 0 {
		h := r.HeldBy
		rec.HeldBySlotMs = &h
	}
	if !r.StartedAt.IsZero() {
		s := r.StartedAt.UTC().Format(time.RFC3339Nano)
		rec.StartedAt = &s
	}
	if !r.FinishedAt.IsZero() {
		s := r.FinishedAt.UTC().Format(time.RFC3339Nano)
		rec.FinishedAt = &s
		d := r.Duration().Milliseconds()
		rec.DurationMs = &d
	}
	return rec
}

// WriteJSON prints one JSON object per run and line.
func WriteJSON(w io.Writer, runs []claim.Run) error {
	enc := json.NewEncoder(w)
	for _, r := range runs {
		if err := enc.Encode(RecordOf(r)); err != nil {
			return fmt.Errorf("write status: %w", err)
		}
	}
	return nil
}

// WriteTable prints the runs as an aligned table with a header.
func WriteTable(w io.Writer, runs []claim.Run) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSLOT\tSTATUS\tATTEMPT\tINSTANCE\tSTARTED\tDURATION\tEXIT\tKIND")
	for _, r := range runs {
		rec := RecordOf(r)
		started, dur, exit := "-", "-", "-"
		if !r.StartedAt.IsZero() {
			started = r.StartedAt.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		if rec.DurationMs != nil {
			dur = r.Duration().Round(time.Millisecond).String()
		}
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n",
			rec.Job, rec.Slot, statusCell(rec), rec.Attempt, rec.Instance, started, dur, exit, kindCell(rec))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// statusCell is the STATUS column: the status, and for a slot no attempt
// ran its reason and the slot of the run that held the job.
func statusCell(rec Record) string {
	switch {
	case rec.HeldBySlotMs != nil:
		return fmt.Sprintf("%s (%s; held by %s)", rec.Status, rec.Reason,
			time.UnixMilli(*rec.HeldBySlotMs).UTC().Format(time.RFC3339Nano))
	case rec.Reason != "":
		return fmt.Sprintf("%s (%s)", rec.Status, rec.Reason)
	}
	return rec.Status
}

// Outcomes are the values of status --outcome: the run states, abandoned
// (computed), and the outcomes of slots no attempt ran.
var Outcomes = append(append(append([]claim.Status{}, claim.RunStatuses...), Abandoned), claim.NoteStatuses...)

// Filter is what status shows: the runs of some outcomes, or all.
type Filter struct {
	// Outcomes selects; empty: the runs (claim.RunStatuses and abandoned),
	// not the slots no attempt ran.
	Outcomes []claim.Status
	All      bool
}

// ParseOutcomes reads a comma-separated list of outcomes.
func ParseOutcomes(list string) ([]claim.Status, error) {
	var out []claim.Status
	for _, f := range strings.Split(list, ",") {
		st := claim.Status(strings.TrimSpace(f))
		if !slices.Contains(Outcomes, st) {
			return nil, fmt.Errorf("outcome %q: want a comma-separated list of %v", f, Outcomes)
		}
		out = append(out, st)
	}
	return out, nil
}

// Query is the store's selection for f (abandoned runs are running ones).
func (f Filter) Query() []claim.Status {
	switch {
	case f.All:
		return nil
	case len(f.Outcomes) == 0:
		return claim.RunStatuses
	}
	var q []claim.Status
	for _, st := range f.Outcomes {
		if st == Abandoned {
			st = claim.StatusRunning
		}
		if !slices.Contains(q, st) {
			q = append(q, st)
		}
	}
	return q
}

// Keep returns the runs of runs, marked by Liveness.Mark, that f shows.
func (f Filter) Keep(runs []claim.Run) []claim.Run {
	if f.All || len(f.Outcomes) == 0 {
		return runs
	}
	return slices.DeleteFunc(runs, func(r claim.Run) bool { return !slices.Contains(f.Outcomes, r.Status) })
}

// kindCell is the KIND column: scheduled; manual and who asked; retry and
// the slot it retries.
func kindCell(rec Record) string {
	switch {
	case rec.RetryOfSlotMs != nil:
		return "retry of " + time.UnixMilli(*rec.RetryOfSlotMs).UTC().Format(time.RFC3339Nano)
	case rec.RequestedBy != nil && *rec.RequestedBy != "":
		return rec.Kind + " by " + *rec.RequestedBy
	}
	return rec.Kind
}
