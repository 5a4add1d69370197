package failover

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/anarchon/anarchon/internal/pgclaim" // the postgres store
	"github.com/anarchon/anarchon/internal/pgclaim/pgtest"
	"github.com/anarchon/anarchon/internal/supervise"
)

var (
	withAsync = flag.Bool("ha.async", false, "also fail over with asynchronous replication (make chaos-ha)")
	rounds    = flag.Int("ha.rounds", 1, "failovers per replication mode")
)

// The test binary is also the jobs' supervisor.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(supervise.Main(os.Args[2:]))
	}
	flag.Parse()
	os.Exit(m.Run())
}

// The shape of a failover: jobs every-second jobs on instances daemons;
// the standby lag behind the primary at the kill; detect, the time a
// failover manager takes to decide; maxLate and lease, the jobs'
// maxLateMs and leaseMs (the test runs a lease past the kill, so that a
// run whose result the failover lost is taken over within it).
const (
	jobs      = 20
	instances = 3
	lag       = 1500 * time.Millisecond
	detect    = 2 * time.Second
	maxLate   = 5 * time.Second
	lease     = 10 * time.Second
	// resumeBound is how soon after the promoted standby accepts writes
	// the jobs must run again.
	resumeBound = 3 * time.Second
)

// TestFailover: daemons on a primary and its synchronous standby (with
// -ha.async, an asynchronous one too); the standby falls behind, the
// primary is killed as a host crash kills it, the standby promoted. With
// synchronous replication no slot runs twice and every run keeps its
// record; in both modes every slot is accounted for and the jobs run
// again within resumeBound of the promoted standby accepting writes.
func TestFailover(t *testing.T) {
	modes := []bool{true}
	if *withAsync {
		modes = append(modes, false)
	}
	for _, sync := range modes {
		for r := range max(1, *rounds) {
			t.Run(fmt.Sprintf("%s/%d", modeName(sync), r+1), func(t *testing.T) { failover(t, sync) })
		}
	}
}

func modeName(sync bool) string {
	if sync {
		return "sync"
	}
	return "async"
}

// timeline is what happened when.
type timeline struct {
	started, killed, writable, resumed time.Time
}

func failover(t *testing.T, sync bool) {
	ctx := t.Context()
	c := pgtest.NewCluster(t)
	p := c.Primary("primary")
	s := c.Standby(p, "standby1")
	if sync {
		if err := p.Synchronous(ctx, "standby1"); err != nil {
			t.Fatal(err)
		}
	}
	f := newFleet(t, pgtest.MultiDSN(p, s), jobs, maxLate, lease)
	var tl timeline
	for i := range instances {
		f.start(string(rune('a' + i)))
	}
	tl.started = time.Now()
	awaitSlot(t, f, tl.started.Add(4*time.Second))
	if _, err := p.PauseSender(ctx, "standby1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lag) // the fault's length: the standby falls behind
	tl.killed = time.Now()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(detect) // the fault's length: the failover manager decides
	tl.writable = promote(t, s)
	tl.resumed = awaitResumed(t, f, tl)
	to := tl.resumed.Truncate(time.Second).Add(5 * time.Second)
	awaitSlot(t, f, later(to.Add(2*time.Second), tl.killed.Add(lease+3*time.Second)))
	f.stop()
	report(t, f, s, sync, tl, to)
}

// promote promotes s and returns when it first committed a write, as a
// probe that starts before the promotion sees it.
func promote(t *testing.T, s *pgtest.Server) time.Time {
	t.Helper()
	type probe struct {
		at  time.Time
		err error
	}
	ch := make(chan probe, 1)
	go func() {
		at, err := s.AwaitWritable(t.Context())
		ch <- probe{at, err}
	}()
	if err := s.Promote(); err != nil {
		t.Fatal(err)
	}
	p := <-ch
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.at
}

// sinceWritable is the time from the promoted standby accepting writes to
// the first run, as the test's probe (a write every 20 ms) saw it: a
// daemon's claim may commit before the probe's first write does.
func sinceWritable(tl timeline) string {
	d := tl.resumed.Sub(tl.writable).Round(time.Millisecond)
	if d < 0 {
		return fmt.Sprintf("0 (a claim committed %v before the probe's first write)", -d)
	}
	return d.String()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// awaitSlot waits until runs.log holds a run of a slot at or after at.
func awaitSlot(t *testing.T, f *fleet, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(time.Until(at) + 30*time.Second)
	for time.Now().Before(deadline) {
		lines, err := readRuns(f.runs)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if l.slot >= at.UnixMilli() {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no job ran for a slot at or after %s", at.Format(time.StampMilli))
}

// awaitResumed waits for the first job started of a slot whose claim
// was sent after the kill (claims go out at most 100 ms ahead of their
// slot), and checks that it started within resumeBound of the promoted
// standby accepting writes.
func awaitResumed(t *testing.T, f *fleet, tl timeline) time.Time {
	t.Helper()
	deadline := tl.writable.Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if at, ok := f.firstStartOfSlotAfter(tl.killed.Add(200 * time.Millisecond)); ok {
			if gap := at.Sub(tl.writable); gap > resumeBound {
				t.Errorf("the jobs ran again %v after the promoted standby accepted writes; the bound is %v", gap, resumeBound)
			}
			return at
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no job ran within 30 s of the promoted standby accepting writes")
	return time.Time{}
}

// report accounts for every slot from the first whole second after the
// daemons started to to, logs the figures, and checks them.
func report(t *testing.T, f *fleet, s *pgtest.Server, sync bool, tl timeline, to time.Time) {
	t.Helper()
	lines, err := readRuns(f.runs)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := readRecords(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	from := tl.started.Truncate(time.Second).Add(time.Second)
	tally := account(lines, recs, jobs, from.UnixMilli(), to.UnixMilli())
	f.logWarnings()
	lost := f.warnings("result not recorded: the store has lost")
	taken := f.warnings("result not recorded: the run is no longer")
	taken = append(taken, f.warnings("fenced: another instance took over")...)
	t.Logf("%s replication, standby %v behind at the kill, promoted %v after it: %s; "+
		"gap: kill to first run %v, writes accepted to first run %v; results refused as lost %d, as taken over %d",
		modeName(sync), lag, tl.writable.Sub(tl.killed).Round(time.Millisecond), tally,
		tl.resumed.Sub(tl.killed).Round(time.Millisecond), sinceWritable(tl), len(lost), len(taken))
	if len(tally.unaccounted) > 0 {
		t.Errorf("slots neither run nor recorded as missed: %s", strings.Join(tally.unaccounted, ", "))
	}
	if sync && len(taken) > 0 {
		t.Errorf("no backup took any run over, yet %d fenced answers blame one: %v", len(taken), taken[0].Message)
	}
	if sync && (tally.twice > 0 || tally.unrecorded > 0 || len(lost) > 0 || tally.statuses["succeeded "] != tally.ran) {
		t.Errorf("synchronous replication must lose no acknowledged claim or result: %s; %d results refused as lost", tally, len(lost))
	}
}
