// Command chaos is anarchon's fault-injection harness. It runs several
// anarchond instances (built with the anarchon_testclock tag) on one
// backend with a crontab of short, long and failing jobs, and injects
// faults on a seeded random schedule: SIGKILL and restart, SIGSTOP and
// SIGCONT, store connections cut, blackholed or delayed (a fault proxy per
// instance), store restarts (private Redis and NATS servers; PostgreSQL on
// request), clock skews and jumps, CPU starvation of the daemons (busy
// loops) while a burst of runs falls due. Then it lets the run drain, stops the
// daemons, collects the store's view (`anarchond status --json`) and hands
// the run directory to the checker (test/chaos/check), which reports every
// violation of anarchon's guarantees with its evidence.
//
//	go run ./test/chaos -backend sqlite -duration 60s -instances 3 [-seed N] [-out DIR] [-jobs N] [-burst N]
//	go run ./test/chaos -all [-backends sqlite,postgres,...] -duration 60s
//	go run ./test/chaos -check DIR   # the checker again, on an earlier run
//
// The run directory (default chaos-out/<backend>-<UTC time>/) holds what
// test/chaos/check/types.go describes, plus the binaries, the crontabs and
// the private servers' data. The jobs are this program itself, run as
// `chaos-job job <sleepMs> <exit> <journal> <fenceDir>` (see job.go).
//
// Exit status: 0 no violation, 1 violations, 2 a failure of the harness or
// its environment (a store that does not answer, a build that fails).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	backend      string
	all          bool
	backends     string
	duration     time.Duration
	instances    int
	jobs         int
	burst        int
	seed         int64
	out          string
	keep         bool
	private      bool
	storeRestart *bool
	recheck      string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == jobArg {
		os.Exit(jobMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == spinArg {
		os.Exit(spinMain(os.Args[2:]))
	}
	os.Exit(run())
}

func parseFlags() (options, error) {
	var o options
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.StringVar(&o.backend, "backend", "sqlite", "the backend: "+strings.Join(backendNames, ", "))
	fs.BoolVar(&o.all, "all", false, "run every backend of -backends, one after the other")
	fs.StringVar(&o.backends, "backends", strings.Join(backendNames, ","), "with -all: the backends, comma-separated")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long faults are injected (per backend)")
	fs.IntVar(&o.instances, "instances", 3, "anarchond instances")
	fs.IntVar(&o.jobs, "jobs", 12, "jobs in the crontab")
	fs.IntVar(&o.burst, "burst", 6, "jobs beside -jobs that share one schedule (every 10 s): the bursts the overload fault starves")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the fault schedule (default: from the time, printed)")
	fs.StringVar(&o.out, "out", "", "run directory (default chaos-out/<backend>-<UTC time>; with -all, the parent of one directory per backend)")
	fs.BoolVar(&o.keep, "keep", false, "leave the run's namespace in the store")
	fs.BoolVar(&o.private, "private-servers", true, "run a private Redis / NATS server for redis-* and nats (needed to restart the store)")
	fs.StringVar(&o.recheck, "check", "", "only check the run directory `DIR` of an earlier run again")
	restart := fs.Bool("store-restart", false, "restart the store during the run (default: on for private servers, off for postgres; never rabbitmq or sqlite)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return o, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "store-restart" {
			o.storeRestart = restart
		}
	})
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.instances < 1:
		return o, fmt.Errorf("-instances %d: want at least 1", o.instances)
	case o.jobs < 1:
		return o, fmt.Errorf("-jobs %d: want at least 1", o.jobs)
	case o.burst < 0:
		return o, fmt.Errorf("-burst %d: want 0 or more", o.burst)
	case o.duration <= 0:
		return o, fmt.Errorf("-duration %v: want a positive duration", o.duration)
	}
	for _, b := range o.backendList() {
		if !slices.Contains(backendNames, b) {
			return o, fmt.Errorf("unknown backend %q: want one of %s", b, strings.Join(backendNames, ", "))
		}
	}
	return o, nil
}

