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
	fmt.Fprintf(w, "- servers: postgres %s, redis %s, nats %s, rabbitmq %s\n\n",
		redact(*pgDSN), redact(*redisURL), redact(*natsURL), redact(*rabbitURL))

	fmt.Fprintln(w, "| backend | claim p50 | claim p99 | raw p50 | raw p99 | p50 ratio (claim/raw) | contended8 p50 | contended8 p99 |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range results {
		fmt.Fprintln(w, r.row())
	}

	fmt.Fprintln(w, "\nraw: sqlite `SELECT 1` on a database/sql connection to the same file (SQLite has no network round trip: a trivial statement through the driver);"+
		" postgres `SELECT 1` on a pgx connection; redis `PING`; nats a JetStream publish without Msg-Id to the same stream;"+
		" rabbitmq a confirmed persistent publish to a durable queue.")

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

// row is r's line of the table.
func (r result) row() string {
	const none = "—"
	cells := []string{r.name}
	switch {
	case r.skipped != "":
		cells = append(cells, oneLine(r.skipped), none, none, none, none, none, none)
	case r.claims == nil:
		cells = append(cells, "error (below)", none, none, none, none, none, none)
	default:
		c50, c99 := percentile(r.claims, 0.50), percentile(r.claims, 0.99)
		r50, r99 := percentile(r.raws, 0.50), percentile(r.raws, 0.99)
		cells = append(cells, fmtDur(c50), fmtDur(c99), fmtDur(r50), fmtDur(r99),
			fmt.Sprintf("%.1f×", float64(c50)/float64(max(r50, 1))))
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

// percentile returns the p-quantile of d (sorting it), as the backends'
// bench_test.go files compute it.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(p*float64(len(d)-1))]
}

// fmtDur writes d with three significant digits or so, in µs below 1 ms.
func fmtDur(d time.Duration) string {
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
