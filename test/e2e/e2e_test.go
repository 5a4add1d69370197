// Package e2e runs real anarchond processes, built from this tree, through
// testscript scripts in testdata/: the command beside its expected result.
package e2e

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/anarchon/anarchon/internal/faultproxy"
	"github.com/anarchon/anarchon/internal/scheduler"
	"github.com/anarchon/anarchon/internal/testserver"
)

var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "anarchond-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// anarchon-supervise beside anarchond: the daemons start their jobs
	// under it, as installed.
	for _, name := range []string{"anarchond", "anarchon-supervise"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/anarchon/anarchon/cmd/"+name)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", name, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestScripts runs, on every store, the script folders that apply to it
// (store.dirs).
func TestScripts(t *testing.T) {
	all, err := stores()
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range all {
		t.Run(st.Name, func(t *testing.T) {
			if st.Server != nil {
				st.Server.Require(t, testserver.HostPort(st.URL))
			}
			for _, dir := range st.dirs {
				testscript.Run(t, params(st, filepath.Join("testdata", dir), workdirRoot(t)))
			}
		})
	}
}

// workdirRoot is where the scripts' work directories go: the test's own
// temporary directory, removed with it, unless -testwork asks to keep
// them (then testscript's default, the system's temporary directory).
func workdirRoot(t *testing.T) string {
	if f := flag.Lookup("testwork"); f != nil && f.Value.String() == "true" {
		return ""
	}
	return t.TempDir()
}

// params are the scripts of dir on st; their work directories go under
// root (the test's own temporary directory, removed with it).
func params(st store, dir, root string) testscript.Params {
	return testscript.Params{
		Dir:         dir,
		WorkdirRoot: root,
		Setup: func(env *testscript.Env) error {
			// Every script shares the machine with the others unless one
			// asks for it alone (solo). A script held back here waits
			// before it reads the clock for SOON below.
			soloMu.RLock()
			release := sync.OnceFunc(soloMu.RUnlock)
			env.Values[soloKey{}] = release
			env.Defer(release)
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+env.Getenv("PATH"))
			for _, kv := range soonVars(time.Now().UTC()) {
				env.Setenv(kv[0], kv[1])
			}
			// SPREAD_JOBS is how many jobs spread.txtar races for:
			// ANARCHON_TEST_SPREAD_JOBS, else 50.
			env.Setenv("SPREAD_JOBS", envOr("ANARCHON_TEST_SPREAD_JOBS", "50"))
			// Several daemons run on this host: each serves its metrics on
			// a port of its own.
			env.Setenv("ANARCHON_METRICS_LISTEN", "127.0.0.1:0")
			env.Values[storeKey{}] = st
			if err := st.setup(env, testserver.RandomID()); err != nil {
				return err
			}
			// anarchond refuses a crontab writable by group or others; the
			// archive's files are written 0666 minus the umask.
			return filepath.WalkDir(env.WorkDir, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				return os.Chmod(p, 0o644)
			})
		},
		// [store:NAME] holds on the store NAME (sqlite, postgres,
		// redis-lease, ...), for the few lines that do not apply to every
		// store of a folder; [peers] on the stores whose answer to a lost
		// claim names the winner; [lease] on the lease stores.
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "peers":
				return st.namesWinner, nil
			case "lease":
				return st.Settings.Leases(), nil
			case "chromium":
				return condChromium()
			}
			name, ok := strings.CutPrefix(cond, "store:")
			if !ok {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			return name == st.Name, nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile":      cmdWaitFile,
			"exactlyonce":   cmdExactlyOnce,
			"statusok":      cmdStatusOK,
			"pidgone":       cmdPidGone,
			"runner-signal": cmdRunnerSignal,
			"killwithguard": cmdKillWithGuard,
			"subst":         cmdSubst,
			"chmod":         cmdChmod,
			"proxy":         cmdProxy,
			"linecount":     cmdLineCount,
			"waitfiles":     cmdWaitFiles,
			"sleep":         cmdSleep,
			"now":           cmdNow,
			"sleepuntil":    cmdSleepUntil,
			"signal":        cmdSignal,
			"waitslot":      cmdWaitSlot,
			"metrics":       cmdMetrics,
			"shares":        cmdShares,
			"solo":          cmdSolo,
			"slotcount":     cmdSlotCount,
			"catchupcheck":  cmdCatchUpCheck,
			"accounted":     cmdAccounted,
			"outcomes":      cmdOutcomes,
			"hookcheck":     cmdHookCheck,
			"jitterstarts":  cmdJitterStarts,
			"api":           cmdAPI,
			"apimatch":      cmdAPIMatch,
			"browser":       cmdBrowser,
			"clusterpage":   cmdClusterPage,
		},
	}
}

