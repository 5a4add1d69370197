package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/anarchon/anarchon/internal/faultproxy"
)

// instState is what the harness did to an instance's daemon process.
type instState int

const (
	instUp      instState = iota // running
	instKilled                   // SIGKILLed (or exited), waiting for its restart
	instStopped                  // SIGSTOPped, waiting for its SIGCONT
)

// instance is one anarchond daemon, "chaos-<i>", with its crontab, log,
// clock skew file and, for network stores, its own fault proxy.
type instance struct {
	idx                         int
	name                        string
	bin                         string   // anarchond
	env                         []string // the daemon's environment
	cfgPath, logPath, clockPath string
	journal                     *journalTail
	proxy                       *faultproxy.Proxy // nil: no network store
	netFault                    string            // "", "cut", "blackhole", "latency": the proxy's fault
	state                       instState
	skewMs                      int64
	proc                        *process
	exits                       chan<- int // where an unexpected exit is reported
}

// process is one start of a daemon.
type process struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed when it has exited
	expected atomic.Bool   // the harness killed or stopped it on purpose
	logStart int64         // the size of the log when it started
}

// healthy reports whether the instance can claim and run jobs: running,
// not paused, its store connection not cut or blackholed.
func (in *instance) healthy() bool {
	return in.state == instUp && in.netFault != "cut" && in.netFault != "blackhole"
}

// start starts the daemon, its stdout and stderr appended to its log. It
// does not wait for it to be ready (see waitReady).
func (in *instance) start() error {
	logf, err := os.OpenFile(in.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%s: log: %w", in.name, err)
	}
	defer logf.Close()
	fi, err := logf.Stat()
	if err != nil {
		return fmt.Errorf("%s: log: %w", in.name, err)
	}
	cmd := exec.Command(in.bin, "run", "--config", in.cfgPath)
	cmd.Env = in.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C of the harness reaches the harness
	// only, which then stops the daemons itself; a harness that dies takes
	// its daemons with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start: %w", in.name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), logStart: fi.Size()}
	in.proc, in.state = p, instUp
	go func() {
		_ = cmd.Wait() // its exit is judged by p.expected, its status read from cmd.ProcessState
		close(p.done)
		if !p.expected.Load() {
			select {
			case in.exits <- in.idx:
			default: // the run is over; nobody listens
			}
		}
	}()
	return nil
}

// waitReady waits until the daemon started last logs that it is
// scheduling ("anarchond started"), or fails when it exits first.
func (in *instance) waitReady(ctx context.Context, d time.Duration) error {
	p := in.proc
	return await(ctx, d, func(context.Context) error {
		select {
		case <-p.done:
			return permanent{fmt.Errorf("%s exited at start: %v; its log %s ends:\n%s", in.name, p.cmd.ProcessState, in.logPath, tail(in.logPath, 10))}
		default:
		}
		f, err := os.Open(in.logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(io.NewSectionReader(f, p.logStart, 1<<30))
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(`"anarchond started"`)) {
			return fmt.Errorf("%s is not scheduling yet (see %s)", in.name, in.logPath)
		}
		return nil
	})
}

// kill SIGKILLs the daemon and waits until it is gone. Its job guard
// takes its jobs' process groups down with it (docs/spec.md#s4-processes).
func (in *instance) kill() error {
	p := in.proc
	p.expected.Store(true)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: SIGKILL: %w", in.name, err)
	}
	<-p.done
	in.state = instKilled
	in.journal.forget()
	return nil
}

// pause SIGSTOPs the daemon process (not its jobs).
func (in *instance) pause() error {
	if err := in.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("%s: SIGSTOP: %w", in.name, err)
	}
	in.state = instStopped
	return nil
}

// resume SIGCONTs the daemon process.
func (in *instance) resume() error {
	if err := in.proc.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("%s: SIGCONT: %w", in.name, err)
	}
	in.state = instUp
	return nil
}

