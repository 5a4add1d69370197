package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// printReport writes the header, the table and what went wrong.
func printReport(w io.Writer, start time.Time, results []result) {
	printHeader(w, start)
	printTables(w, results)

	fmt.Fprintln(w, "\nraw: sqlite an empty `BEGIN IMMEDIATE`/`COMMIT` on a database/sql connection to the same file, with the backend's settings (SQLite has no network round trip);"+
		" postgres `SELECT 1` on a pgx connection; redis `PING`; nats a JetStream publish without Msg-Id to the same stream;"+
		" rabbitmq a confirmed persistent publish to a durable queue."+
		" rabbitmq: each run's gate declared before its claim, untimed, as the scheduler declares it a second before the slot (the claim then only publishes);"+
		" rabbitmq-unprepared: the claim declares its gate, then publishes."+
		" durable write: a one-row INSERT committed with the store's sync settings (sqlite `synchronous=FULL`; postgres the DSN's `synchronous_commit`), on a connection of its own:"+
		" the least any claim that writes pays."+
		" postgres-async: postgres with `backend.postgres.synchronousCommit: off` on the backend's, the raw and the write's sessions"+
		" (its write is then not durable: the floor of a claim with the same settings).")

	for _, r := range results {
		if len(r.violations) > 0 {
			fmt.Fprintf(w, "\nFAIL %s: %d of %d contended runs did not have exactly one won:\n", r.name, len(r.violations), r.n)
			for _, v := range r.violations[:min(len(r.violations), 10)] {
				fmt.Fprintf(w, "  %s\n", v)
			}
		}
		if r.err != nil {
			fmt.Fprintf(w, "\nERROR %s: %s\n", r.name, oneLine(r.err.Error()))
		}
	}
}

