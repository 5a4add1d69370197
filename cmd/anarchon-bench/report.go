package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// jsonReport is the results file: every figure of the tables.
type jsonReport struct {
	Date     time.Time     `json:"date"`
	Command  string        `json:"command"`
	Go       string        `json:"go"`
	CPUs     int           `json:"cpus"`
	Backends []jsonBackend `json:"backends"`
}

type jsonBackend struct {
	Name       string         `json:"name"`
	Skipped    string         `json:"skipped,omitempty"`
	Error      string         `json:"error,omitempty"`
	Violations []string       `json:"violations,omitempty"`
	Claims     int            `json:"claims"`
	ClaimP50   float64        `json:"claim_p50_us"`
	ClaimP99   float64        `json:"claim_p99_us"`
	RawP50     float64        `json:"raw_p50_us"`
	RawP99     float64        `json:"raw_p99_us"`
	RawRatio   float64        `json:"claim_raw_ratio"`
	WriteP50   float64        `json:"durable_write_p50_us,omitempty"`
	WriteRatio float64        `json:"claim_write_ratio,omitempty"`
	Cont8P50   float64        `json:"contended8_p50_us,omitempty"`
	Cont8P99   float64        `json:"contended8_p99_us,omitempty"`
	Rates      []jsonRate     `json:"claims_per_second,omitempty"`
	Ceiling    *jsonRate      `json:"ceiling,omitempty"`
	Lag        []lagResult    `json:"start_lag,omitempty"`
	Scale      *scaleResult   `json:"scale,omitempty"`
	Extra      map[string]any `json:"extra,omitempty"`
}

type jsonRate struct {
	Claimers  int     `json:"claimers"`
	Claims    int     `json:"claims"`
	Runs      int     `json:"runs,omitempty"`
	Batch     int     `json:"batch,omitempty"`
	PerSecond float64 `json:"per_second"`
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// toJSON collects the figures of results.
func toJSON(start time.Time, results []result) jsonReport {
	rep := jsonReport{Date: start.UTC(), Command: commandLine(), Go: runtime.Version(), CPUs: runtime.NumCPU()}
	for _, r := range results {
		b := jsonBackend{Name: r.name, Skipped: r.skipped, Violations: r.violations, Claims: len(r.claims),
			Lag: r.lag, Scale: r.scale}
		if r.err != nil {
			b.Error = redact(r.err.Error())
		}
		if len(r.claims) > 0 {
			b.ClaimP50, b.ClaimP99 = us(percentile(r.claims, 0.5)), us(percentile(r.claims, 0.99))
			b.RawP50, b.RawP99 = us(percentile(r.raws, 0.5)), us(percentile(r.raws, 0.99))
			b.RawRatio = b.ClaimP50 / max(b.RawP50, 0.001)
		}
		if len(r.floors) > 0 {
			b.WriteP50 = us(percentile(r.floors, 0.5))
			b.WriteRatio = b.ClaimP50 / max(b.WriteP50, 0.001)
		}
		if len(r.contended) > 0 {
			b.Cont8P50, b.Cont8P99 = us(percentile(r.contended, 0.5)), us(percentile(r.contended, 0.99))
		}
		for _, rt := range r.rates {
			b.Rates = append(b.Rates, jsonRate{Claimers: rt.Claimers, Claims: rt.Claims, PerSecond: rt.PerSecond()})
		}
		if c := r.ceiling; c != nil {
			b.Ceiling = &jsonRate{Claimers: c.Claimers, Claims: c.Claims, Runs: c.Runs, Batch: c.Batch, PerSecond: c.PerSecond()}
		}
		rep.Backends = append(rep.Backends, b)
	}
	return rep
}

// commandLine is the command as run, passwords hidden.
func commandLine() string {
	args := []string{filepath.Base(os.Args[0])}
	for _, a := range os.Args[1:] {
		args = append(args, redact(a))
	}
	return strings.Join(args, " ")
}

// writeResults writes results.json and chart.png into dir, and a copy of
// the JSON named after the date, so that runs accumulate.
func writeResults(dir string, rep jsonReport) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	for _, name := range []string{"results.json", "results-" + rep.Date.Format("20060102T150405Z") + ".json"} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	if err := writeChart(filepath.Join(dir, "chart.png"), rep); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}
