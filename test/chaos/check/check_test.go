package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/logging"
	"github.com/anarchon/anarchon/internal/status"
)

// t0 is the synthetic run's start, on a 10 s boundary.
const t0 int64 = 1_780_000_000_000

// at is t0 + sec seconds, in ms.
func at(sec float64) int64 { return t0 + int64(sec*1000) }

// jrun is one attempt as a job journals it; end 0: no end record.
type jrun struct {
	slot    int64
	inst    int
	attempt int
	token   string
	start   int64
	end     int64
	exit    int
	fence   string
}

// fx is a synthetic run directory.
type fx struct {
	info    RunInfo
	faults  []Fault
	runs    []jrun
	journal map[int][]string // extra raw journal lines
	daemon  map[int][]string
	status  []status.Record
}

func tok(slot int64, attempt, inst int) string {
	return fmt.Sprintf("%016x%08x%08x", slot, attempt, inst)
}

// base is a clean 60 s run of one job every 10 s on 3 instances: the slots
// 10 s .. 50 s each run once by instance (slot/10)%3, and status lists them
// all as succeeded. The backend is postgres (lease) or redis-stream-id
// (claim-only); the sqlite cases set it themselves.
func base(lease bool) *fx {
	f := &fx{
		info: RunInfo{
			Backend: "postgres", Lease: lease, Instances: 3, Seed: 1,
			StartMs: t0, EndMs: at(60), EpsilonMs: 1000,
			Jobs: []JobInfo{{
				Name: "tick", Schedule: "*/10 * * * * *", Timezone: "UTC", SleepMs: 2000,
				LeaseMs: 3000, HeartbeatMs: 1000, MaxLateMs: 5000, MaxAttempts: 3, Overlap: "skip",
			}},
		},
		journal: map[int][]string{}, daemon: map[int][]string{},
	}
	if !lease {
		f.info.Backend = "redis-stream-id"
	}
	for sec := 10; sec <= 50; sec += 10 {
		slot := at(float64(sec))
		inst := (sec / 10) % 3
		f.runs = append(f.runs, jrun{slot, inst, 1, tok(slot, 1, inst), slot + 10, slot + 2010, 0, "ok"})
		f.status = append(f.status, row(slot, 1, inst, tok(slot, 1, inst), "succeeded", 0))
	}
	return f
}

func row(slot int64, attempt, inst int, token, st string, exit int) status.Record {
	r := status.Record{Job: "tick", Slot: time.UnixMilli(slot).UTC().Format(time.RFC3339Nano), SlotMs: slot,
		Status: st, Attempt: attempt, Instance: instName(inst), Token: token}
	if st == "succeeded" || st == "failed" {
		r.ExitCode = &exit
	}
	return r
}

// drop removes a slot's journal records and status row.
func (f *fx) drop(slot int64) {
	f.runs = slices.DeleteFunc(f.runs, func(r jrun) bool { return r.slot == slot })
	f.status = slices.DeleteFunc(f.status, func(r status.Record) bool { return r.SlotMs == slot })
}

// setStatus replaces a slot's status row.
func (f *fx) setStatus(r status.Record) {
	f.status = slices.DeleteFunc(f.status, func(s status.Record) bool { return s.SlotMs == r.SlotMs })
	f.status = append(f.status, r)
}