type storeKey struct{}

// soloKey holds the function that gives up a script's shared hold on
// soloMu.
type soloKey struct{}

// soloMu is held shared by every running script, and exclusively by a
// script that measures how the daemons share work and must not share the
// machine's two cores with the other scripts' daemons.
var soloMu sync.RWMutex

// solo: wait until no other script runs, and keep the others from
// starting until this one ends.
// soonVars are the script variables of slots soon after now (UTC), set at
// a script's setup and again when a script gets the machine alone (solo),
// so that its slots are counted from when its daemons start: a fresh
// cluster runs nothing from before its start.
func soonVars(now time.Time) [][2]string {
	var vars [][2]string
	// SOON is a daily cron expression three seconds from now (UTC), at
	// least two after its truncation to the second: a job that fires once
	// while the script runs, after its daemon has started and reached a
	// store on a busy machine (a connection can take a second there).
	soon := now.Add(3 * time.Second)
	vars = append(vars, [2]string{"SOON", fmt.Sprintf("%d %d %d * * *", soon.Second(), soon.Minute(), soon.Hour())})
	// SOON_MS is SOON's slot, ms since the Unix epoch.
	vars = append(vars, [2]string{"SOON_MS", strconv.FormatInt(soon.Truncate(time.Second).UnixMilli(), 10)})
	// LATER, and LATER_MS, are a daily slot five seconds from now:
	// for a script whose daemon must be up a while before it.
	later := soon.Add(2 * time.Second)
	vars = append(vars, [2]string{"LATER", fmt.Sprintf("%d %d %d * * *", later.Second(), later.Minute(), later.Hour())})
	vars = append(vars, [2]string{"LATER_MS", strconv.FormatInt(later.Truncate(time.Second).UnixMilli(), 10)})
	// SOON3 fires three times, on consecutive seconds of one minute
	// starting at SOON or later.
	if soon.Second() > 57 {
		soon = soon.Truncate(time.Minute).Add(time.Minute)
	}
	vars = append(vars, [2]string{"SOON3", fmt.Sprintf("%d-%d %d %d * * *", soon.Second(), soon.Second()+2, soon.Minute(), soon.Hour())})
	// SOON10 fires ten times, on consecutive seconds of one
	// minute starting three seconds or more from now.
	soon10 := now.Add(3 * time.Second)
	if soon10.Second() > 50 {
		soon10 = soon10.Truncate(time.Minute).Add(time.Minute)
	}
	vars = append(vars, [2]string{"SOON10", fmt.Sprintf("%d-%d %d %d * * *", soon10.Second(), soon10.Second()+9, soon10.Minute(), soon10.Hour())})
	return vars
}

func cmdSolo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: solo")
	}
	ts.Value(soloKey{}).(func())()
	start := time.Now()
	soloMu.Lock()
	ts.Defer(soloMu.Unlock)
	ts.Logf("running alone after waiting %v for the other scripts", time.Since(start).Round(time.Millisecond))
	for _, kv := range soonVars(time.Now().UTC()) {
		ts.Setenv(kv[0], kv[1])
	}
}

var (
	proxiesMu sync.Mutex
	proxies   = map[*testscript.TestScript]*faultproxy.Proxy{}
)