// backendList is the backends to run.
func (o options) backendList() []string {
	if !o.all {
		return []string{o.backend}
	}
	var out []string
	for _, b := range strings.Split(o.backends, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// run is the harness; it returns the exit status.
func run() int {
	o, err := parseFlags()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	if o.recheck != "" {
		return recheck(o.recheck)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root := o.root()
	bins, err := buildBinaries(ctx, o.binDir(root))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	rows, status := o.runBackends(ctx, root, bins)
	fmt.Println()
	printTable(os.Stdout, rows)
	return status
}

// root is the run directory: -out, or chaos-out/<backend>-<UTC time>
// (all-<UTC time> with -all).
func (o options) root() string {
	stamp := time.Now().UTC().Format("20060102T150405Z")
	root := o.out
	if root == "" {
		name := o.backend + "-" + stamp
		if o.all {
			name = "all-" + stamp
		}
		root = filepath.Join("chaos-out", name)
	}
	return root
}

// binDir is where the binaries go: the run directory, or with -all its
// bin directory, shared by every backend.
func (o options) binDir(root string) string {
	if o.all {
		return filepath.Join(root, "bin")
	}
	return root
}

// runBackends runs every backend of the list, one after the other, and
// returns a table row for each and the exit status. A harness error ends
// the backend's run but not the next one's, unless the harness is being
// stopped.
func (o options) runBackends(ctx context.Context, root string, bins binaries) ([]tableRow, int) {
	var rows []tableRow
	status := 0
	for _, b := range o.backendList() {
		dir := root
		if o.all {
			dir = filepath.Join(root, b)
		}
		seed := o.seed
		if seed == 0 {
			seed = time.Now().UnixNano()
		}
		res, err := runBackend(ctx, runConfig{
			backend: b, dir: dir, bins: bins, duration: o.duration, instances: o.instances,
			jobs: o.jobs, burst: o.burst, seed: seed, keep: o.keep, private: o.private, storeRestart: o.storeRestart,
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos %s: harness error: %v\n", b, err)
			rows = append(rows, tableRow{backend: b, failed: err.Error()})
			status = max(status, 2)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		rows = append(rows, res.row)
		if !res.ok {
			status = max(status, 1)
		}
	}
	return rows, status
}

// recheck runs the checker again on the run directory of an earlier run.
func recheck(dir string) int {
	row, ok, err := runChecker(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: checker:", err)
		return 2
	}
	printTable(os.Stdout, []tableRow{row})
	if !ok {
		return 1
	}
	return 0
}

// binaries are the programs of a run.
type binaries struct {
	anarchond string // built with the anarchon_testclock tag
	job       string // this program, run as a job
}

// buildBinaries builds anarchond with the test clock, and anarchon-supervise,
// into dir and copies this program there as chaos-job (a `go run` binary
// lives in a temporary directory that goes away with it).
func buildBinaries(ctx context.Context, dir string) (binaries, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return binaries{}, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return binaries{}, err
	}
	b := binaries{anarchond: filepath.Join(abs, "anarchond"), job: filepath.Join(abs, "chaos-job")}
	fmt.Fprintf(os.Stderr, "chaos: building %s\n", b.anarchond)
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "anarchon_testclock", "-o", b.anarchond,
		"github.com/anarchon/anarchon/cmd/anarchond")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return b, fmt.Errorf("build anarchond: %w", err)
	}
	// anarchon-supervise beside anarchond, as installed: the instances start
	// their jobs under it. It reads no clock, so it needs no tag.
	cmd = exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(abs, "anarchon-supervise"),
		"github.com/anarchon/anarchon/cmd/anarchon-supervise")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return b, fmt.Errorf("build anarchon-supervise: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return b, fmt.Errorf("find this program: %w", err)
	}
	if err := copyFile(self, b.job, 0o755); err != nil {
		return b, fmt.Errorf("copy this program to %s: %w", b.job, err)
	}
	return b, nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