func (f *fx) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	put := func(name string, lines []string) {
		t.Helper()
		s := strings.Join(lines, "\n")
		if len(lines) > 0 {
			s += "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(f.info)
	if err != nil {
		t.Fatal(err)
	}
	put("run.json", []string{string(b)})
	var faults []string
	for _, x := range f.faults {
		b, _ := json.Marshal(x)
		faults = append(faults, string(b))
	}
	put("faults.jsonl", faults)
	journals := map[int][]string{}
	for _, r := range f.runs {
		journals[r.inst] = append(journals[r.inst], fmt.Sprintf("tick %d %d %s %s %d - - -", r.slot, r.attempt, r.token, instName(r.inst), r.start))
	}
	for _, r := range f.runs {
		if r.end > 0 {
			journals[r.inst] = append(journals[r.inst], fmt.Sprintf("tick %d %d %s %s %d %d %d %s",
				r.slot, r.attempt, r.token, instName(r.inst), r.start, r.end, r.exit, r.fence))
		}
	}
	for i := range f.info.Instances {
		put(fmt.Sprintf("journal-%d.log", i), append(journals[i], f.journal[i]...))
		put(fmt.Sprintf("daemon-%d.log", i), append([]string{"not json: a panic line"}, f.daemon[i]...))
	}
	var st []string
	for _, r := range f.status {
		b, _ := json.Marshal(r)
		st = append(st, string(b))
	}
	put("status.jsonl", st)
	return dir
}

// fixedClock is a zap clock stopped at one instant.
type fixedClock time.Time

func (c fixedClock) Now() time.Time                         { return time.Time(c) }
func (c fixedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// logLines returns what the project's logger writes for fn, its clock
// (the "ts" field) at tsMs.
func logLines(t *testing.T, tsMs int64, fn func(log *zap.Logger)) []string {
	t.Helper()
	var buf bytes.Buffer
	log, err := logging.New(&buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	fn(log.WithOptions(zap.WithClock(fixedClock(time.UnixMilli(tsMs)))))
	_ = log.Sync()
	return strings.Split(strings.TrimSpace(buf.String()), "\n")
}

// claimLog is the scheduler's "claim" line (internal/scheduler claimRetrying).
// It is logged 20 ms after the slot.
func claimLog(t *testing.T, slot int64, inst int, token, outcome string) []string {
	return logLines(t, slot+20, func(log *zap.Logger) {
		log.With(zap.String("job", "tick"), zap.Time("slot", time.UnixMilli(slot).UTC()),
			zap.String("instance", instName(inst)), zap.String("token", token[:8])).
			Info("claim", zap.String("outcome", outcome))
	})
}

// claimAt is the scheduler's "claim" line logged at tsMs, with the
// attempt when it is won.
func claimAt(t *testing.T, tsMs, slot int64, inst int, token, outcome string, attempt int) []string {
	return logLines(t, tsMs, func(log *zap.Logger) {
		fields := []zap.Field{zap.String("outcome", outcome)}
		if attempt > 0 {
			fields = append(fields, zap.Int("attempt", attempt))
		}
		log.With(zap.String("job", "tick"), zap.Time("slot", time.UnixMilli(slot).UTC()),
			zap.String("instance", instName(inst)), zap.String("token", token[:8])).
			Info("claim", fields...)
	})
}

// notRecordedLog is the runner's line when it gives up recording a result.
func notRecordedLog(t *testing.T, tsMs, slot int64, inst int, token string) []string {
	return logLines(t, tsMs, func(log *zap.Logger) {
		log.Error("result not recorded", zap.String("job", "tick"),
			zap.String("slot", time.UnixMilli(slot).UTC().Format(time.RFC3339Nano)), zap.Int("attempt", 1),
			zap.String("instance", instName(inst)), zap.String("token", token[:8]), zap.String("error", "context canceled"))
	})
}

// finishedLog is the runner's "job finished" line of attempt 1 of slot.
func finishedLog(t *testing.T, tsMs, slot int64, inst int, token string) []string {
	return logLines(t, tsMs, func(log *zap.Logger) {
		log.Info("job finished", zap.String("job", "tick"),
			zap.String("slot", time.UnixMilli(slot).UTC().Format(time.RFC3339Nano)), zap.Int("attempt", 1),
			zap.String("instance", instName(inst)), zap.String("token", token[:8]), zap.String("status", "succeeded"))
	})
}

// recordRetryLog is the runner's line for a failed first write of attempt
// 1's result.
func recordRetryLog(t *testing.T, tsMs, slot int64, inst int, token string) []string {
	return logLines(t, tsMs, func(log *zap.Logger) {
		log.Warn("recording the result failed; retrying", zap.String("job", "tick"),
			zap.String("slot", time.UnixMilli(slot).UTC().Format(time.RFC3339Nano)), zap.Int("attempt", 1),
			zap.String("instance", instName(inst)), zap.String("token", token[:8]), zap.String("error", "i/o timeout"))
	})
}

// excused reports whether r excused a case of check whose reason holds
// every one of parts.
func excused(r Report, check string, parts ...string) bool {
	for _, e := range r.Excused {
		ok := e.Check == check
		for _, p := range parts {
			ok = ok && strings.Contains(e.String(), p)
		}
		if ok {
			return true
		}
	}
	return false
}

// missedLog is the scheduler's "missed:" line (internal/scheduler skipMissed).
func missedLog(t *testing.T, first, last int64) []string {
	return logLines(t, last+6000, func(log *zap.Logger) {
		log.Warn("missed: slots older than maxLate were not claimed",
			zap.String("job", "tick"), zap.Int("slots", 1),
			zap.Time("first", time.UnixMilli(first).UTC()), zap.Time("last", time.UnixMilli(last).UTC()),
			zap.Duration("maxLate", 5*time.Second))
	})
}

func kinds(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		if !slices.Contains(out, v.Kind) {
			out = append(out, v.Kind)
		}
	}
	slices.Sort(out)
	return out
}

func TestCheck(t *testing.T) {
	slot20, slot30, slot40 := at(20), at(30), at(40)
	tests := []struct {
		name  string
		lease bool
		setup func(t *testing.T, f *fx)
		want  []string // the violation kinds, exactly
		slot  int64    // the slot every violation names (0: not checked)
		check func(t *testing.T, r Report)
	}{
		{
			name: "clean lease run with a kill and a proper takeover", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot30)
				f.runs = append(f.runs,
					jrun{slot30, 0, 1, tok(slot30, 1, 0), slot30 + 10, 0, 0, ""},
					jrun{slot30, 1, 2, tok(slot30, 2, 1), at(34.5), at(36.5), 0, "ok"})
				f.faults = []Fault{
					{AtMs: at(31), Kind: FaultKill, Instance: 0},
					{AtMs: at(33), Kind: FaultStart, Instance: 0},
					{AtMs: at(45), Kind: FaultLatency, Instance: 1, Detail: "latency 300ms"},
					{AtMs: at(47), Kind: FaultHeal, Instance: 1},
				}
				f.setStatus(row(slot30, 2, 1, tok(slot30, 2, 1), "succeeded", 0))
			},
			check: func(t *testing.T, r Report) {
				s := r.Summary
				if s.Takeovers != 1 || s.TakeoverMaxMs != 3500 || s.TakeoverP50Ms != 3500 || s.TakeoverP99Ms != 3500 {
					t.Errorf("takeovers %d p50 %d p99 %d max %d, want 1 measured at 3500 ms", s.Takeovers, s.TakeoverP50Ms, s.TakeoverP99Ms, s.TakeoverMaxMs)
				}
				if s.Runs != 5 || s.Attempts != 6 || s.SlotsDue != 5 || s.SlotsRun != 5 || s.FaultsByKind["kill"] != 1 {
					t.Errorf("summary %+v", s)
				}
			},
		},
		{name: "clean claim-only run", lease: false},
		{
			name: "two winners in the journals", lease: true, want: []string{KindTwoWinners}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.runs = append(f.runs, jrun{slot20, 0, 1, tok(slot20, 1, 0), at(22.5), at(24.5), 0, "rejected"})
			},
		},
		{
			name: "two winners: status against journals", lease: true, want: []string{KindTwoWinners}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.setStatus(row(slot20, 1, 0, tok(slot20, 1, 0), "succeeded", 0))
			},
		},
		{
			name: "concurrent attempts without a pause", lease: true, want: []string{KindConcurrent}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot20)
				f.runs = append(f.runs,
					jrun{slot20, 2, 1, tok(slot20, 1, 2), slot20 + 10, at(22.01), 0, "rejected"},
					jrun{slot20, 0, 2, tok(slot20, 2, 0), at(21), at(23), 0, "ok"})
				f.setStatus(row(slot20, 2, 0, tok(slot20, 2, 0), "succeeded", 0))
			},
		},
		{
			// The lease runs from the last renewal, up to a heartbeat before
			// the pause: 2.6 s of a 3 s lease with 1 s heartbeats can end it.
			name: "concurrent attempts after a pause shorter than the lease, longer than the lease less a heartbeat", lease: true,
			setup: func(t *testing.T, f *fx) {
				shortPauseOverlap(f, 2600)
			},
			check: func(t *testing.T, r Report) {
				if len(r.Excused) != 1 || r.Excused[0].Check != KindConcurrent || !strings.Contains(r.Excused[0].Reason, "paused") {
					t.Errorf("excused %v, want the overlap allowed by the pause", r.Excused)
				}
			},
		},
		{
			name: "concurrent attempts after a pause shorter than the lease less a heartbeat", lease: true,
			want: []string{KindConcurrent}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				shortPauseOverlap(f, 1500)
			},
		},
		{
			name: "concurrent attempts with a long pause, old write accepted after the new start", lease: true,
			want: []string{KindConcurrent, KindDuplicate}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				pausedOverlap(f, "ok")
			},
		},
		{
			name: "concurrent attempts with a long pause and the old write rejected", lease: true,
			setup: func(t *testing.T, f *fx) {
				pausedOverlap(f, "rejected")
			},
			check: func(t *testing.T, r Report) {
				if len(r.Excused) != 1 || r.Excused[0].Check != KindConcurrent || !strings.Contains(r.Excused[0].Reason, "paused") {
					t.Errorf("excused %v, want the overlap allowed by the pause", r.Excused)
				}
				if r.Summary.Takeovers != 1 || r.Summary.TakeoverMaxMs != 3500 {
					t.Errorf("takeovers %d max %d, want the pause's takeover at 3500 ms", r.Summary.Takeovers, r.Summary.TakeoverMaxMs)
				}
			},
		},
		{
			name: "late takeover", lease: true, want: []string{KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				killAt30(f)
				f.runs = append(f.runs, jrun{slot30, 1, 2, tok(slot30, 2, 1), at(38), at(39.5), 0, "ok"})
				f.setStatus(row(slot30, 2, 1, tok(slot30, 2, 1), "succeeded", 0))
			},
			check: func(t *testing.T, r Report) {
				if r.Summary.Takeovers != 0 {
					t.Errorf("a late takeover was measured: %v", r.TakeoverMs)
				}
			},
		},
		{
			name: "late takeover, excused: every backup's store traffic was delayed", lease: true,
			setup: func(t *testing.T, f *fx) {
				lateTakeoverUnderLatency(f, 400, 2)
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindTakeover, "every instance that could take over was slowed: chaos-1's store traffic was delayed by 400 ms each way") ||
					!excused(r, KindTakeover, "chaos-2's store traffic was delayed by 400 ms") {
					t.Errorf("excused %v, want the takeover excused by the latency of chaos-1 and chaos-2", r.Excused)
				}
				if r.Summary.Takeovers != 0 {
					t.Errorf("a late takeover was measured: %v", r.TakeoverMs)
				}
			},
		},
		{
			name: "late takeover with one backup not delayed: a violation", lease: true,
			want: []string{KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				lateTakeoverUnderLatency(f, 400, 1)
			},
		},
		{
			name: "takeover later than the latency explains: a violation", lease: true,
			want: []string{KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				lateTakeoverUnderLatency(f, 100, 2) // 3 round trips of 2 × 100 ms: until 36.6 s
			},
		},
		{
			name: "no takeover, excused: the paused runner resumed within the bound and recorded its result", lease: true,
			setup: func(t *testing.T, f *fx) {
				pausedRunnerRecords(f, 35)
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindTakeover, "before any backup took the run over, and the store holds this attempt's own result") {
					t.Errorf("excused %v, want the takeover excused by the runner's own result", r.Excused)
				}
			},
		},
		{
			name: "no takeover and the paused runner resumed after the bound: a violation", lease: true,
			want: []string{KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				pausedRunnerRecords(f, 36.5)
			},
		},
		{
			name: "no takeover at all", lease: true, want: []string{KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				killAt30(f)
				f.setStatus(row(slot30, 1, 0, tok(slot30, 1, 0), "running", 0))
			},
		},
		{
			name: "takeover won but not logged, excused: its winner was killed at once", lease: true,
			setup: func(t *testing.T, f *fx) {
				killAt30(f)
				f.faults = append(f.faults, Fault{AtMs: at(34.2), Kind: FaultKill, Instance: 1},
					Fault{AtMs: at(35), Kind: FaultStart, Instance: 1})
				f.setStatus(row(slot30, 2, 1, tok(slot30, 2, 1), "running", 0))
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindTakeover, "holds attempt 2 won by chaos-1", "killed") {
					t.Errorf("excused %v, want the unlogged takeover excused by chaos-1's kill", r.Excused)
				}
			},
		},
		{
			name: "takeover won, unlogged, by an instance killed at once; the next within the bound of that kill: excused", lease: true,
			setup: func(t *testing.T, f *fx) { lostSecondAttempt(f, 37.5) },
			check: func(t *testing.T, r Report) {
				if !excused(r, KindTakeover, "attempt 2 left no trace", "won and lost before its winner logged the claim", "chaos-1 (faults.jsonl:3 kill chaos-1") {
					t.Errorf("excused %v, want the lost attempt 2 excused by chaos-1's kill", r.Excused)
				}
			},
		},
		{
			name: "takeover won, unlogged, by an instance killed at once; the next past the bound of that kill: a violation", lease: true,
			want: []string{KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) { lostSecondAttempt(f, 39.5) },
		},
		{
			name: "takeover won, unlogged, by the restarted runner cut off at once; the next within the bound of that cut: excused", lease: true,
			setup: func(t *testing.T, f *fx) { restartedRunnerCut(f, 38.5) },
			check: func(t *testing.T, r Report) {
				if !excused(r, KindTakeover, "attempt 2 left no trace", "won and lost before its winner logged the claim", "chaos-0 (chaos-0 cut") {
					t.Errorf("excused %v, want the lost attempt 2 excused by chaos-0's cut", r.Excused)
				}
			},
		},
		{
			name: "takeover won, unlogged, by the restarted runner cut off at once; the next past the bound of that cut: a violation", lease: true,
			want: []string{KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) { restartedRunnerCut(f, 39.5) },
		},
		{
			name: "takeover in the store but its winner lived: a violation", lease: true,
			want: []string{KindResult, KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				killAt30(f)
				f.setStatus(row(slot30, 2, 1, tok(slot30, 2, 1), "running", 0))
			},
		},
		{
			name: "result refused after the runner fenced itself on a loaded host, excused", lease: true,
			setup: func(t *testing.T, f *fx) {
				selfFencedAt20(t, f, true)
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindResult, "the runner fenced itself", "daemon-2.log") {
					t.Errorf("excused %v, want the interrupted run excused by the runner's self-fence", r.Excused)
				}
			},
		},
		{
			name: "result refused with no word of a lost lease: a violation", lease: true,
			want: []string{KindResult}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				selfFencedAt20(t, f, false)
			},
		},
		{
			name: "a re-run after the runner's renewals went unanswered, excused", lease: true,
			setup: func(t *testing.T, f *fx) {
				rerunAt20(t, f, true)
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindDuplicate, "renewals went unanswered", "daemon-2.log") {
					t.Errorf("excused %v, want the double write excused by the runner's failed renewals", r.Excused)
				}
			},
		},
		{
			name: "a re-run with no word of trouble: a violation", lease: true,
			want: []string{KindDuplicate}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				rerunAt20(t, f, false)
			},
		},
		{
			name: "no takeover, excused: the store was down", lease: true,
			setup: func(t *testing.T, f *fx) {
				killAt30(f)
				f.faults = append(f.faults, Fault{AtMs: at(31.5), Kind: FaultStoreDown, Instance: -1},
					Fault{AtMs: at(37), Kind: FaultStoreUp, Instance: -1})
				f.setStatus(row(slot30, 1, 0, tok(slot30, 1, 0), "running", 0))
			},
			check: func(t *testing.T, r Report) {
				if len(r.Excused) != 1 || r.Excused[0].Check != KindTakeover || !strings.Contains(r.Excused[0].Reason, "store down") {
					t.Errorf("excused %v, want the takeover excused by the store outage", r.Excused)
				}
			},
		},
		{
			name: "no takeover, excused: the other instances never watched the run", lease: true,
			setup: func(t *testing.T, f *fx) {
				killAt30(f)
				f.setStatus(row(slot30, 1, 0, tok(slot30, 1, 0), "running", 0))
				f.daemon[1] = claimLog(t, slot20, 1, tok(slot20, 9, 1), "lost")
				f.daemon[2] = claimLog(t, slot30, 2, tok(slot30, 9, 2), "done")
			},
			check: func(t *testing.T, r Report) {
				if len(r.Excused) != 1 || !strings.Contains(r.Excused[0].Reason, "never claimed") || !strings.Contains(r.Excused[0].Reason, `"done"`) {
					t.Errorf("excused %v, want no backup", r.Excused)
				}
			},
		},
		{
			name: "duplicate on a claim-only backend", lease: false, want: []string{KindDuplicate}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.runs = append(f.runs, jrun{slot20, 0, 1, tok(slot20, 1, 0), at(20.02), at(22.02), 0, "ok"})
			},
		},
		{
			name: "missed slot without a reason", lease: true, want: []string{KindMissed}, slot: slot40,
			setup: func(t *testing.T, f *fx) { f.drop(slot40) },
		},
		{
			name: "missed slot excused by a missed: line", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot40)
				f.daemon[1] = missedLog(t, slot40, slot40)
			},
			check: func(t *testing.T, r Report) {
				if r.Summary.MissedByReason[ReasonMissed] != 1 || r.Summary.SlotsRun != 4 {
					t.Errorf("missed by reason %v, run %d: want missed=1, 4 run", r.Summary.MissedByReason, r.Summary.SlotsRun)
				}
			},
		},
		{
			name: "missed slot excused by a start's catch-up given up after it", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot40)
				f.daemon[1] = logLines(t, slot40+3000, func(log *zap.Logger) {
					log.Warn("catch-up given up: the store did not answer at start while a slot before it was within maxLate; scheduling the job from the start",
						zap.String("job", "tick"), zap.Time("start", time.UnixMilli(slot40+80).UTC()), zap.Duration("maxLate", 5*time.Second))
				})
			},
			check: func(t *testing.T, r Report) {
				if r.Summary.MissedByReason[ReasonMissed] != 1 {
					t.Errorf("missed by reason %v, want missed=1", r.Summary.MissedByReason)
				}
			},
		},
		{
			name: "missed slot excused by a late claim", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot40)
				f.daemon[2] = claimLog(t, slot40, 2, tok(slot40, 1, 2), "late")
			},
			check: func(t *testing.T, r Report) {
				if r.Summary.MissedByReason[ReasonLate] != 1 {
					t.Errorf("missed by reason %v, want late=1", r.Summary.MissedByReason)
				}
			},
		},
		{
			name: "missed slot not checked while every instance is down", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot40)
				for i := range 3 {
					f.faults = append(f.faults, Fault{AtMs: at(39), Kind: FaultStop, Instance: i},
						Fault{AtMs: at(41), Kind: FaultCont, Instance: i})
				}
			},
			check: func(t *testing.T, r Report) {
				if r.Summary.MissedByReason[ReasonNoHealthy] != 1 {
					t.Errorf("missed by reason %v, want no-healthy-instance=1", r.Summary.MissedByReason)
				}
			},
		},
		{
			name: "result mismatch", lease: true, want: []string{KindResult}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.setStatus(row(slot20, 1, 2, tok(slot20, 1, 2), "failed", 1))
			},
		},
		{
			name: "result: status failed for exit 0", lease: false, want: []string{KindResult}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.setStatus(row(slot20, 1, 2, tok(slot20, 1, 2), "failed", 0))
			},
		},
		{
			name: "result never recorded", lease: false, want: []string{KindResult}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.setStatus(row(slot20, 1, 2, tok(slot20, 1, 2), "running", 0))
			},
		},
		{
			name: "status token that never started, excused: its instance was killed", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot40)
				f.setStatus(row(slot40, 1, 1, tok(slot40, 1, 1), "running", 0))
				f.faults = append(f.faults, Fault{AtMs: at(40.05), Kind: FaultKill, Instance: 1})
				f.daemon[1] = claimLog(t, slot40, 1, tok(slot40, 1, 1), "won")
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindResult, "died before start") || r.Summary.MissedByReason[ReasonWinnerDied] != 1 {
					t.Errorf("excused %v, missed %v: want died before start and winner-died", r.Excused, r.Summary.MissedByReason)
				}
			},
		},
		// A: claim-only winners that died as they won.
		{
			name: "claim-only: the store names a winner killed 3 ms after winning", lease: false,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot30)
				r := row(slot30, 1, 0, tok(slot30, 1, 0), "running", 0)
				started := time.UnixMilli(slot30 + 12).UTC().Format(time.RFC3339Nano)
				r.StartedAt = &started
				f.setStatus(r)
				f.faults = append(f.faults, Fault{AtMs: slot30 + 15, Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(32), Kind: FaultStart, Instance: 0})
				f.daemon[0] = claimAt(t, at(32.2), slot30, 0, tok(slot30, 9, 0), "lost", 0)
				f.daemon[1] = claimAt(t, slot30+30, slot30, 1, tok(slot30, 9, 1), "lost", 0)
				f.daemon[2] = claimAt(t, slot30+40, slot30, 2, tok(slot30, 9, 2), "lost", 0)
			},
			check: func(t *testing.T, r Report) {
				if r.Summary.MissedByReason[ReasonWinnerDied] != 1 || !excused(r, KindMissed, ReasonWinnerDied, "status.jsonl:", "kill chaos-0") {
					t.Errorf("missed %v, excused %v: want winner-died with the status row and the kill", r.Summary.MissedByReason, r.Excused)
				}
			},
		},
		{
			name: "claim-only: the winner's clock ran 400 ms ahead and it was killed before the slot (real time)", lease: false,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot30)
				r := row(slot30, 1, 0, tok(slot30, 1, 0), "running", 0)
				started := time.UnixMilli(slot30 + 5).UTC().Format(time.RFC3339Nano) // the winner's clock
				r.StartedAt = &started
				f.setStatus(r)
				f.faults = append(f.faults, Fault{AtMs: at(20), Kind: FaultSkew, Instance: 0, SkewMs: 400},
					Fault{AtMs: slot30 - 300, Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(32), Kind: FaultStart, Instance: 0})
				f.daemon[0] = claimAt(t, at(32.2), slot30, 0, tok(slot30, 9, 0), "lost", 0)
				f.daemon[1] = claimAt(t, slot30+30, slot30, 1, tok(slot30, 9, 1), "lost", 0)
				f.daemon[2] = claimAt(t, slot30+40, slot30, 2, tok(slot30, 9, 2), "lost", 0)
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindResult, "died before start") {
					t.Errorf("excused %v: want the running row without a start excused, its winner killed", r.Excused)
				}
			},
		},
		{
			// RabbitMQ's built-in head start is 500 ms: its winner may die
			// that long before the slot, after its claim was won.
			name: "claim-only: the winner claimed 500 ms ahead and was killed 400 ms before the slot", lease: false,
			setup: func(t *testing.T, f *fx) {
				f.info.Jobs[0].ClaimAheadMs = 500
				f.drop(slot30)
				r := row(slot30, 1, 0, tok(slot30, 1, 0), "running", 0)
				started := time.UnixMilli(slot30).UTC().Format(time.RFC3339Nano) // a run claimed ahead starts at its slot
				r.StartedAt = &started
				f.setStatus(r)
				f.faults = append(f.faults, Fault{AtMs: slot30 - 400, Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(32), Kind: FaultStart, Instance: 0})
				f.daemon[1] = claimAt(t, slot30-470, slot30, 1, tok(slot30, 9, 1), "lost", 0)
				f.daemon[2] = claimAt(t, slot30-460, slot30, 2, tok(slot30, 9, 2), "lost", 0)
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindResult, "died before start") || r.Summary.Violations != 0 {
					t.Errorf("violations %v, excused %v: want the running row without a start excused, its winner killed within the head start", r.Violations, r.Excused)
				}
			},
		},
		{
			name: "claim-only: every answer lost and the silent instance was killed (no status row)", lease: false,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot30)
				f.faults = append(f.faults, Fault{AtMs: slot30 + 25, Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(32), Kind: FaultStart, Instance: 0})
				f.daemon[0] = claimAt(t, at(32.4), slot30, 0, tok(slot30, 9, 0), "lost", 0) // the restarted daemon
				f.daemon[1] = claimAt(t, slot30+27, slot30, 1, tok(slot30, 9, 1), "lost", 0)
				f.daemon[2] = claimAt(t, at(31.4), slot30, 2, tok(slot30, 9, 2), "lost", 0)
			},
			check: func(t *testing.T, r Report) {
				if r.Summary.MissedByReason[ReasonWinnerDied] != 1 || !excused(r, KindMissed, "every claim answer for the slot was lost", "chaos-0 gave no answer before faults.jsonl:1 kill") {
					t.Errorf("missed %v, excused %v: want winner-died inferred from the lost answers", r.Summary.MissedByReason, r.Excused)
				}
			},
		},
		{
			name: "claim-only: answers lost but a healthy instance said nothing: still missed", lease: false,
			want: []string{KindMissed}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot30)
				f.faults = append(f.faults, Fault{AtMs: slot30 + 25, Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(32), Kind: FaultStart, Instance: 0})
				f.daemon[1] = claimAt(t, slot30+27, slot30, 1, tok(slot30, 9, 1), "lost", 0)
			},
			check: func(t *testing.T, r Report) {
				if !strings.Contains(r.Violations[0].Evidence, "no claim answer for the slot in the daemon log of: chaos-2") {
					t.Errorf("evidence does not name the silent instance: %s", r.Violations[0])
				}
			},
		},
		// B: jobs that outlive their SIGKILLed daemon by up to KillGraceMs.
		{
			name: "kill 15 ms before the job's start record: it ends at the kill plus the grace", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot30)
				f.runs = append(f.runs,
					jrun{slot30, 0, 1, tok(slot30, 1, 0), slot30 + 20, 0, 0, ""},
					jrun{slot30, 1, 2, tok(slot30, 2, 1), at(34.5), at(36.5), 0, "ok"})
				f.faults = append(f.faults, Fault{AtMs: slot30 + 5, Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(33), Kind: FaultStart, Instance: 0})
				f.setStatus(row(slot30, 2, 1, tok(slot30, 2, 1), "succeeded", 0))
			},
			check: func(t *testing.T, r Report) {
				if r.Summary.Takeovers != 1 || r.Summary.TakeoverMaxMs != 4495 {
					t.Errorf("takeovers %d max %d, want one of 4495 ms from the kill", r.Summary.Takeovers, r.Summary.TakeoverMaxMs)
				}
			},
		},
		{
			name: "job outlives its killed runner by 62 ms, write accepted before the backup started: excused", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot30)
				f.runs = append(f.runs,
					jrun{slot30, 0, 1, tok(slot30, 1, 0), slot30 + 10, at(31.062), 0, "ok"},
					jrun{slot30, 1, 2, tok(slot30, 2, 1), at(33.6), at(35.6), 0, "ok"})
				f.faults = append(f.faults, Fault{AtMs: at(31), Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(32), Kind: FaultStart, Instance: 0})
				f.setStatus(row(slot30, 2, 1, tok(slot30, 2, 1), "succeeded", 0))
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindDuplicate, "62 ms after its runner's faults.jsonl:1 kill", "wrote within the kill grace, before the backup started") {
					t.Errorf("excused %v, want the duplicate excused by the kill grace", r.Excused)
				}
			},
		},
		{
			name: "job outlives its killed runner and writes after the backup started: violation", lease: true,
			want: []string{KindConcurrent, KindDuplicate}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot30)
				f.runs = append(f.runs,
					jrun{slot30, 0, 1, tok(slot30, 1, 0), slot30 + 10, at(31.2), 0, "ok"},
					jrun{slot30, 1, 2, tok(slot30, 2, 1), at(31.1), at(33.1), 0, "ok"})
				f.faults = append(f.faults, Fault{AtMs: at(31), Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(32), Kind: FaultStart, Instance: 0})
				f.setStatus(row(slot30, 2, 1, tok(slot30, 2, 1), "succeeded", 0))
			},
		},
		// C: no excuse for a runner that never records, nor for backups that answered overlap.
		{
			name: "claim-only: result not recorded after a blackhole is a violation", lease: false,
			want: []string{KindResult}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.setStatus(row(slot20, 1, 2, tok(slot20, 1, 2), "running", 0))
				f.faults = append(f.faults, Fault{AtMs: at(21), Kind: FaultBlackhole, Instance: 2},
					Fault{AtMs: at(24), Kind: FaultHeal, Instance: 2})
				f.daemon[2] = notRecordedLog(t, at(40), slot20, 2, tok(slot20, 1, 2))
			},
			check: func(t *testing.T, r Report) {
				if len(r.Excused) != 0 || !strings.Contains(r.Violations[0].Evidence, "result not recorded") {
					t.Errorf("excused %v; violation %s: want no excuse and the runner's line as evidence", r.Excused, r.Violations[0])
				}
			},
		},
		{
			name: "claim-only: result not recorded because the runner was killed before its job ended: excused", lease: false,
			setup: func(t *testing.T, f *fx) {
				f.setStatus(row(slot20, 1, 2, tok(slot20, 1, 2), "running", 0))
				f.faults = append(f.faults, Fault{AtMs: at(21.9), Kind: FaultKill, Instance: 2},
					Fault{AtMs: at(23), Kind: FaultStart, Instance: 2})
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindResult, "its runner was dead", "kill chaos-2") {
					t.Errorf("excused %v, want the dead runner", r.Excused)
				}
			},
		},
		{
			name: "claim-only: result not recorded, runner killed 990 ms after the job ended under 300 ms latency: excused", lease: false,
			setup: func(t *testing.T, f *fx) {
				killAfterEndUnderLatency(f, at(23), 300)
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindResult, "killed 990 ms after the job ended while its store traffic was delayed by 300 ms each way", "3 round trips of it (1800 ms)") {
					t.Errorf("excused %v, want the kill under latency", r.Excused)
				}
			},
		},
		{
			name: "claim-only: result not recorded, runner killed 990 ms after the job ended and 100 ms after it logged the end: excused", lease: false,
			setup: func(t *testing.T, f *fx) {
				killAfterEndUnderLatency(f, at(23), 0)
				f.daemon[2] = finishedLog(t, at(22.9), at(20), 2, tok(at(20), 1, 2))
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindResult, "killed 100 ms after it logged the job's end", "first write of the result in flight", "kill chaos-2") {
					t.Errorf("excused %v, want the kill after the runner's line", r.Excused)
				}
			},
		},
		{
			name: "claim-only: result not recorded, runner killed 400 ms after it logged the end and a failed write: a violation", lease: false,
			want: []string{KindResult}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				killAfterEndUnderLatency(f, at(23), 0)
				f.daemon[2] = append(finishedLog(t, at(22.6), at(20), 2, tok(at(20), 1, 2)),
					recordRetryLog(t, at(22.8), at(20), 2, tok(at(20), 1, 2))...)
			},
		},
		{
			name: "claim-only: result not recorded, runner killed 2.5 s after it logged the end (past one call): a violation", lease: false,
			want: []string{KindResult}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				killAfterEndUnderLatency(f, at(25), 0)
				f.daemon[2] = finishedLog(t, at(22.5), at(20), 2, tok(at(20), 1, 2))
			},
		},
		{
			name: "claim-only: result not recorded, runner killed 990 ms after the job ended, no latency: a violation", lease: false,
			want: []string{KindResult}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				killAfterEndUnderLatency(f, at(23), 0)
			},
		},
		{
			name: "claim-only: result not recorded, runner killed later than the latency explains: a violation", lease: false,
			want: []string{KindResult}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				killAfterEndUnderLatency(f, at(24.5), 300)
			},
		},
		{
			name: "no takeover although the other instances answered overlap", lease: true,
			want: []string{KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot30)
				f.runs = append(f.runs, jrun{slot30, 0, 1, tok(slot30, 1, 0), at(31.5), 0, 0, ""})
				f.faults = append(f.faults, Fault{AtMs: at(32), Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(34), Kind: FaultStart, Instance: 0})
				f.daemon[0] = claimAt(t, at(31.49), slot30, 0, tok(slot30, 1, 0), "won", 1)
				f.daemon[1] = claimAt(t, slot30+20, slot30, 1, tok(slot30, 9, 1), "overlap", 0)
				f.daemon[2] = claimAt(t, slot30+20, slot30, 2, tok(slot30, 9, 2), "overlap", 0)
				f.setStatus(row(slot30, 1, 0, tok(slot30, 1, 0), "running", 0))
			},
			check: func(t *testing.T, r Report) {
				if !strings.Contains(r.Violations[0].Evidence, "could take over: chaos-1, chaos-2") {
					t.Errorf("violation %s: want chaos-1 and chaos-2 as backups", r.Violations[0])
				}
			},
		},
		// D: sqlite shares one file: any instance's pause is a store outage.
		{
			name: "sqlite: a takeover delayed by another instance's pause is excused", lease: true,
			setup: func(t *testing.T, f *fx) {
				sqlitePausedTakeover(f, "sqlite")
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindTakeover, "sqlite: instance chaos-2 paused holding the shared file's write lock possibly") {
					t.Errorf("excused %v, want the takeover excused by chaos-2's pause", r.Excused)
				}
			},
		},
		{
			name: "postgres: the same late takeover is a violation", lease: true,
			want: []string{KindTakeover}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				sqlitePausedTakeover(f, "postgres")
			},
		},
		{
			name: "sqlite: a slot missed while another instance was paused counts as store-down", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.info.Backend = "sqlite"
				f.drop(slot40)
				f.faults = append(f.faults, Fault{AtMs: at(39), Kind: FaultStop, Instance: 0},
					Fault{AtMs: at(41), Kind: FaultCont, Instance: 0})
			},
			check: func(t *testing.T, r Report) {
				if r.Summary.MissedByReason[ReasonStoreDown] != 1 || !excused(r, KindMissed, "sqlite: instance chaos-0 paused") {
					t.Errorf("missed %v, excused %v: want store-down from the sqlite pause", r.Summary.MissedByReason, r.Excused)
				}
			},
		},
		{
			name: "sqlite: attempts overlap while another instance was paused longer than the lease", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.info.Backend = "sqlite"
				f.drop(slot20)
				f.runs = append(f.runs,
					jrun{slot20, 2, 1, tok(slot20, 1, 2), slot20 + 10, at(25.5), 0, "rejected"},
					jrun{slot20, 1, 2, tok(slot20, 2, 1), at(24), at(26), 0, "ok"})
				f.faults = append(f.faults, Fault{AtMs: at(20.5), Kind: FaultStop, Instance: 0},
					Fault{AtMs: at(25), Kind: FaultCont, Instance: 0})
				f.setStatus(row(slot20, 2, 1, tok(slot20, 2, 1), "succeeded", 0))
			},
			check: func(t *testing.T, r Report) {
				if !excused(r, KindConcurrent, "sqlite: instance chaos-0 paused") {
					t.Errorf("excused %v, want the overlap allowed by the sqlite pause", r.Excused)
				}
			},
		},
		// One underlying event, one violation.
		{
			name: "one kill, two runs not taken over: reported once", lease: true,
			want: []string{KindTakeover}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.info.Jobs[0].Overlap = "allow"
				f.drop(slot20)
				f.drop(slot30)
				f.runs = append(f.runs,
					jrun{slot20, 0, 1, tok(slot20, 1, 0), slot20 + 10, 0, 0, ""},
					jrun{slot30, 0, 1, tok(slot30, 1, 0), slot30 + 10, 0, 0, ""})
				f.faults = append(f.faults, Fault{AtMs: at(31), Kind: FaultKill, Instance: 0},
					Fault{AtMs: at(33), Kind: FaultStart, Instance: 0})
				f.setStatus(row(slot20, 1, 0, tok(slot20, 1, 0), "running", 0))
				f.setStatus(row(slot30, 1, 0, tok(slot30, 1, 0), "running", 0))
			},
			check: func(t *testing.T, r Report) {
				if len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Evidence, "also concerns job tick slot "+strconv.FormatInt(slot30, 10)) {
					t.Errorf("violations %v: want one, naming slot 30 too", r.Violations)
				}
			},
		},
		{
			name: "one attempt overlapping two later slots: reported once", lease: true,
			want: []string{KindConcurrent}, slot: slot30,
			setup: func(t *testing.T, f *fx) {
				f.drop(slot20)
				f.runs = append(f.runs, jrun{slot20, 2, 1, tok(slot20, 1, 2), slot20 + 10, at(41), 0, "ok"})
				f.setStatus(row(slot20, 1, 2, tok(slot20, 1, 2), "succeeded", 0))
			},
			check: func(t *testing.T, r Report) {
				if len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Evidence, "also concerns job tick slot "+strconv.FormatInt(slot40, 10)) {
					t.Errorf("violations %v: want one, naming slot 40 too", r.Violations)
				}
			},
		},
		{
			name: "a job started after its lease's end", lease: true,
			want: []string{KindLeaseStart}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				// slot 20's job starts at 20.010 s; its lease ended at 19.950 s.
				startedAt20(t, f, slot20-50)
				f.faults = append(f.faults, Fault{AtMs: slot20 - 300, Kind: FaultOverload, Instance: -1, Detail: "8 loops for 2000ms"},
					Fault{AtMs: slot20 + 1700, Kind: FaultOverloadEnd, Instance: -1})
			},
			check: func(t *testing.T, r Report) {
				ev := r.Violations[0].Evidence
				for _, want := range []string{"60 ms after the end of its lease", "daemon-2.log:", "journal-2.log:", "overload"} {
					if !strings.Contains(ev, want) {
						t.Errorf("evidence lacks %q:\n%s", want, ev)
					}
				}
				if s := r.Summary; s.LeaseStartsChecked != 1 || s.LeaseStartWorstMs != 60 || s.LeaseStartsUnlogged != 4 {
					t.Errorf("summary: %d checked, %d unlogged, worst %d ms; want 1, 4, 60", s.LeaseStartsChecked, s.LeaseStartsUnlogged, s.LeaseStartWorstMs)
				}
			},
		},
		{
			name: "a job started just past its lease's end, beyond the exec margin", lease: true,
			want: []string{KindLeaseStart}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				startedAt20(t, f, slot20+10-ExecMarginMs-1)
			},
		},
		{
			name: "a job started just inside its lease", lease: true,
			setup: func(t *testing.T, f *fx) {
				startedAt20(t, f, slot20+11)
			},
			check: func(t *testing.T, r Report) {
				if s := r.Summary; s.LeaseStartsChecked != 1 || s.LeaseStartWorstMs != -1 {
					t.Errorf("summary: %d checked, worst %d ms; want 1, -1", s.LeaseStartsChecked, s.LeaseStartWorstMs)
				}
				if !strings.Contains(r.Text(), "latest start -1 ms from its lease's end") {
					t.Errorf("the report lacks the lease line:\n%s", r.Text())
				}
			},
		},
		{
			name: "a job started within the exec margin after its lease's end", lease: true,
			setup: func(t *testing.T, f *fx) {
				startedAt20(t, f, slot20+10-ExecMarginMs)
			},
		},
		{
			// The job binary took 2 s to stamp its start (CPU starvation),
			// but its exec had returned to the runner inside the lease.
			name: "a job slow to stamp its start, exec'd inside its lease", lease: true,
			setup: func(t *testing.T, f *fx) {
				slowJobAt20(f, at(22))
				startedLine20(t, f, at(20)+15, at(21))
			},
			check: func(t *testing.T, r Report) {
				if s := r.Summary; s.StartStampLagMaxMs != 1985 || s.LeaseStartWorstMs != -985 {
					t.Errorf("stamp lag %d ms, worst start %d ms; want 1985, -985", s.StartStampLagMaxMs, s.LeaseStartWorstMs)
				}
			},
		},
		{
			name: "a job slow to stamp its start, its runner's line after the lease", lease: true,
			want: []string{KindLeaseStart}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				slowJobAt20(f, at(22))
				startedLine20(t, f, at(21.5), at(21))
			},
			check: func(t *testing.T, r Report) {
				if ev := r.Violations[0].Evidence; !strings.Contains(ev, "500 ms after the end of its lease") {
					t.Errorf("evidence does not judge the runner's line (21.5 s):\n%s", ev)
				}
			},
		},
		{
			// The store's clock runs 2 s ahead of the wall clock: its
			// lease_until 21.5 s is 19.5 s on the wall, before the start.
			name: "a lease judged on the store's clock", lease: true,
			want: []string{KindLeaseStart}, slot: slot20,
			setup: func(t *testing.T, f *fx) {
				f.info.StoreClockOffsetMs = 2000
				startedAt20(t, f, at(21.5))
			},
		},
		{
			name: "a lease judged on the store's clock, the start inside it", lease: true,
			setup: func(t *testing.T, f *fx) {
				f.info.StoreClockOffsetMs = -2000
				startedAt20(t, f, at(18.5))
			},
		},
		{
			name: "truncated journal line", lease: true, want: []string{KindJournal},
			setup: func(t *testing.T, f *fx) {
				f.journal[0] = []string{"tick 1780000020000 1 abc"}
			},
			check: func(t *testing.T, r Report) {
				if !strings.Contains(r.Violations[0].Evidence, "journal-0.log:") {
					t.Errorf("evidence %q does not name the file and line", r.Violations[0].Evidence)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := base(tc.lease)
			if tc.setup != nil {
				tc.setup(t, f)
			}
			r, err := Load(f.write(t))
			if err != nil {
				t.Fatal(err)
			}
			rep := Check(r)
			text := rep.Text()
			if got := kinds(rep.Violations); !slices.Equal(got, tc.want) {
				t.Fatalf("violation kinds %v, want %v\n%s", got, tc.want, text)
			}
			if rep.OK() != (len(tc.want) == 0) || rep.Summary.Violations != len(rep.Violations) {
				t.Errorf("OK %v with %d violations (summary %d)", rep.OK(), len(rep.Violations), rep.Summary.Violations)
			}
			for _, v := range rep.Violations {
				if tc.slot == 0 {
					continue
				}
				if v.Job != "tick" || v.SlotMs != tc.slot || !strings.Contains(v.String(), "tick") || !strings.Contains(v.String(), strconv.FormatInt(tc.slot, 10)) {
					t.Errorf("violation does not name job tick and slot %d: %s", tc.slot, v)
				}
				if !strings.Contains(text, v.Evidence) {
					t.Errorf("the text lacks the evidence %q", v.Evidence)
				}
			}
			if tc.check != nil {
				tc.check(t, rep)
			}
			if _, err := json.Marshal(rep.Summary); err != nil {
				t.Error(err)
			}
		})
	}
}