// proxy start | cut | blackhole | pass | latency D | direct: put a fault
// proxy between the daemons started next and the store, and drive it.
// start points the store's ANARCHON_* address override at the proxy;
// direct points it at the store again (for daemons that stay connected).
func cmdProxy(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: proxy start|cut|blackhole|pass|latency D|direct")
	}
	st := ts.Value(storeKey{}).(store)
	proxiesMu.Lock()
	p := proxies[ts]
	proxiesMu.Unlock()
	if args[0] != "start" && args[0] != "direct" && p == nil {
		ts.Fatalf("proxy %s: no proxy started", args[0])
	}
	switch args[0] {
	case "start":
		var err error
		p, err = faultproxy.Start("127.0.0.1:0", testserver.HostPort(st.URL))
		ts.Check(err)
		proxiesMu.Lock()
		proxies[ts] = p
		proxiesMu.Unlock()
		ts.Defer(func() {
			p.Close()
			proxiesMu.Lock()
			delete(proxies, ts)
			proxiesMu.Unlock()
		})
		ts.Setenv(st.URLEnv(), testserver.WithHost(st.URL, p.Addr()))
	case "direct":
		ts.Setenv(st.URLEnv(), st.URL)
	case "cut":
		p.SetMode(faultproxy.Cut)
	case "blackhole":
		p.SetMode(faultproxy.Blackhole)
	case "pass":
		p.SetMode(faultproxy.Pass)
		p.SetLatency(0)
	case "latency":
		if len(args) != 2 {
			ts.Fatalf("usage: proxy latency D")
		}
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		p.SetLatency(d)
	default:
		ts.Fatalf("proxy %s: unknown action", args[0])
	}
	ts.Logf("proxy %s", strings.Join(args, " "))
}

// timeoutFlag reads an optional leading "-t duration" (default def).
func timeoutFlag(ts *testscript.TestScript, args []string, def time.Duration) (time.Duration, []string) {
	if len(args) >= 2 && args[0] == "-t" {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		return d, args[2:]
	}
	return def, args
}

// poll calls cond until it is true or d has passed; it reports which.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitfile [-t timeout] [-n count] file regexp: await count lines of file
// matching regexp (default 1, within 20s).
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! waitfile")
	}
	timeout, args := timeoutFlag(ts, args, 20*time.Second)
	count := 1
	if len(args) >= 2 && args[0] == "-n" {
		n, err := strconv.Atoi(args[1])
		ts.Check(err)
		count, args = n, args[2:]
	}
	if len(args) != 2 {
		ts.Fatalf("usage: waitfile [-t timeout] [-n count] file regexp")
	}
	re := regexp.MustCompile(args[1])
	path := ts.MkAbs(args[0])
	start := time.Now()
	var data []byte
	ok := poll(timeout, func() bool {
		data, _ = os.ReadFile(path)
		n := 0
		for line := range strings.Lines(string(data)) {
			if re.MatchString(strings.TrimSuffix(line, "\n")) {
				n++
			}
		}
		return n >= count
	})
	if !ok {
		ts.Fatalf("%s: %d line(s) matching %q did not appear within %v; it holds:\n%s%s", args[0], count, args[1], timeout, data, daemonLogs(ts))
	}
	ts.Logf("%s: %d line(s) matching %q after %v", args[0], count, args[1], time.Since(start).Round(time.Millisecond))
}

// waitfiles [-t timeout] files glob n: await files files matching glob,
// each with at least n lines (within 60s by default).
func cmdWaitFiles(ts *testscript.TestScript, neg bool, args []string) {
	timeout, args := timeoutFlag(ts, args, 60*time.Second)
	if neg || len(args) != 3 {
		ts.Fatalf("usage: waitfiles [-t timeout] files glob n")
	}
	files, err := strconv.Atoi(args[0])
	ts.Check(err)
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	start := time.Now()
	short := ""
	ok := poll(timeout, func() bool {
		paths, _ := filepath.Glob(ts.MkAbs(args[1]))
		if len(paths) < files {
			short = fmt.Sprintf("%d files of %d", len(paths), files)
			return false
		}
		for _, p := range paths {
			data, _ := os.ReadFile(p)
			if got := strings.Count(string(data), "\n"); got < n {
				short = fmt.Sprintf("%s has %d lines", filepath.Base(p), got)
				return false
			}
		}
		return true
	})
	if !ok {
		ts.Fatalf("%s: %d files of %d lines did not appear within %v: %s%s", args[1], files, n, timeout, short, daemonLogs(ts))
	}
	ts.Logf("%s: %d files of %d lines after %v", args[1], files, n, time.Since(start).Round(time.Millisecond))
}

