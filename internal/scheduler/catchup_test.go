package scheduler

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/config"
)

// missedCounts records the Missed hook's counts by "job/reason".
type missedCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *missedCounts) hook(job, reason string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[job+"/"+reason] += n
}

func (m *missedCounts) get() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.n)
}

// observe makes h's instances count missed slots and log to an observer.
func (h *harness) observe() (*missedCounts, *observer.ObservedLogs) {
	m := &missedCounts{}
	core, logs := observer.New(zapcore.DebugLevel)
	h.hooks.Missed, h.log = m.hook, zap.New(core)
	return m, logs
}

// missedLines returns the start's "missed:" lines of job.
func missedLines(logs *observer.ObservedLogs, job string) []observer.LoggedEntry {
	var out []observer.LoggedEntry
	for _, e := range logs.FilterMessage("missed: slots due while no instance ran were not run at start").All() {
		if e.ContextMap()["job"] == job {
			out = append(out, e)
		}
	}
	return out
}

// The cluster last ran slot -10; every instance was down until t0 (+0.1 s).
// With maxLate 5 s, slots -9..-5 are late and -4..0 within maxLate: the
// policy decides which of those run; each slot not run is counted once,
// with its reason, in one log line.
func TestCatchUpPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy string
		runs   []int // slots run at the start
		missed map[string]int
		last   int    // the last slot of the missed line
		reason string // the missed line's reasons
	}{
		{config.CatchUpLatest, []int{0}, map[string]int{"tick/all_down": 5, "tick/catch_up": 4}, -1, "all_down,catch_up"},
		{config.CatchUpAll, []int{-4, -3, -2, -1, 0}, map[string]int{"tick/all_down": 5}, -5, "all_down"},
		{config.CatchUpNone, nil, map[string]int{"tick/all_down": 5, "tick/catch_up": 5}, 0, "all_down,catch_up"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			h := newHarness(t)
			missed, logs := h.observe()
			j := job("tick", "* * * * * *")
			j.MaxLate, j.CatchUp = 5*time.Second, tc.policy
			h.record(j, slotTime(-10))
			h.start("a", h.store, false, j)
			// The slots run concurrently: their order is the claims'.
			ran := map[int64]bool{}
			for range tc.runs {
				ran[h.next().e.Fence.Slot] = true
			}
			for _, sec := range tc.runs {
				if !ran[slotOf(sec)] {
					t.Fatalf("ran %v, want slots %v", ran, tc.runs)
				}
			}
			h.none(1)
			if got := missed.get(); !maps.Equal(got, tc.missed) {
				t.Errorf("missed %v, want %v", got, tc.missed)
			}
			lines := missedLines(logs, "tick")
			if len(lines) != 1 {
				t.Fatalf("%d missed lines for the job, want 1", len(lines))
			}
			f := lines[0].ContextMap()
			n := 0
			for _, v := range tc.missed {
				n += v
			}
			if f["slots"] != int64(n) || !f["first"].(time.Time).Equal(slotTime(-9)) ||
				!f["last"].(time.Time).Equal(slotTime(tc.last)) || f["reason"] != tc.reason {
				t.Errorf("missed line %v, want %d slots from -9 to %+d, reason %s", f, n, tc.last, tc.reason)
			}
			// Each slot not run is recorded in the store with its reason.
			notes := h.awaitNotes(t, "tick", n)
			for sec := -9; sec <= tc.last; sec++ {
				want := map[bool]string{true: ReasonAllDown, false: ReasonCatchUp}[sec <= -5]
				if got := notes[slotOf(sec)]; got.Status != claim.StatusMissed || got.Reason != want || got.Instance != "a" {
					t.Errorf("slot %+d recorded %s (%s) by %q, want missed (%s) by a", sec, got.Status, got.Reason, got.Instance, want)
				}
			}
			h.clk.Advance(time.Second)
			if e := h.next(); e.e.Fence.Slot != slotOf(1) {
				t.Fatalf("after the start ran %s, want slot +1", e.e.Fence)
			}
		})
	}
}

// A fresh cluster (the store has no run of the job) runs nothing from
// before its first start, however large maxLate, and counts nothing missed.
func TestFreshClusterRunsNothingFromThePast(t *testing.T) {
	for _, policy := range []string{config.CatchUpLatest, config.CatchUpAll} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t)
			h.fresh = true
			missed, _ := h.observe()
			j := job("tick", "* * * * * *")
			j.MaxLate, j.CatchUp = 10*time.Minute, policy
			h.start("a", h.store, false, j)
			h.none(1)
			h.clk.Advance(time.Second)
			if e := h.next(); e.e.Fence.Slot != slotOf(1) {
				t.Fatalf("ran %s first, want the first slot after the start (+1)", e.e.Fence)
			}
			h.none(1)
			if got := missed.get(); len(got) != 0 {
				t.Errorf("missed %v, want nothing", got)
			}
		})
	}
}