// killAt30 has chaos-0 win slot 30 and die at 31 s, before its job ended.
// selfFencedAt20 has slot 20's attempt on chaos-2 do its write at 22.01 s,
// and the store mark the run interrupted; with logged, chaos-2's runner
// says it fenced itself at 23.5 s, before it saw the command exit.
func selfFencedAt20(t *testing.T, f *fx, logged bool) {
	slot := at(20)
	f.setStatus(row(slot, 1, 2, tok(slot, 1, 2), "interrupted", 0))
	f.runs = slices.DeleteFunc(f.runs, func(r jrun) bool { return r.slot == slot })
	f.runs = append(f.runs, jrun{slot, 2, 1, tok(slot, 1, 2), slot + 10, at(22.01), 0, "ok"})
	if logged {
		f.daemon[2] = logLines(t, at(23.5), func(log *zap.Logger) {
			log.Error("fenced by my own clock: no renewal succeeded within the lease (store unreachable, or this process was paused); stopping the job",
				zap.String("job", "tick"), zap.Time("slot", time.UnixMilli(slot).UTC()), zap.Int("attempt", 1),
				zap.String("instance", instName(2)), zap.String("token", tok(slot, 1, 2)[:8]))
		})
	}
}

// rerunAt20 has slot 20's attempt 1 on chaos-2 do its write at 22 s, and
// attempt 2 on chaos-1 run again from 24.5 s; with logged, chaos-2's runner
// says at 21.5 s that a renewal went unanswered.
func rerunAt20(t *testing.T, f *fx, logged bool) {
	slot := at(20)
	f.drop(slot)
	f.runs = append(f.runs, jrun{slot, 2, 1, tok(slot, 1, 2), slot + 10, at(22), 0, "ok"},
		jrun{slot, 1, 2, tok(slot, 2, 1), at(24.5), at(26.5), 0, "ok"})
	f.status = append(f.status, row(slot, 2, 1, tok(slot, 2, 1), "succeeded", 0))
	if logged {
		f.daemon[2] = logLines(t, at(21.5), func(log *zap.Logger) {
			log.Warn("store unreachable: lease renewal failed; retrying",
				zap.String("job", "tick"), zap.Time("slot", time.UnixMilli(slot).UTC()), zap.Int("attempt", 1),
				zap.String("instance", instName(2)), zap.String("token", tok(slot, 1, 2)[:8]),
				zap.String("error", "lease renewal got no answer within a heartbeat"))
		})
	}
}