// daemonLogs returns the last lines of the daemons' logs (i*.log) in the
// script's directory, the evidence a failed wait leaves.
func daemonLogs(ts *testscript.TestScript) string {
	paths, _ := filepath.Glob(ts.MkAbs("i*.log"))
	var b strings.Builder
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", filepath.Base(p), strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	return b.String()
}

// sleep D: let D pass, to hold a fault for that long (a scenario's
// parameter; conditions are awaited with waitfile and pidgone instead).
func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sleep D")
	}
	d, err := time.ParseDuration(args[0])
	ts.Check(err)
	time.Sleep(d)
}

// waitslot [-t timeout] file MS: await a line of file (slot_ms instance
// attempt) whose slot is at or after MS (within 30s by default).
func cmdWaitSlot(ts *testscript.TestScript, neg bool, args []string) {
	timeout, args := timeoutFlag(ts, args, 30*time.Second)
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitslot [-t timeout] file MS")
	}
	want, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	path := ts.MkAbs(args[0])
	ok := poll(timeout, func() bool {
		data, _ := os.ReadFile(path)
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) > 0 {
				if ms, err := strconv.ParseInt(f[0], 10, 64); err == nil && ms >= want {
					return true
				}
			}
		}
		return false
	})
	if !ok {
		ts.Fatalf("%s: no slot at or after %d within %v%s", args[0], want, timeout, daemonLogs(ts))
	}
}

// metrics LOG LINE...: fetch /metrics from the address the daemon logged
// in LOG, until it holds every LINE (within 20s).
func cmdMetrics(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: metrics log line...")
	}
	re := regexp.MustCompile(`"msg":"serving /metrics, /healthz and /readyz","addr":"([^"]+)"`)
	m := re.FindStringSubmatch(ts.ReadFile(args[0]))
	if m == nil {
		ts.Fatalf("%s does not say where the metrics are served", args[0])
	}
	var body string
	ok := poll(20*time.Second, func() bool {
		resp, err := http.Get("http://" + m[1] + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		body = string(data)
		for _, want := range args[1:] {
			if !strings.Contains(body, want+"\n") {
				return false
			}
		}
		return true
	})
	if !ok {
		var have []string
		for line := range strings.Lines(body) {
			if strings.HasPrefix(line, "anarchon_") && !strings.Contains(line, "_bucket") {
				have = append(have, strings.TrimSpace(line))
			}
		}
		ts.Fatalf("/metrics of %s never held %q; it has:\n%s", m[1], args[1:], strings.Join(have, "\n"))
	}
}

// now NAME: set $NAME to the current time in ms since the Unix epoch.
func cmdNow(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: now NAME")
	}
	ts.Setenv(args[0], strconv.FormatInt(time.Now().UnixMilli(), 10))
}

// sleepuntil MS OFFSET: let time pass until MS (ms since the Unix epoch)
// plus OFFSET (a duration, e.g. -250ms); at once if that has passed. It
// logs how far from the instant it returned.
func cmdSleepUntil(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sleepuntil MS OFFSET")
	}
	ms, err := strconv.ParseInt(args[0], 10, 64)
	ts.Check(err)
	off, err := time.ParseDuration(args[1])
	ts.Check(err)
	at := time.UnixMilli(ms).Add(off)
	time.Sleep(time.Until(at))
	ts.Logf("sleepuntil: %v past %s", time.Since(at).Round(time.Millisecond), at.UTC().Format(time.RFC3339Nano))
}

