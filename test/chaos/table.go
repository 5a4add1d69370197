package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// tableRow is one backend's line of the results table.
type tableRow struct {
	backend    string
	duration   string
	instances  int
	runs       string // runs (attempts)
	faults     map[string]int
	violations string // count, and by kind
	takeover   string // p50/p99 (max, count)
	missed     map[string]int
	failed     string   // a harness error instead of a result
	evidence   []string // the violations, as the report prints them
	seed       int64    // of the fault schedule
}

var tableHeader = []string{"backend", "duration", "instances", "runs", "faults by kind", "violations", "takeover p50/p99", "missed by reason"}

// printTable prints the rows as a markdown table.
func printTable(w io.Writer, rows []tableRow) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(tableHeader, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(tableHeader)))
	for _, r := range rows {
		fmt.Fprintln(w, r.markdown())
	}
	// The violations again, under the table: the end of a long log is
	// what a CI page shows.
	for _, r := range rows {
		if len(r.evidence) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nviolations of %s (the same faults again: make chaos BACKEND=%s SEED=%d):\n", r.backend, r.backend, r.seed)
		for _, v := range r.evidence {
			fmt.Fprintf(w, "  %s\n", v)
		}
	}
}

func (r tableRow) markdown() string {
	if r.failed != "" {
		msg := strings.ReplaceAll(strings.ReplaceAll(r.failed, "\n", " "), "|", "\\|")
		return fmt.Sprintf("| %s | harness error: %s | | | | | | |", r.backend, msg)
	}
	return fmt.Sprintf("| %s | %s | %d | %s | %s | %s | %s | %s |",
		r.backend, r.duration, r.instances, r.runs, counts(r.faults), r.violations, r.takeover, counts(r.missed))
}

// counts renders a map of counts as "a 3, b 1", largest first.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