// startedAt20 has chaos-2's runner log slot 20's "job started" line with
// the lease's end leaseUntil (store time), at 20.015 s; its job's start
// record says 20.010 s.
func startedAt20(t *testing.T, f *fx, leaseUntil int64) {
	startedLine20(t, f, at(20)+15, leaseUntil)
}

// slowJobAt20 has slot 20's job on chaos-2 stamp its start record at
// startMs and end 2 s later.
func slowJobAt20(f *fx, startMs int64) {
	slot := at(20)
	f.drop(slot)
	f.runs = append(f.runs, jrun{slot, 2, 1, tok(slot, 1, 2), startMs, startMs + 2000, 0, "ok"})
	f.status = append(f.status, row(slot, 1, 2, tok(slot, 1, 2), "succeeded", 0))
}

// startedLine20 has chaos-2's runner log slot 20's "job started" line at
// tsMs, with the lease's end leaseUntil (store time).
func startedLine20(t *testing.T, f *fx, tsMs, leaseUntil int64) {
	slot := at(20)
	f.daemon[2] = append(f.daemon[2], logLines(t, tsMs, func(log *zap.Logger) {
		log.Info("job started", zap.String("job", "tick"),
			zap.String("slot", time.UnixMilli(slot).UTC().Format(time.RFC3339Nano)), zap.Int("attempt", 1),
			zap.String("instance", instName(2)), zap.String("token", tok(slot, 1, 2)[:8]),
			zap.Int("pid", 4242), zap.Time("lease_until", time.UnixMilli(leaseUntil)))
	})...)
}