// linecount min max file regexp: file (stdout and stderr name the last
// command's) has between min and max lines matching regexp.
func cmdLineCount(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: linecount min max file regexp")
	}
	lo, err := strconv.Atoi(args[0])
	ts.Check(err)
	hi, err := strconv.Atoi(args[1])
	ts.Check(err)
	re := regexp.MustCompile(args[3])
	n := 0
	for line := range strings.Lines(ts.ReadFile(args[2])) {
		if re.MatchString(line) {
			n++
		}
	}
	if n < lo || n > hi {
		ts.Fatalf("%s: %d lines match %q, want %d to %d", args[2], n, args[3], lo, hi)
	}
	ts.Logf("%s: %d lines match %q", args[2], n, args[3])
}

// slotEvidence returns the daemons' log lines (i*.log) about one slot.
func slotEvidence(ts *testscript.TestScript, ms int64) string {
	stamp := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	paths, _ := filepath.Glob(ts.MkAbs("i*.log"))
	var b strings.Builder
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, `"slot":"`+stamp+`"`) || strings.Contains(line, strconv.FormatInt(ms, 10)) {
				fmt.Fprintf(&b, "%s: %s", filepath.Base(p), line)
			}
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nthe daemons' logs about it:\n" + b.String()
}

// slotLines parses "slot_ms instance attempt" lines.
func slotLines(ts *testscript.TestScript, file string) map[int64][]string {
	slots := map[int64][]string{}
	for line := range strings.Lines(ts.ReadFile(file)) {
		f := strings.Fields(line)
		if len(f) != 3 && len(f) != 4 { // slot_ms instance attempt [start_ms]
			ts.Fatalf("%s: malformed line %q", file, line)
		}
		ms, err := strconv.ParseInt(f[0], 10, 64)
		ts.Check(err)
		slots[ms] = append(slots[ms], strings.TrimSpace(line))
	}
	return slots
}

// exactlyonce [-from MS] [-settle N] file min: every slot of file appears
// once, at least min of them, and the slots are consecutive seconds. Gaps
// are allowed before -from (slots due before the daemons started, claimed
// as catch-up within maxLate, may be abandoned when an outage makes them
// late) and within the last N seconds (claims still in flight when the
// daemons were stopped: a stop sends no new claims, and under latency
// later slots may be answered first).
//
// With -files N, file is a glob that must match N files (one per job),
// each checked on its own.
func cmdExactlyOnce(ts *testscript.TestScript, neg bool, args []string) {
	var from, settle, files int64
	for len(args) > 2 && strings.HasPrefix(args[0], "-") {
		n, err := strconv.ParseInt(args[1], 10, 64)
		ts.Check(err)
		switch args[0] {
		case "-from":
			from = n
		case "-settle":
			settle = n * 1000
		case "-files":
			files = n
		default:
			ts.Fatalf("exactlyonce: unknown flag %s", args[0])
		}
		args = args[2:]
	}
	if neg || len(args) != 2 {
		ts.Fatalf("usage: exactlyonce [-from MS] [-settle N] [-files N] file min")
	}
	min, err := strconv.Atoi(args[1])
	ts.Check(err)
	if files > 0 {
		paths, err := filepath.Glob(ts.MkAbs(args[0]))
		ts.Check(err)
		if int64(len(paths)) != files {
			ts.Fatalf("%s matches %d files, want %d", args[0], len(paths), files)
		}
		for _, p := range paths {
			exactlyOnce(ts, p, min, from, settle)
		}
		return
	}
	exactlyOnce(ts, args[0], min, from, settle)
}