// A job whose newest recorded slot is not a slot of its schedule changed
// its schedule since: nothing from before the start runs.
func TestChangedScheduleRunsNothingFromThePast(t *testing.T) {
	h := newHarness(t)
	missed, _ := h.observe()
	j := job("five", "*/5 * * * * *")
	j.MaxLate = 30 * time.Second
	h.record(j, slotTime(-2)) // a slot of the old "*/2 * * * * *", not of */5
	h.start("a", h.store, false, j)
	h.none(1)
	if got := missed.get(); len(got) != 0 {
		t.Errorf("missed %v, want nothing", got)
	}
	h.clk.Advance(5 * time.Second)
	if e := h.next(); e.e.Fence.Slot != slotOf(5) {
		t.Fatalf("ran %s first, want +5", e.e.Fence)
	}
}

// A reload starts a new job and a job whose schedule changed from the
// scheduler's cursor: no slot from before the reload runs, however large
// maxLate.
func TestReloadRunsNothingFromBeforeIt(t *testing.T) {
	h := newHarness(t)
	j := job("tick", "*/2 * * * * *")
	j.MaxLate, j.CatchUp = time.Minute, config.CatchUpLatest
	st := h.start("a", h.store, false, j)
	if e := h.next(); e.e.Fence.Slot != slotOf(0) {
		t.Fatalf("ran %s, want the catch-up slot 0", e.e.Fence)
	}
	changed, added := j, job("added", "* * * * * *")
	changed.Schedule = "* * * * * *"
	added.MaxLate = time.Minute
	if err := st.s.Reload(context.Background(), []config.Job{changed, added}); err != nil {
		t.Fatal(err)
	}
	h.awaitTimers(1)
	h.clk.Advance(time.Second)
	got := map[string]int64{}
	for range 2 {
		e := h.next()
		got[e.e.Fence.Job] = e.e.Fence.Slot
	}
	if got["tick"] != slotOf(1) || got["added"] != slotOf(1) {
		t.Fatalf("after the reload ran %v, want both jobs at +1 only", got)
	}
	h.none(1)
}

// listDown fails every ListRuns while down is set.
type listDown struct {
	*memclaim.Backend
	down atomic.Bool
}

func (l *listDown) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	if l.down.Load() {
		return nil, errors.New("connection refused")
	}
	return l.Backend.ListRuns(ctx, q)
}

// startWithStoreDown starts "a" with a job the cluster last ran at -5
// (maxLate 2 s: -4..-2 late, -1 and 0 within it) while the store cannot be
// read.
func startWithStoreDown(t *testing.T) (*harness, *listDown, *missedCounts, *observer.ObservedLogs, *started) {
	h := newHarness(t)
	missed, logs := h.observe()
	j := job("tick", "* * * * * *")
	j.MaxLate, j.CatchUp = 2*time.Second, config.CatchUpLatest
	h.record(j, slotTime(-5))
	b := &listDown{Backend: h.store}
	b.down.Store(true)
	h.undecided = true
	return h, b, missed, logs, h.start("a", b, false, j)
}

// stepUntilDecided advances the clock by step until s has decided its
// start's catch-up (the read's retries wait on the clock).
func (h *harness) stepUntilDecided(s *Scheduler, step time.Duration) {
	h.t.Helper()
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		armed := make(chan error, 1)
		go func() { armed <- h.clk.WaitTimers(ctx, 2) }() // the scheduler's and the read's backoff
		select {
		case <-s.decided:
			cancel()
			return
		case err := <-armed:
			cancel()
			if err != nil {
				h.t.Fatalf("waiting for 2 armed timers: %v", err)
			}
		}
		h.clk.Advance(step)
	}
	h.t.Fatal("the start's catch-up was not decided")
}