func killAt30(f *fx) {
	slot := at(30)
	f.drop(slot)
	f.runs = append(f.runs, jrun{slot, 0, 1, tok(slot, 1, 0), slot + 10, 0, 0, ""})
	f.faults = append(f.faults, Fault{AtMs: at(31), Kind: FaultKill, Instance: 0},
		Fault{AtMs: at(33), Kind: FaultStart, Instance: 0})
}

// lostSecondAttempt has chaos-0 die at 31 s in slot 30's job (bound 36
// s), chaos-1 win attempt 2 unlogged and die at 34.2 s (bound 39.2 s), and
// chaos-2 start attempt 3 at startSec.
func lostSecondAttempt(f *fx, startSec float64) {
	killAt30(f)
	slot := at(30)
	f.faults = append(f.faults, Fault{AtMs: at(34.2), Kind: FaultKill, Instance: 1},
		Fault{AtMs: at(35), Kind: FaultStart, Instance: 1})
	f.runs = append(f.runs, jrun{slot, 2, 3, tok(slot, 3, 2), at(startSec), at(startSec + 0.05), 0, "ok"})
	f.setStatus(row(slot, 3, 2, tok(slot, 3, 2), "succeeded", 0))
}

// restartedRunnerCut has chaos-0 die at 31 s in slot 30's job (bound 36
// s), restart at 33 s, win attempt 2 unlogged and be cut off from the
// store at 34 s (bound 39 s), and chaos-2 start attempt 3 at startSec.
func restartedRunnerCut(f *fx, startSec float64) {
	killAt30(f)
	slot := at(30)
	f.faults = append(f.faults, Fault{AtMs: at(34), Kind: FaultCut, Instance: 0, Detail: "cut 3000ms"},
		Fault{AtMs: at(37), Kind: FaultHeal, Instance: 0})
	f.runs = append(f.runs, jrun{slot, 2, 3, tok(slot, 3, 2), at(startSec), at(startSec + 0.05), 0, "ok"})
	f.setStatus(row(slot, 3, 2, tok(slot, 3, 2), "succeeded", 0))
}