// exactlyOnce checks one file of "slot_ms instance attempt" lines.
func exactlyOnce(ts *testscript.TestScript, file string, min int, from, settle int64) {
	name := filepath.Base(file)
	slots := slotLines(ts, file)
	keys := slices.Sorted(func(yield func(int64) bool) {
		for k := range slots {
			if !yield(k) {
				return
			}
		}
	})
	instances := map[string]int{}
	for i, k := range keys {
		if len(slots[k]) != 1 {
			ts.Fatalf("%s: slot %d ran %d times: %q%s", name, k, len(slots[k]), slots[k], slotEvidence(ts, k))
		}
		if i > 0 && k-keys[i-1] != 1000 && k > from && k < keys[len(keys)-1]-settle {
			ts.Fatalf("%s: slots %d and %d are not consecutive seconds: a slot was skipped%s", name, keys[i-1], k, slotEvidence(ts, keys[i-1]+1000))
		}
		instances[strings.Fields(slots[k][0])[1]]++
	}
	if len(keys) < min {
		ts.Fatalf("%s: %d slots ran, want at least %d", name, len(keys), min)
	}
	ts.Logf("%s: %d slots, each exactly once, by instances %v", name, len(keys), instances)
}

// statusok file: every slot of file appears in the last command's stdout
// (status --json) as succeeded, run by the instance that wrote it, and
// started no earlier than its slot (claims leave before the slot; the
// job may not). A line's fourth field, when present, is the job's own
// start in Unix ms, which must not be before its slot either.
func cmdStatusOK(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: statusok file")
	}
	type rec struct {
		SlotMs    int64     `json:"slot_ms"`
		Status    string    `json:"status"`
		Instance  string    `json:"instance"`
		Attempt   int       `json:"attempt"`
		ExitCode  *int      `json:"exit_code"`
		StartedAt time.Time `json:"started_at"`
	}
	got := map[int64]rec{}
	sc := bufio.NewScanner(strings.NewReader(ts.ReadFile("stdout")))
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			ts.Fatalf("status --json line %q: %v", sc.Text(), err)
		}
		got[r.SlotMs] = r
	}
	for ms, lines := range slotLines(ts, args[0]) {
		f := strings.Fields(lines[0])
		r, ok := got[ms]
		switch {
		case !ok:
			ts.Fatalf("slot %d ran (%q) but status does not list it", ms, lines[0])
		case r.Status != "succeeded" || r.ExitCode == nil || *r.ExitCode != 0:
			ts.Fatalf("slot %d: status %q exit %v, want succeeded 0", ms, r.Status, r.ExitCode)
		case r.Instance != f[1] || strconv.Itoa(r.Attempt) != f[2]:
			ts.Fatalf("slot %d: status says %s attempt %d, the job says %s attempt %s", ms, r.Instance, r.Attempt, f[1], f[2])
		case r.StartedAt.UnixMilli() < ms:
			ts.Fatalf("slot %d: status says it started at %s, before its slot", ms, r.StartedAt.Format(time.RFC3339Nano))
		}
		if len(f) > 3 {
			began, err := strconv.ParseInt(f[3], 10, 64)
			ts.Check(err)
			if began < ms {
				ts.Fatalf("slot %d: the job started at %d, %d ms before its slot", ms, began, ms-began)
			}
		}
	}
}

