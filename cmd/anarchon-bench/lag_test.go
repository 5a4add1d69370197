package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestQuantileOf(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	d := ms(9, 1, 5, 3, 7, 2, 8, 4, 10, 6) // 1..10, unsorted
	orig := slices.Clone(d)
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0, 1 * time.Millisecond}, {0.5, 5 * time.Millisecond}, {0.99, 9 * time.Millisecond}, {1, 10 * time.Millisecond}} {
		if got := quantileOf(d, tc.p); got != tc.want {
			t.Errorf("quantileOf(1..10, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if !slices.Equal(d, orig) {
		t.Error("quantileOf sorted its argument")
	}
	if got := quantileOf(nil, 0.5); got != 0 {
		t.Errorf("quantileOf(nil) = %v", got)
	}
	// The same rank as table.go's percentile.
	big := make([]time.Duration, 1000)
	for i := range big {
		big[i] = time.Duration(1000-i) * time.Microsecond
	}
	if got := quantileOf(big, 0.99); got != 990*time.Microsecond {
		t.Errorf("quantileOf(1..1000 µs, 0.99) = %v, want 990µs", got)
	}
}

func TestParseEpochRealtime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"1796010305.750064", time.Unix(1796010305, 750064000), true},
		{"1796010305,000001", time.Unix(1796010305, 1000), true},
		{"1796010305.5", time.Unix(1796010305, 500000000), true},
		{"1796010305", time.Time{}, false},
		{"1796010305.", time.Time{}, false},
		{"x.5", time.Time{}, false},
		{"1.-5", time.Time{}, false},
		{"1.1234567890", time.Time{}, false},
	} {
		got, err := parseEpochRealtime(tc.in)
		if (err == nil) != tc.ok || !got.Equal(tc.want) {
			t.Errorf("parseEpochRealtime(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseLagRecords(t *testing.T) {
	in := "lag-0000 1796010305000 1796010305.012345 bench-0\n" +
		"garbage\n" +
		"lag-0001 1796010305000 1796010305.100000 bench-2\n" +
		"lag-0001 notanumber 1796010305.100000 bench-2\n" +
		"lag-0002 1796010306000 1796010306.0" // no newline yet: being written
	recs, bad := parseLagRecords([]byte(in))
	if bad != 2 || len(recs) != 2 {
		t.Fatalf("parseLagRecords: %d records, %d bad; want 2, 2", len(recs), bad)
	}
	r := recs[1]
	if r.job != "lag-0001" || r.slot != 1796010305000 || r.instance != "bench-2" || r.at.Sub(time.UnixMilli(r.slot)) != 100*time.Millisecond {
		t.Errorf("record %+v", r)
	}
	if recs, bad := parseLagRecords([]byte("lag-0 1 1.0 x")); len(recs) != 0 || bad != 0 {
		t.Errorf("a lone unterminated line: %d records, %d bad", len(recs), bad)
	}
}

func TestLagStatsOf(t *testing.T) {
	rec := func(job string, slot int64, lagMs int, inst string) lagRecord {
		return lagRecord{job: job, slot: slot, at: time.UnixMilli(slot + int64(lagMs)), instance: inst}
	}
	ws, we := time.UnixMilli(10_000), time.UnixMilli(12_000) // slots 10 s and 11 s
	recs := []lagRecord{
		rec("a", 9_000, 500, "i0"), // before the window
		rec("a", 9_000, 600, "i1"), // ... twice: counted as a duplicate anyway
		rec("a", 10_000, 20, "i0"),
		rec("b", 10_000, 30, "i1"),
		rec("a", 11_000, 40, "i2"),
		// b@11 s missing
		rec("b", 12_000, 50, "i0"), // after the window
	}
	s := lagStatsOf(recs, []string{"a", "b"}, ws, we)
	if !slices.Equal(s.lags, []time.Duration{20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond}) {
		t.Errorf("lags %v", s.lags)
	}
	if s.missing != 1 || s.dupCount != 1 || len(s.dups) != 1 || !strings.HasPrefix(s.dups[0], "a@9000 ×2") {
		t.Errorf("missing %d, duplicates %d %v; want 1, 1 [a@9000 ×2]", s.missing, s.dupCount, s.dups)
	}
	if s.byInstance["i0"] != 1 || s.byInstance["i1"] != 1 || s.byInstance["i2"] != 1 {
		t.Errorf("by instance %v", s.byInstance)
	}
}

func TestLagWindow(t *testing.T) {
	from := time.UnixMilli(100_300)
	if got, want := lagWindow(from), time.UnixMilli(104_000); !got.Equal(want) {
		t.Errorf("lagWindow(100.3 s) = %v, want %v (first whole second after the %v warm-up)", got, want, lagWarmup)
	}
}

// TestLagProbe runs the probe command itself: one line, the job's fields
// and an instant between the start and the end of the command.
func TestLagProbe(t *testing.T) {
	needSmoke(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash:", err)
	}
	file := filepath.Join(t.TempDir(), "it's here.rec")
	argv := lagProbeArgv(bash, file)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(daemonEnv(), "ANARCHON_JOB=lag-0007", "ANARCHON_SLOT_MS=1796010305000", "ANARCHON_INSTANCE=bench-1")
	before := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("probe: %v: %s", err, out)
	}
	after := time.Now()
	recs, bad, err := readLagRecords(file)
	if err != nil || bad != 0 || len(recs) != 1 {
		t.Fatalf("records %v, %d bad, %v", recs, bad, err)
	}
	r := recs[0]
	if r.job != "lag-0007" || r.slot != 1796010305000 || r.instance != "bench-1" || r.at.Before(before.Truncate(time.Microsecond)) || r.at.After(after) {
		t.Errorf("record %+v, command ran from %v to %v", r, before, after)
	}
}

// TestForker forks a probe for 2 jobs over 2 slots.
func TestForker(t *testing.T) {
	needSmoke(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash:", err)
	}
	file := filepath.Join(t.TempDir(), "forker.rec")
	from := time.Now()
	to := from.Truncate(time.Second).Add(3 * time.Second) // 2 whole seconds in [from, to)
	n, err := runForker(context.Background(), []string{"a", "b"}, lagProbeArgv(bash, file), daemonEnv(), from, to)
	if err != nil || n != 4 {
		t.Fatalf("runForker: %d started, %v; want 4", n, err)
	}
	recs, bad, err := readLagRecords(file)
	if err != nil || bad != 0 || len(recs) != 4 {
		t.Fatalf("records %v, %d bad, %v", recs, bad, err)
	}
	ws := from.Truncate(time.Second).Add(time.Second)
	s := lagStatsOf(recs, []string{"a", "b"}, ws, to)
	if s.missing != 0 || s.dupCount != 0 || len(s.lags) != 4 || s.byInstance[forkerInstance] != 4 {
		t.Errorf("stats %+v", s)
	}
	for _, l := range s.lags {
		if l < 0 {
			t.Errorf("negative lag %v: the forker forked before the slot", l)
		}
	}
}

// TestMeasureLagSmoke runs the real measurement, sqlite at 1 job per
// second for 3 s, when ANARCHON_BENCH_SMOKE=1 (it builds anarchond and
// runs daemons for about 20 s).
func TestMeasureLagSmoke(t *testing.T) {
	needSmoke(t)
	defer removeDaemonBuild()
	res := measureLag(context.Background(), "sqlite", []int{1}, 3*time.Second)
	if len(res) != 1 {
		t.Fatalf("%d results, want 1", len(res))
	}
	r := res[0]
	t.Logf("%+v", r)
	if r.Err != "" {
		t.Fatalf("measureLag: %s", r.Err)
	}
	if r.Runs != 3 || r.ForkerRuns != 3 || r.Expected != 3 || r.DaemonP50 <= 0 || r.ForkerP50 <= 0 {
		t.Errorf("want 3 runs each side with positive lags: %+v", r)
	}
}

func TestDaemonLogLags(t *testing.T) {
	log0 := `warning: crontab.yaml: no jobs: the daemon will run but do nothing
{"level":"info","ts":"2026-11-30T03:45:05.737440236Z","msg":"claim","job":"lag-0000","slot":"2026-11-30T03:45:05Z","instance":"bench-0","outcome":"won","attempt":1}
{"level":"info","ts":"2026-11-30T03:45:05.73875401Z","msg":"job started","job":"lag-0000","slot":"2026-11-30T03:45:05Z","attempt":1,"pid":17134}
{"level":"info","ts":"2026-11-30T03:45:06.0015Z","msg":"claim","job":"lag-0000","slot":"2026-11-30T03:45:06Z","instance":"bench-0","outcome":"running"}
{"level":"info","ts":"2026-11-30T03:45:04.5Z","msg":"claim","job":"lag-0000","slot":"2026-11-30T03:45:04Z","instance":"bench-0","outcome":"won","attempt":1}
`
	log1 := `{"level":"info","ts":"2026-11-30T03:45:06.02Z","msg":"claim","job":"lag-0000","slot":"2026-11-30T03:45:06Z","instance":"bench-1","outcome":"won","attempt":1}
{"level":"info","ts":"2026-11-30T03:45:06.03Z","msg":"job started","job":"lag-0000","slot":"2026-11-30T03:45:06Z","attempt":1,"pid":17135}
{"level":"info","ts":"2026-11-30T03:45:07.03Z","msg":"job started","job":"lag-0000","slot":"2026-11-30T03:45:07Z","attempt":1,"pid":17136}
`
	ws, _ := time.Parse(time.RFC3339, "2026-11-30T03:45:05Z")
	claimed, spawned, outcomes := daemonLogLags([][]byte{[]byte(log0), []byte(log1)}, ws, ws.Add(2*time.Second))
	if outcomes["won"] != 2 || outcomes["running"] != 1 || len(outcomes) != 2 {
		t.Errorf("outcomes %v, want won 2, running 1", outcomes)
	}
	if !slices.Equal(claimed, []time.Duration{737440236, 20 * time.Millisecond}) {
		t.Errorf("claimed %v", claimed)
	}
	if !slices.Equal(spawned, []time.Duration{738754010, 30 * time.Millisecond}) {
		t.Errorf("spawned %v", spawned)
	}
}

// needSmoke skips tests that start processes unless ANARCHON_BENCH_SMOKE=1:
// the default run tests pure helpers only.
func needSmoke(t *testing.T) {
	t.Helper()
	if os.Getenv("ANARCHON_BENCH_SMOKE") != "1" {
		t.Skip("starts processes (bash; TestMeasureLagSmoke: builds anarchond, runs 3 daemons and the forker, ~20 s): set ANARCHON_BENCH_SMOKE=1 to run")
	}
}