// pausedRunnerRecords has chaos-0's daemon, the runner of slot 30's job,
// paused from 31 s to contSec (longer than the 3 s lease; the bound ends
// at 36 s), its job ending at 32 s meanwhile, and no takeover: the store
// holds attempt 1's own result, recorded once the daemon resumed.
func pausedRunnerRecords(f *fx, contSec float64) {
	slot := at(30)
	f.drop(slot)
	f.runs = append(f.runs, jrun{slot, 0, 1, tok(slot, 1, 0), slot + 10, at(32), 0, "ok"})
	f.faults = append(f.faults, Fault{AtMs: at(31), Kind: FaultStop, Instance: 0, Detail: "pause"},
		Fault{AtMs: at(contSec), Kind: FaultCont, Instance: 0, Detail: "pause"})
	f.setStatus(row(slot, 1, 0, tok(slot, 1, 0), "succeeded", 0))
}

// lateTakeoverUnderLatency has chaos-0 die at 31 s in slot 30's job and
// chaos-1 take over at 38 s, 2 s after the bound (36 s), while the proxy
// delayed by latencyMs the store traffic of the first `slowed` of chaos-1
// and chaos-2 from 32 s to 35 s.
func lateTakeoverUnderLatency(f *fx, latencyMs int64, slowed int) {
	killAt30(f)
	slot := at(30)
	f.runs = append(f.runs, jrun{slot, 1, 2, tok(slot, 2, 1), at(38), at(39.5), 0, "ok"})
	f.setStatus(row(slot, 2, 1, tok(slot, 2, 1), "succeeded", 0))
	for i := 1; i <= slowed; i++ {
		f.faults = append(f.faults,
			Fault{AtMs: at(32), Kind: FaultLatency, Instance: i, Detail: fmt.Sprintf("latency %dms for 3000ms", latencyMs)},
			Fault{AtMs: at(35), Kind: FaultHeal, Instance: i})
	}
}