// shares -from MS -to MS [-skip N] [-settle N] [-spread MS [-decided P]]
// jobs min% max%: the last command's stdout (status --json) lists, for
// every one of jobs jobs and every whole-second slot in [from + skip
// seconds, to - settle seconds), exactly one run, succeeded at attempt 1;
// and each instance won between min% and max% of those runs. With -spread
// (the jobs' claimSpreadMs) it also logs how often the instance with the
// shortest spread delay won, and -decided requires that to be at least P%.
func cmdShares(ts *testscript.TestScript, neg bool, args []string) {
	var from, to, skip, settle, spread, decided int64
	for len(args) > 2 && strings.HasPrefix(args[0], "-") {
		n, err := strconv.ParseInt(args[1], 10, 64)
		ts.Check(err)
		switch args[0] {
		case "-from":
			from = n
		case "-to":
			to = n
		case "-skip":
			skip = n * 1000
		case "-settle":
			settle = n * 1000
		case "-spread":
			spread = n
		case "-decided":
			decided = n
		default:
			ts.Fatalf("shares: unknown flag %s", args[0])
		}
		args = args[2:]
	}
	if neg || len(args) != 3 || from == 0 || to-settle <= from+skip {
		ts.Fatalf("usage: shares -from MS -to MS [-skip N] [-settle N] [-spread MS [-decided P]] jobs min%% max%%")
	}
	from, to = from+skip, to-settle
	jobs, err := strconv.Atoi(args[0])
	ts.Check(err)
	lo, err := strconv.ParseFloat(args[1], 64)
	ts.Check(err)
	hi, err := strconv.ParseFloat(args[2], 64)
	ts.Check(err)
	type rec struct {
		Job      string `json:"job"`
		SlotMs   int64  `json:"slot_ms"`
		Status   string `json:"status"`
		Instance string `json:"instance"`
		Attempt  int    `json:"attempt"`
	}
	type run struct {
		job  string
		slot int64
	}
	seen := map[run]rec{}
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(ts.ReadFile("stdout")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			ts.Fatalf("status --json line %q: %v", sc.Text(), err)
		}
		names[r.Job] = true
		if r.SlotMs < from || r.SlotMs >= to {
			continue
		}
		k := run{r.Job, r.SlotMs}
		if prev, dup := seen[k]; dup {
			ts.Fatalf("%s slot %d listed twice: by %s and %s", r.Job, r.SlotMs, prev.Instance, r.Instance)
		}
		seen[k] = r
	}
	ts.Check(sc.Err())
	if len(names) != jobs {
		ts.Fatalf("status lists runs of %d jobs, want %d", len(names), jobs)
	}
	first := (from + 999) / 1000 * 1000
	won, byShortest := map[string]int{}, map[string]int{}
	total, byDelay := 0, 0
	var instances []string // the instances that won any run, for -spread
	for _, r := range seen {
		if !slices.Contains(instances, r.Instance) {
			instances = append(instances, r.Instance)
		}
	}
	for name := range names {
		for ms := first; ms < to; ms += 1000 {
			r, ok := seen[run{name, ms}]
			switch {
			case !ok:
				var ev []string
				for line := range strings.Lines(slotEvidence(ts, ms)) {
					if strings.Contains(line, `"job":"`+name+`"`) {
						ev = append(ev, line)
					}
				}
				ts.Fatalf("%s slot %d did not run (no run in status); the daemons' logs about it:\n%s", name, ms, strings.Join(ev, ""))
			case r.Status != "succeeded" || r.Attempt != 1:
				ts.Fatalf("%s slot %d: status %s attempt %d by %s, want succeeded at attempt 1", name, ms, r.Status, r.Attempt, r.Instance)
			}
			won[r.Instance]++
			total++
			if spread > 0 {
				d := time.Millisecond * time.Duration(spread)
				shortest := slices.MinFunc(instances, func(a, b string) int {
					return cmp.Compare(scheduler.SpreadDelay(a, name, ms, d), scheduler.SpreadDelay(b, name, ms, d))
				})
				byShortest[shortest]++
				if shortest == r.Instance {
					byDelay++
				}
			}
		}
	}
	if total == 0 {
		ts.Fatalf("no slot in [%d, %d)", from, to)
	}
	slices.Sort(instances)
	percents := func(n map[string]int) string {
		var out []string
		for _, in := range instances {
			out = append(out, fmt.Sprintf("%s %d (%.1f%%)", in, n[in], 100*float64(n[in])/float64(total)))
		}
		return strings.Join(out, ", ")
	}
	shares := percents(won)
	ts.Logf("%d runs of %d jobs, each exactly once; won: %s", total, jobs, shares)
	if spread > 0 {
		pct := 100 * float64(byDelay) / float64(total)
		ts.Logf("the instance with the shortest spread delay won %d of %d runs (%.1f%%); the delays alone would give: %s", byDelay, total, pct, percents(byShortest))
	}
	for in, n := range won {
		if share := 100 * float64(n) / float64(total); share < lo || share > hi {
			ts.Fatalf("%s won %.1f%% of the runs, want %g%% to %g%%: %s", in, share, lo, hi, shares)
		}
	}
	if lo > 0 && float64(len(won))*hi < 100 {
		ts.Fatalf("only %d instances won runs: %s", len(won), shares)
	}
	if pct := 100 * float64(byDelay) / float64(total); pct < float64(decided) {
		ts.Fatalf("the instance with the shortest spread delay won %.1f%% of the runs, want at least %d%%", pct, decided)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// pidgone [-t timeout] file: the pid written in file (its last line's last
// field) is gone within the timeout (default 5s).
func cmdPidGone(ts *testscript.TestScript, neg bool, args []string) {
	timeout, args := timeoutFlag(ts, args, 5*time.Second)
	if neg || len(args) != 1 {
		ts.Fatalf("usage: pidgone [-t timeout] file")
	}
	f := strings.Fields(ts.ReadFile(args[0]))
	if len(f) == 0 {
		ts.Fatalf("%s is empty", args[0])
	}
	pid, err := strconv.Atoi(f[len(f)-1])
	ts.Check(err)
	if !poll(timeout, func() bool { return !alive(pid) }) {
		ts.Fatalf("process %d is still running after %v", pid, timeout)
	}
}

// ppid returns the parent of pid.
func ppid(ts *testscript.TestScript, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	ts.Check(err)
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	p, err := strconv.Atoi(f[1])
	ts.Check(err)
	return p
}

// comm returns the command name of pid.
func comm(ts *testscript.TestScript, pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	ts.Check(err)
	return strings.TrimSpace(string(data))
}

// runner-signal SIG file: send SIG (KILL, STOP, CONT, TERM) to the daemon
// running the job whose shell wrote its pid as the last field of file's
// first line: the shell's nearest ancestor named anarchond (its parent, or
// its supervisor's parent when the daemon runs without a guard).
func cmdRunnerSignal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 || signals[args[0]] == 0 {
		ts.Fatalf("usage: runner-signal KILL|STOP|CONT|TERM file")
	}
	first, _, _ := strings.Cut(ts.ReadFile(args[1]), "\n")
	f := strings.Fields(first)
	pid, err := strconv.Atoi(f[len(f)-1])
	ts.Check(err)
	daemon := ppid(ts, pid)
	for comm(ts, daemon) != "anarchond" {
		if daemon <= 1 {
			ts.Fatalf("job shell %d: no anarchond among its ancestors", pid)
		}
		daemon = ppid(ts, daemon)
	}
	ts.Logf("signal %s to daemon %d (job shell %d)", args[0], daemon, pid)
	ts.Check(syscall.Kill(daemon, signals[args[0]]))
}