// The store answers the start's read late, but while the newest slot
// before the start is still within maxLate: the catch-up runs it.
func TestCatchUpWaitsForTheStore(t *testing.T) {
	h, b, missed, _, st := startWithStoreDown(t)
	h.awaitTimers(2)
	h.clk.Advance(500 * time.Millisecond)
	b.down.Store(false)
	h.stepUntilDecided(st.s, 100*time.Millisecond)
	if e := h.next(); e.e.Fence.Slot != slotOf(0) {
		t.Fatalf("ran %s, want the catch-up slot 0", e.e.Fence)
	}
	if got, want := missed.get(), map[string]int{"tick/all_down": 3, "tick/catch_up": 1}; !maps.Equal(got, want) {
		t.Errorf("missed %v, want %v", got, want)
	}
}

// The store cannot be read at start until the newest slot before it is
// past maxLate: the job is scheduled from the start without waiting any
// longer, and once the store answers, the slot the policy would have run
// is counted as store_unreachable, with the others by their reasons.
func TestCatchUpGivenUpWhileTheStoreIsDown(t *testing.T) {
	h, b, missed, logs, st := startWithStoreDown(t)
	h.awaitTimers(2) // the scheduler's and the read's backoff
	h.clk.Set(slotTime(2).Add(-time.Millisecond))
	h.none(2)
	// Slot 0 is past maxLate: slots +1 and +2, due while the job was
	// held, both run.
	h.clk.Set(slotTime(2))
	ran := map[int64]bool{h.next().e.Fence.Slot: true, h.next().e.Fence.Slot: true}
	if !ran[slotOf(1)] || !ran[slotOf(2)] {
		t.Fatalf("ran %v, want +1 and +2", ran)
	}
	if n := logs.FilterMessageSnippet("catch-up given up").Len(); n != 1 {
		t.Errorf("%d give-up lines, want 1", n)
	}
	b.down.Store(false)
	h.stepUntilDecided(st.s, 500*time.Millisecond)
	want := map[string]int{"tick/all_down": 3, "tick/catch_up": 1, "tick/store_unreachable": 1}
	if got := missed.get(); !maps.Equal(got, want) {
		t.Errorf("missed %v, want %v", got, want)
	}
	if lines := missedLines(logs, "tick"); len(lines) != 1 || lines[0].ContextMap()["reason"] != "all_down,catch_up,store_unreachable" {
		t.Errorf("missed lines %v, want one with every reason", lines)
	}
	notes := h.awaitNotes(t, "tick", 5)
	for sec, want := range map[int]string{-4: ReasonAllDown, -3: ReasonAllDown, -2: ReasonAllDown, -1: ReasonCatchUp, 0: ReasonStoreUnreachable} {
		if got := notes[slotOf(sec)]; got.Status != claim.StatusMissed || got.Reason != want {
			t.Errorf("slot %+d recorded %s (%s), want missed (%s)", sec, got.Status, got.Reason, want)
		}
	}
}

func entryOf(t *testing.T, j config.Job) *entry {
	t.Helper()
	es, err := entriesOf([]config.Job{j}, "")
	if err != nil {
		t.Fatal(err)
	}
	return es[0]
}