// killAfterEndUnderLatency leaves slot 20's result (chaos-2's job, ended
// at 22.01 s) unrecorded, with chaos-2 killed at killMs and, when
// latencyMs > 0, its store traffic delayed by latencyMs from 21 s to 24 s.
func killAfterEndUnderLatency(f *fx, killMs, latencyMs int64) {
	slot20 := at(20)
	f.setStatus(row(slot20, 1, 2, tok(slot20, 1, 2), "running", 0))
	f.faults = append(f.faults, Fault{AtMs: killMs, Kind: FaultKill, Instance: 2},
		Fault{AtMs: killMs + 1000, Kind: FaultStart, Instance: 2})
	if latencyMs > 0 {
		f.faults = append(f.faults,
			Fault{AtMs: at(21), Kind: FaultLatency, Instance: 2, Detail: fmt.Sprintf("latency %dms for 3000ms", latencyMs)},
			Fault{AtMs: at(24), Kind: FaultHeal, Instance: 2})
	}
}

// sqlitePausedTakeover has chaos-0 die at 31 s in slot 30's job and
// chaos-1 take over only at 37.8 s, after the bound (36 s), while chaos-2
// was paused from 32 s to 37.5 s.
func sqlitePausedTakeover(f *fx, backend string) {
	f.info.Backend = backend
	killAt30(f)
	slot := at(30)
	f.runs = append(f.runs, jrun{slot, 1, 2, tok(slot, 2, 1), at(37.8), at(39.8), 0, "ok"})
	f.faults = append(f.faults, Fault{AtMs: at(32), Kind: FaultStop, Instance: 2},
		Fault{AtMs: at(37.5), Kind: FaultCont, Instance: 2})
	f.setStatus(row(slot, 2, 1, tok(slot, 2, 1), "succeeded", 0))
}