// signals are the signals runner-signal and signal send, by name.
var signals = map[string]syscall.Signal{"KILL": syscall.SIGKILL, "STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT, "TERM": syscall.SIGTERM}

// signal SIG file: send SIG (KILL, STOP, CONT, TERM) to the process whose
// pid is file's last field (a daemon started as
// sh -c 'echo $$ > i1.pid; exec anarchond ...').
func cmdSignal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 || signals[args[0]] == 0 {
		ts.Fatalf("usage: signal KILL|STOP|CONT|TERM file")
	}
	f := strings.Fields(ts.ReadFile(args[1]))
	if len(f) == 0 {
		ts.Fatalf("%s is empty", args[1])
	}
	pid, err := strconv.Atoi(f[len(f)-1])
	ts.Check(err)
	ts.Check(syscall.Kill(pid, signals[args[0]]))
}

var placeholder = regexp.MustCompile(`@[A-Z0-9_]+@`)

// subst in out: copy in to out, replacing each @NAME@ with the script's
// $NAME (the $VARS of a job's command are left alone).
func cmdSubst(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: subst in out")
	}
	out := placeholder.ReplaceAllStringFunc(ts.ReadFile(args[0]), func(m string) string {
		return ts.Getenv(strings.Trim(m, "@"))
	})
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(out), 0o644))
}

// chmod mode file: set file's mode (octal).
func cmdChmod(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: chmod mode file")
	}
	mode, err := strconv.ParseUint(args[0], 8, 32)
	ts.Check(err)
	ts.Check(os.Chmod(ts.MkAbs(args[1]), os.FileMode(mode)))
}