// terminate sends SIGTERM and waits for the daemon to exit: it lets
// running jobs finish for up to shutdownGraceMs and releases their leases.
// After grace it SIGKILLs the daemon and says so.
func (in *instance) terminate(grace time.Duration) error {
	p := in.proc
	if in.state == instKilled {
		return nil
	}
	p.expected.Store(true)
	select {
	case <-p.done:
		in.state = instKilled
		return fmt.Errorf("%s exited on its own before the stop: %v (see %s)", in.name, p.cmd.ProcessState, in.logPath)
	default:
	}
	if in.state == instStopped {
		_ = in.resume() // if it stays stopped, the SIGKILL after grace ends it
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("%s: SIGTERM: %w", in.name, err)
	}
	select {
	case <-p.done:
		in.state = instKilled
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("%s exited with status %d after SIGTERM (see %s)", in.name, code, in.logPath)
		}
		return nil
	case <-time.After(grace):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		in.state = instKilled
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed (see %s)", in.name, grace, in.logPath)
	}
}

// setSkew sets the offset of the daemon's clock (a testclock build reads
// the file every 100 ms), written atomically.
func (in *instance) setSkew(ms int64) error {
	tmp := in.clockPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(ms, 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("%s: clock file: %w", in.name, err)
	}
	if err := os.Rename(tmp, in.clockPath); err != nil {
		return fmt.Errorf("%s: clock file: %w", in.name, err)
	}
	in.skewMs = ms
	return nil
}

// setNet puts the instance's proxy into a fault ("" heals it).
func (in *instance) setNet(fault string, latency time.Duration) {
	switch fault {
	case "cut":
		in.proxy.SetMode(faultproxy.Cut)
	case "blackhole":
		in.proxy.SetMode(faultproxy.Blackhole)
	case "latency":
		in.proxy.SetLatency(latency)
	default:
		in.proxy.SetMode(faultproxy.Pass)
		in.proxy.SetLatency(0)
	}
	in.netFault = fault
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// journalTail follows an instance's journal to know which of its runs are
// in progress, so that some kills hit a running job.
type journalTail struct {
	path   string
	offset int64
	open   map[string]int64 // "job slot attempt" -> start (unix ms)
}

func newJournalTail(path string) *journalTail {
	return &journalTail{path: path, open: map[string]int64{}}
}

// running returns how many runs of the instance are in progress now.
func (j *journalTail) running(now time.Time) int {
	j.read()
	n := 0
	for k, start := range j.open {
		// A run whose end record never came was killed with its daemon.
		if now.UnixMilli()-start > 10_000 {
			delete(j.open, k)
			continue
		}
		n++
	}
	return n
}

// forget drops the runs in progress: their daemon was killed.
func (j *journalTail) forget() {
	j.read()
	clear(j.open)
}

func (j *journalTail) read() {
	f, err := os.Open(j.path)
	if err != nil {
		return // no job has run yet
	}
	defer f.Close()
	if _, err := f.Seek(j.offset, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // a partial line is read again next time
		}
		j.offset += int64(len(line))
		fields := strings.Fields(line)
		if len(fields) != 9 {
			continue
		}
		key := strings.Join(fields[:3], " ")
		if fields[8] == "-" {
			start, _ := strconv.ParseInt(fields[5], 10, 64)
			j.open[key] = start
		} else {
			delete(j.open, key)
		}
	}
}

// newInstance prepares instance i of a run in dir.
func newInstance(i int, dir, bin string, env []string, exits chan<- int) *instance {
	return &instance{
		idx:       i,
		name:      instanceName(i),
		bin:       bin,
		cfgPath:   filepath.Join(dir, fmt.Sprintf("crontab-%d.yaml", i)),
		logPath:   filepath.Join(dir, fmt.Sprintf("daemon-%d.log", i)),
		clockPath: filepath.Join(dir, fmt.Sprintf("clock-%d", i)),
		journal:   newJournalTail(filepath.Join(dir, fmt.Sprintf("journal-%d.log", i))),
		env:       append(slices.Clip(env), "ANARCHON_TESTCLOCK_FILE="+filepath.Join(dir, fmt.Sprintf("clock-%d", i))),
		state:     instKilled,
		exits:     exits,
	}
}