// pausedOverlap has chaos-2's daemon paused 4.5 s (lease 3 s) while its job
// of slot 20 runs on; chaos-0 takes over at 24 s, before the old job ends
// at 25.5 s with oldFence.
// shortPauseOverlap: instance 2 runs attempt 1 of slot 20 from the slot to
// 24.9 s and is paused pauseMs from 21 s; attempt 2 starts on instance 0
// at 23.8 s; the old attempt's fenced write is rejected.
func shortPauseOverlap(f *fx, pauseMs int64) {
	slot := at(20)
	f.drop(slot)
	f.runs = append(f.runs,
		jrun{slot, 2, 1, tok(slot, 1, 2), slot + 10, at(24.9), 0, "rejected"},
		jrun{slot, 0, 2, tok(slot, 2, 0), at(23.8), at(26), 0, "ok"})
	f.faults = append(f.faults, Fault{AtMs: at(21), Kind: FaultStop, Instance: 2, Detail: fmt.Sprintf("pause %dms", pauseMs)},
		Fault{AtMs: at(21) + pauseMs, Kind: FaultCont, Instance: 2})
	f.setStatus(row(slot, 2, 0, tok(slot, 2, 0), "succeeded", 0))
}

func pausedOverlap(f *fx, oldFence string) {
	slot := at(20)
	f.drop(slot)
	f.runs = append(f.runs,
		jrun{slot, 2, 1, tok(slot, 1, 2), slot + 10, at(25.5), 0, oldFence},
		jrun{slot, 0, 2, tok(slot, 2, 0), at(24), at(26), 0, "ok"})
	f.faults = append(f.faults, Fault{AtMs: at(20.5), Kind: FaultStop, Instance: 2, Detail: "pause 4500ms"},
		Fault{AtMs: at(25), Kind: FaultCont, Instance: 2})
	f.setStatus(row(slot, 2, 0, tok(slot, 2, 0), "succeeded", 0))
}

// TestParseEventRealLogger parses lines written by the project's own
// logger the way the scheduler and the runner write them.
func TestParseEventRealLogger(t *testing.T) {
	slot := time.UnixMilli(at(40)).UTC()
	odd := time.UnixMilli(at(40.25)).UTC()
	lines := logLines(t, at(40.02), func(log *zap.Logger) {
		l := log.With(zap.String("job", "tick"), zap.Time("slot", slot), zap.String("instance", "chaos-1"), zap.String("token", "0123abcd"))
		l.Info("claim", zap.String("outcome", "won"), zap.Int("attempt", 2))
		l.Warn("claim abandoned: no answer from the store before the slot became late")
		log.Warn("missed: slots older than maxLate were not claimed", zap.String("job", "tick"), zap.Int("slots", 3),
			zap.Time("first", slot), zap.Time("last", odd))
		// The runner's fields: the slot as its own RFC 3339 string.
		log.Warn("result not recorded", zap.String("job", "tick"), zap.String("slot", "2026-05-28T20:26:40.250Z"), zap.Int("attempt", 1))
		log.Info("pruned old runs") // not used
	})
	if len(lines) != 5 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	ev, ok := ParseEvent([]byte(lines[0]))
	if !ok || ev.Msg != "claim" || ev.Job != "tick" || !ev.HasSlot || ev.SlotMs != at(40) || ev.Outcome != "won" || ev.Attempt != 2 || ev.Token != "0123abcd" || ev.TsMs != at(40.02) {
		t.Errorf("claim line %s read as %+v", lines[0], ev)
	}
	if ev, ok := ParseEvent([]byte(lines[1])); !ok || ev.SlotMs != at(40) || !strings.HasPrefix(ev.Msg, msgAbandonPrefix) {
		t.Errorf("abandoned line %s read as %+v", lines[1], ev)
	}
	if ev, ok := ParseEvent([]byte(lines[2])); !ok || ev.FirstMs != at(40) || ev.LastMs != at(40.25) || ev.HasSlot {
		t.Errorf("missed line %s read as %+v", lines[2], ev)
	}
	want := time.Date(2026, 5, 28, 20, 26, 40, 250e6, time.UTC).UnixMilli()
	if ev, ok := ParseEvent([]byte(lines[3])); !ok || ev.SlotMs != want {
		t.Errorf("runner line %s read as %+v", lines[3], ev)
	}
	if _, ok := ParseEvent([]byte(lines[4])); ok {
		t.Errorf("an unused message was kept: %s", lines[4])
	}
	if _, ok := ParseEvent([]byte(`{"msg":"claim",`)); ok {
		t.Error("a broken line was kept")
	}
}

func TestParseRecord(t *testing.T) {
	start, err := ParseRecord("tick 1780000020000 1 abcd chaos-2 1780000020010 - - -")
	if err != nil || !(start.Fence == "-" && start.EndMs == 0 && start.Exit == -1 && start.Attempt == 1 && start.Instance == "chaos-2") {
		t.Errorf("start record: %+v, %v", start, err)
	}
	end, err := ParseRecord("tick 1780000020000 2 abcd chaos-2 1780000020010 1780000022010 3 rejected")
	if err != nil || end.EndMs != 1780000022010 || end.Exit != 3 || end.Fence != "rejected" || end.Attempt != 2 {
		t.Errorf("end record: %+v, %v", end, err)
	}
	for _, bad := range []string{
		"tick 1780000020000 1 abcd chaos-2 1780000020010 1780000022010 0",
		"tick 1780000020000 x abcd chaos-2 1780000020010 - - -",
		"tick 1780000020000 1 abcd chaos-2 1780000020010 1780000022010 0 maybe",
		"tick 1780000020000 1 abcd chaos-2 1780000020010 1780000000000 0 ok",
	} {
		if _, err := ParseRecord(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestLoadErrorsNameFileAndLine(t *testing.T) {
	f := base(true)
	dir := f.write(t)
	if err := os.WriteFile(filepath.Join(dir, "status.jsonl"), []byte("{}\n{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "status.jsonl:2") {
		t.Errorf("error %v, want it to name status.jsonl:2", err)
	}
	if err := os.Remove(filepath.Join(dir, "status.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "journal-2.log")); err != nil {
		t.Fatal(err)
	}
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.HasStatus {
		t.Error("HasStatus with no status file")
	}
	rep := Check(r)
	// journal-2.log held slot 20 and 50: both are now missed.
	if got := kinds(rep.Violations); !slices.Equal(got, []string{KindMissed}) || len(rep.Violations) != 2 {
		t.Errorf("violations %v", rep.Violations)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "run.json") {
		t.Errorf("error %v, want it to name run.json", err)
	}
}

func TestPercentile(t *testing.T) {
	xs := []int64{50, 10, 40, 20, 30}
	for p, want := range map[int]int64{50: 30, 99: 50, 100: 50, 1: 10} {
		if got := percentile(xs, p); got != want {
			t.Errorf("p%d = %d, want %d", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty: want 0")
	}
}
