package failover

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/anarchon/anarchon/internal/pgclaim/pgtest"
)

// runLine is one line of runs.log: one execution of a job's command.
type runLine struct {
	job     string
	slot    int64
	attempt int
	inst    string
	token   string
}

// readRuns reads runs.log; a missing file is no run.
func readRuns(path string) ([]runLine, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []runLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 5 {
			return nil, fmt.Errorf("runs.log: malformed line %q", sc.Text())
		}
		slot, err1 := strconv.ParseInt(fs[1], 10, 64)
		attempt, err2 := strconv.Atoi(fs[2])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("runs.log: malformed line %q", sc.Text())
		}
		out = append(out, runLine{job: fs[0], slot: slot, attempt: attempt, inst: fs[3], token: fs[4]})
	}
	return out, sc.Err()
}

// record is one row of the runs table: a run, or the note of a slot no
// attempt ran.
type record struct {
	job    string
	slot   int64
	status string
	reason string
}

// readRecords reads the runs table on s.
func readRecords(ctx context.Context, s *pgtest.Server) ([]record, error) {
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT job, slot, status, reason FROM anarchon_runs")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (record, error) {
		var rec record
		err := r.Scan(&rec.job, &rec.slot, &rec.status, &rec.reason)
		return rec, err
	})
}

// tally accounts for every slot of every job in [from, to] (ms, whole
// seconds).
type tally struct {
	expected int // job × slot
	ran      int // executed once
	twice    int // executed more than once
	// twiceTakenOver: of those, executed again by a later attempt (a
	// backup's takeover once the lease ran out).
	twiceTakenOver int
	missed         int // no execution, a note says why (lost to the failover)
	// unrecorded: executed, but the store has no record of it (the claim
	// lost with the primary); unaccounted: neither executed nor noted.
	unrecorded  int
	unaccounted []string
	statuses    map[string]int // of the records of slots that ran
}

func account(lines []runLine, recs []record, jobs int, from, to int64) tally {
	type key struct {
		job  string
		slot int64
	}
	execs := map[key]map[string]bool{} // tokens that executed the slot
	retried := map[key]bool{}          // executed by an attempt after the first
	for _, l := range lines {
		k := key{l.job, l.slot}
		if execs[k] == nil {
			execs[k] = map[string]bool{}
		}
		execs[k][l.token] = true
		retried[k] = retried[k] || l.attempt > 1
	}
	stored := map[key]record{}
	for _, r := range recs {
		stored[key{r.job, r.slot}] = r
	}
	t := tally{statuses: map[string]int{}}
	for i := range jobs {
		for slot := from; slot <= to; slot += 1000 {
			k := key{jobName(i), slot}
			t.expected++
			r, ok := stored[k]
			switch n := len(execs[k]); {
			case n > 1:
				t.twice++
				if retried[k] {
					t.twiceTakenOver++
				}
			case n == 1 && !ok:
				t.unrecorded++
			case n == 1:
				t.ran++
				t.statuses[r.status+" "+r.reason]++
			case ok && r.status == "missed":
				t.missed++
				t.statuses["(not run) missed "+r.reason]++
			default:
				t.unaccounted = append(t.unaccounted, fmt.Sprintf("%s@%d (%+v)", k.job, k.slot, r))
			}
		}
	}
	return t
}

func (t tally) String() string {
	return fmt.Sprintf("%d expected: %d ran once %v, %d ran twice (%d by a takeover), %d missed, %d ran without a record, %d unaccounted",
		t.expected, t.ran, t.statuses, t.twice, t.twiceTakenOver, t.missed, t.unrecorded, len(t.unaccounted))
}