// planStart on its own: where the newest recorded run leaves the job, and
// the bound on the slots walked one by one.
func TestPlanStart(t *testing.T) {
	start := t0 // +0.1 s
	sec := slotTime
	run := func(at time.Time) *claim.Run { return &claim.Run{Slot: at.UnixMilli()} }
	every := job("tick", "* * * * * *")
	every.MaxLate, every.CatchUp = 10*time.Second, config.CatchUpLatest
	for _, tc := range []struct {
		name   string
		j      config.Job
		newest *claim.Run
		first  time.Time
		why    string
		late   span
		skip   span
	}{
		{"no run: new", every, nil, sec(1), "new", span{}, span{}},
		{"not a slot: changed", every, run(sec(-3).Add(500 * time.Millisecond)), sec(1), "changed", span{}, span{}},
		{"claimed ahead by a live instance", every, run(sec(1)), sec(1), "", span{}, span{}},
		{"the newest is the start's slot", every, run(sec(0)), sec(1), "", span{}, span{}},
		{"one slot missed", every, run(sec(-1)), sec(0), "", span{}, span{}},
		{"late and skipped", every, run(sec(-12)), sec(0), "", span{2, sec(-11), sec(-10)}, span{9, sec(-9), sec(-1)}},
		{"a long outage: the walk is bounded", every, run(sec(-30000)), sec(0), "",
			span{maxMissedWalk, sec(-29999), sec(-10)}, span{9, sec(-9), sec(-1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planStart(entryOf(t, tc.j), tc.newest, start)
			if !p.first.Equal(tc.first) || p.why != tc.why || p.late != tc.late || p.skipped != tc.skip {
				t.Errorf("plan %+v\nwant first %v why %q late %+v skipped %+v", p, tc.first, tc.why, tc.late, tc.skip)
			}
		})
	}
}

func TestLastAtOrBefore(t *testing.T) {
	for _, tc := range []struct {
		expr string
		at   time.Time
		want time.Time
	}{
		{"* * * * * *", t0, slotTime(0)},
		{"* * * * * *", slotTime(0), slotTime(0)},
		{"@every 90s", t0, time.UnixMilli(t0.UnixMilli() / 90000 * 90000).UTC()},
		{"0 0 0 1 1 *", t0.Add(-time.Second), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"0 0 30 2 *", t0, time.Time{}}, // 30 February: never
	} {
		j := job("j", tc.expr)
		if got := lastAtOrBefore(entryOf(t, j).sched, tc.at); !got.Equal(tc.want) {
			t.Errorf("%s at %v: %v, want %v", tc.expr, tc.at, got, tc.want)
		}
	}
}

// lateStore answers every claim late, as a store does when nobody claimed
// the slot within maxLate (a claim delayed past it).
// lateStore answers every claim late; it records notes but decides no batch.
type lateStore struct{ claim.Backend }

func (l lateStore) Record(ctx context.Context, n claim.Note) (bool, error) {
	return l.Backend.(claim.Recorder).Record(ctx, n)
}

func (l lateStore) Claim(context.Context, claim.Request) (claim.Result, error) {
	return claim.Result{Outcome: claim.Late}, nil
}

// A claim the store answers late is a slot missed: counted late.
func TestClaimAnsweredLateCountsMissed(t *testing.T) {
	h := newHarness(t)
	missed, _ := h.observe()
	h.fresh = true
	h.start("a", lateStore{h.store}, false, job("tick", "* * * * * *"))
	for n := 1; n <= 3; n++ {
		h.awaitTimers(1)
		h.clk.Advance(time.Second)
		deadline := time.Now().Add(waitFor)
		for missed.get()["tick/late"] != n {
			if time.Now().After(deadline) {
				t.Fatalf("missed %v after %d late answers", missed.get(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	h.none(1)
	for slot, r := range h.awaitNotes(t, "tick", 3) {
		if r.Status != claim.StatusMissed || r.Reason != ReasonLate {
			t.Errorf("slot %d recorded %s (%s), want missed (late)", slot, r.Status, r.Reason)
		}
	}
}

// awaitNotes waits until the store holds n notes of job and returns them
// by slot.
func (h *harness) awaitNotes(t *testing.T, job string, n int) map[int64]claim.Run {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		runs, err := h.store.ListRuns(t.Context(), claim.ListQuery{Job: job, Limit: 1000, Statuses: claim.NoteStatuses})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) >= n {
			out := map[int64]claim.Run{}
			for _, r := range runs {
				out[r.Slot] = r
			}
			if len(runs) > n {
				t.Fatalf("%d notes of %s, want %d: %+v", len(runs), job, n, runs)
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d notes of %s recorded, want %d: %+v", len(runs), job, n, runs)
		}
		time.Sleep(time.Millisecond)
	}
}

// A span of missed slots is noted by its newest maxSpanNotes slots, oldest
// first, ending at the span's last; a short span by all of them.
func TestNewestSlots(t *testing.T) {
	e := entryOf(t, job("tick", "* * * * * *"))
	long := span{n: 5000, first: slotTime(-4999), last: slotTime(0)}
	got := newestSlots(e.sched, long, 1000)
	if len(got) != 1000 || !got[0].Equal(slotTime(-999)) || !got[999].Equal(slotTime(0)) {
		t.Fatalf("newest of 5000: %d slots from %v to %v, want 1000 from -999 to 0", len(got), got[0], got[len(got)-1])
	}
	short := span{n: 3, first: slotTime(-7), last: slotTime(-5)}
	if got := newestSlots(e.sched, short, 1000); len(got) != 3 || !got[0].Equal(slotTime(-7)) || !got[2].Equal(slotTime(-5)) {
		t.Fatalf("newest of 3: got %v, want -7, -6, -5", got)
	}
	rare := entryOf(t, job("daily", "0 0 0 * * *"))
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	sp := span{n: 30, first: day, last: day.AddDate(0, 0, 29)}
	if got := newestSlots(rare.sched, sp, 10); len(got) != 10 || !got[9].Equal(sp.last) || !got[0].Equal(day.AddDate(0, 0, 20)) {
		t.Fatalf("newest 10 of 30 days: got %v", got)
	}
}
