package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/anarchon/anarchon/test/chaos/check"
)

// runChecker checks the run in dir with test/chaos/check: it prints the
// report, writes summary.json and returns the run's table row and whether
// the run had no violation. It is the harness's only use of the checker's
// API.
func runChecker(dir string) (tableRow, bool, error) {
	r, err := check.Load(dir)
	if err != nil {
		return tableRow{}, false, err
	}
	rep := check.Check(r)
	fmt.Println(rep.Text())
	s := rep.Summary
	if err := writeJSON(filepath.Join(dir, "summary.json"), s); err != nil {
		return tableRow{}, false, err
	}
	row := tableRow{
		backend:    s.Backend,
		duration:   (time.Duration(s.DurationMs) * time.Millisecond).Round(time.Second).String(),
		instances:  s.Instances,
		runs:       fmt.Sprintf("%d (%d attempts)", s.Runs, s.Attempts),
		faults:     s.FaultsByKind,
		violations: fmt.Sprint(s.Violations),
		takeover:   "-",
		missed:     s.MissedByReason,
		seed:       r.Info.Seed,
	}
	if s.Violations > 0 {
		row.violations += " (" + counts(s.ViolationsByKind) + ")"
		for _, v := range rep.Violations {
			row.evidence = append(row.evidence, fmt.Sprint(v))
		}
	}
	if s.Takeovers > 0 {
		row.takeover = fmt.Sprintf("%v/%v ms (max %v, n=%d)", s.TakeoverP50Ms, s.TakeoverP99Ms, s.TakeoverMaxMs, s.Takeovers)
	}
	return row, rep.OK(), nil
}