// printHeader writes the report's title and how it was run: the command
// line (passwords hidden), the date and machine, the claims measured and
// the servers.
func printHeader(w io.Writer, start time.Time) {
	args := make([]string, 0, len(os.Args))
	args = append(args, filepath.Base(os.Args[0]))
	for _, a := range os.Args[1:] {
		args = append(args, redact(a))
	}
	contended := "off"
	if *contendFlag {
		contended = fmt.Sprintf("%d claimers, each its own backend, racing on each of n runs", racers)
	}
	fmt.Fprintf(w, "# anarchon-bench\n\n")
	fmt.Fprintf(w, "- command: `%s`\n", strings.Join(args, " "))
	fmt.Fprintf(w, "- date: %s, %s %s/%s, %d CPUs\n", start.UTC().Format(time.RFC3339), runtime.Version(),
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	fmt.Fprintf(w, "- n: %d (rabbitmq %d) uncontended claims of fresh runs, interleaved with as many raw ops; overlap %s; contended: %s\n",
		*nFlag, *nRabbitFlag, *overlapFlag, contended)
	fmt.Fprintf(w, "- servers: %s\n\n", servers())
}

// printTables writes the latency table, then those of the throughput, the
// start lag and the scale where results have them.
func printTables(w io.Writer, results []result) {
	fmt.Fprintln(w, "| backend | claim p50 | claim p99 | raw p50 | raw p99 | p50 ratio (claim/raw) | durable write p50 | claim/write | contended8 p50 | contended8 p99 |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range results {
		fmt.Fprintln(w, r.row())
	}
	if slices.ContainsFunc(results, func(r result) bool { return r.rates != nil || r.ceiling != nil }) {
		fmt.Fprintln(w, "\n| backend | claims/s, 1 claimer | 4 claimers | 8 claimers | ceiling: claims/s | ceiling: runs decided/s | ceiling: how |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|---|")
		for _, r := range results {
			fmt.Fprintln(w, r.rateRow())
		}
	}

	if slices.ContainsFunc(results, func(r result) bool { return len(r.lag) > 0 }) {
		fmt.Fprintln(w, "\n| backend | jobs/s | runs | daemon p50 | daemon p99 | forker p50 | forker p99 | p99 ratio | claimed p99 | spawned p99 | problems |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
		for _, r := range results {
			for _, l := range r.lag {
				fmt.Fprintln(w, lagRow(r.name, l))
			}
		}
	}
	if slices.ContainsFunc(results, func(r result) bool { return r.scale != nil }) {
		fmt.Fprintln(w, "\n| backend | jobs | ready after | idle RSS | idle RSS, 100 jobs | idle CPU (% of a core) | idle store ops/min (jobs vs 100) | busy runs/s | busy RSS first → last (max) | goroutines first → last | note |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
		for _, r := range results {
			if r.scale != nil {
				fmt.Fprintln(w, scaleRow(*r.scale))
			}
		}
	}
}

// row is r's line of the table.
func (r result) row() string {
	const none = "—"
	cells := []string{r.name}
	switch {
	case r.skipped != "":
		cells = append(cells, oneLine(r.skipped), none, none, none, none, none, none, none, none)
	case r.claims == nil:
		cells = append(cells, "error (below)", none, none, none, none, none, none, none, none)
	default:
		c50, c99 := percentile(r.claims, 0.50), percentile(r.claims, 0.99)
		r50, r99 := percentile(r.raws, 0.50), percentile(r.raws, 0.99)
		cells = append(cells, fmtDur(c50), fmtDur(c99), fmtDur(r50), fmtDur(r99),
			fmt.Sprintf("%.1f×", float64(c50)/float64(max(r50, 1))))
		if r.floors != nil {
			f50 := percentile(r.floors, 0.50)
			cells = append(cells, fmtDur(f50), fmt.Sprintf("%.1f×", float64(c50)/float64(max(f50, 1))))
		} else {
			cells = append(cells, none, none)
		}
		switch {
		case r.contended != nil:
			p50, p99 := fmtDur(percentile(r.contended, 0.50)), fmtDur(percentile(r.contended, 0.99))
			if len(r.violations) > 0 {
				p99 += " (FAIL)"
			}
			cells = append(cells, p50, p99)
		case r.err != nil:
			cells = append(cells, "error (below)", none)
		default:
			cells = append(cells, none, none)
		}
	}
	return "| " + strings.Join(cells, " | ") + " |"
}

// lagRow is one load's line of the start-lag table.
func lagRow(name string, l lagResult) string {
	problems := oneLine(l.Err)
	if l.Missing > 0 || l.Duplicates > 0 {
		problems = strings.TrimSpace(fmt.Sprintf("%s missing %d, duplicates %d", problems, l.Missing, l.Duplicates))
	}
	ratio := "—"
	if l.ForkerP99 > 0 {
		ratio = fmt.Sprintf("%.2f×", float64(l.DaemonP99)/float64(l.ForkerP99))
	}
	return fmt.Sprintf("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |", name, l.Load, l.Runs,
		fmtDur(l.DaemonP50), fmtDur(l.DaemonP99), fmtDur(l.ForkerP50), fmtDur(l.ForkerP99), ratio,
		fmtDur(l.ClaimedP99), fmtDur(l.SpawnedP99), problems)
}

// scaleRow is one backend's line of the scale table.
func scaleRow(sc scaleResult) string {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	ops := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f", v)
	}
	note := strings.TrimSpace(oneLine(sc.Err) + " " + oneLine(sc.BusyNote))
	return fmt.Sprintf("| %s | %d | %s | %s | %s | %.3f | %s vs %s | %.0f of %d | %s → %s (%s) | %d → %d | %s |",
		sc.Backend, sc.Jobs, fmtDur(sc.IdleReady), mib(sc.IdleRSSBytes), mib(sc.IdleRSSBytes100), sc.IdleCPUPercent,
		ops(sc.IdleStoreOpsPerMin), ops(sc.IdleStoreOpsPerMin100), sc.BusyRunsPerSec, sc.BusyJobs,
		mib(sc.BusyRSSStartBytes), mib(sc.BusyRSSEndBytes), mib(sc.BusyRSSBytes),
		sc.BusyGoroutinesStart, sc.BusyGoroutinesEnd, note)
}

// rateRow is r's line of the throughput table.
func (r result) rateRow() string {
	const none = "—"
	cells := []string{r.name}
	for i := range 3 {
		if i < len(r.rates) {
			cells = append(cells, fmt.Sprintf("%.0f", r.rates[i].PerSecond()))
		} else {
			cells = append(cells, none)
		}
	}
	if c := r.ceiling; c != nil {
		how := fmt.Sprintf("%d claimers × %d runs, %d in flight each, one by one", c.Claimers, c.Runs, claimConcurrency)
		if c.Batched {
			how = fmt.Sprintf("%d claimers × %d runs, batches of %d, %d in flight each", c.Claimers, c.Runs, c.Batch, batchesInFlight)
		}
		cells = append(cells, fmt.Sprintf("%.0f", c.PerSecond()),
			fmt.Sprintf("%.0f", float64(c.Runs)/c.Elapsed.Seconds()), how)
	} else {
		cells = append(cells, none, none, none)
	}
	return "| " + strings.Join(cells, " | ") + " |"
}

// percentile returns the p-quantile of d (sorting it), as the backends'
// bench_test.go files compute it.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(p*float64(len(d)-1))]
}

// fmtDur writes d with three significant digits or so, in µs below 1 ms; a
// negative d (a claim answered before its slot) with a minus sign.
func fmtDur(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	us := float64(d) / float64(time.Microsecond)
	switch {
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.1f µs", us)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", us)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", us/1e3)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f ms", us/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", us/1e3)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// oneLine makes s fit in a table cell or on one line.
func oneLine(s string) string {
	s = redact(s)
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
