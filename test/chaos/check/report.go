package check

import (
	"fmt"
	"slices"
	"strings"
)

// Report is what Check found: every violation with its evidence, the
// cases it let pass with their reasons, and the figures.
type Report struct {
	Backend    string
	Lease      bool
	Violations []Violation
	Excused    []Excuse
	Notes      []string
	// TakeoverMs are the measured takeover latencies (start of attempt+1
	// minus the fault), in the order found.
	TakeoverMs []int64
	Summary    Summary
}

// Summary is the report's figures, for summary.json.
type Summary struct {
	Backend      string         `json:"backend"`
	DurationMs   int64          `json:"duration_ms"`
	Instances    int            `json:"instances"`
	Runs         int            `json:"runs"`     // distinct (job, slot) started
	Attempts     int            `json:"attempts"` // distinct (job, slot, attempt, token) in the journals
	FaultsByKind map[string]int `json:"faults_by_kind"`

	Violations       int            `json:"violations"`
	ViolationsByKind map[string]int `json:"violations_by_kind"`

	TakeoverP50Ms int64 `json:"takeover_p50_ms"`
	TakeoverP99Ms int64 `json:"takeover_p99_ms"`
	TakeoverMaxMs int64 `json:"takeover_max_ms"`
	Takeovers     int   `json:"takeovers"`

	// SlotsDue are the slots the missed check looked at; SlotsRun those of
	// them with a start record; MissedByReason the others by reason.
	SlotsDue       int            `json:"slots_due"`
	SlotsRun       int            `json:"slots_run"`
	MissedByReason map[string]int `json:"missed_by_reason"`

	// LeaseStartsChecked are the attempts whose start was judged against
	// the lease their runner logged; LeaseStartsUnlogged those with a
	// start record but no such line (a daemon killed before it logged);
	// LeaseStartWorstMs the latest start relative to its lease's end
	// (negative: before it); StartStampLagMaxMs the longest a job took
	// to stamp its start after its runner's "job started" line.
	LeaseStartsChecked  int   `json:"lease_starts_checked"`
	LeaseStartsUnlogged int   `json:"lease_starts_unlogged"`
	LeaseStartWorstMs   int64 `json:"lease_start_worst_ms"`
	StartStampLagMaxMs  int64 `json:"start_stamp_lag_max_ms"`

	Excused int `json:"excused"`
}

// OK reports whether the run broke no guarantee.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// finish fills the summary.
func (c *checker) finish() {
	s := &c.rep.Summary
	info := c.r.Info
	s.Backend, s.DurationMs, s.Instances = info.Backend, info.EndMs-info.StartMs, info.Instances
	for _, k := range c.keys {
		if c.runs[k].starts() > 0 {
			s.Runs++
		}
		s.Attempts += len(c.runs[k].attempts)
	}
	s.FaultsByKind = map[string]int{}
	for _, f := range c.r.Faults {
		s.FaultsByKind[string(f.Kind)]++
	}
	s.ViolationsByKind = map[string]int{}
	for _, v := range c.rep.Violations {
		s.ViolationsByKind[v.Kind]++
	}
	s.Violations, s.Excused = len(c.rep.Violations), len(c.rep.Excused)
	c.rep.TakeoverMs = c.latencies
	s.Takeovers = len(c.latencies)
	s.TakeoverP50Ms, s.TakeoverP99Ms, s.TakeoverMaxMs = percentile(c.latencies, 50), percentile(c.latencies, 99), percentile(c.latencies, 100)
}

// percentile is the nearest-rank p-th percentile of xs, 0 when empty.
func percentile(xs []int64, p int) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	return s[max(rank, 1)-1]
}

// Text is the report for people: figures, faults, every violation with
// its evidence, every excused case with its reason, and notes.
func (r Report) Text() string {
	var b strings.Builder
	s := r.Summary
	mode := "claim-only"
	if r.Lease {
		mode = "lease"
	}
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "chaos check %s: backend %s (%s), %d instances, %.1f s\n", verdict, s.Backend, mode, s.Instances, float64(s.DurationMs)/1000)
	fmt.Fprintf(&b, "runs started: %d (attempts %d)\n", s.Runs, s.Attempts)
	fmt.Fprintf(&b, "faults: %s\n", countsText(s.FaultsByKind))
	fmt.Fprintf(&b, "slots due in the checked window: %d, run: %d, not run by reason: %s\n", s.SlotsDue, s.SlotsRun, countsText(s.MissedByReason))
	if r.Lease {
		fmt.Fprintf(&b, "takeovers measured: %d, latency p50 %d ms, p99 %d ms, max %d ms\n", s.Takeovers, s.TakeoverP50Ms, s.TakeoverP99Ms, s.TakeoverMaxMs)
		if line := leaseStartText(s); line != "" {
			fmt.Fprintln(&b, line)
		}
	}
	fmt.Fprintf(&b, "violations: %d %s\n", s.Violations, countsText(s.ViolationsByKind))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "excused: %d\n", s.Excused)
	for _, e := range r.Excused {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(&b, "notes:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	return b.String()
}

// countsText prints a count map in key order.
func countsText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
