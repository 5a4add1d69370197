package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/supervise"
)

// process is the leader of the job's process group: the job's supervisor,
// or the job itself when a Guard watches the group.
type process struct {
	cmd    *exec.Cmd // nil: the job's program could not be started
	pid    int       // also the process group id
	out    *output
	exited chan struct{} // closed once the leader has exited (not yet reaped)
	guard  *Guard        // the group's guard, or nil
	// records holds the group's record in slot recSlot, or is nil.
	records *Records
	recSlot int64
	code    int // the exit code when cmd is nil
	// late: the exec completed after the attempt's lease had ended; the
	// group was SIGKILLed at once (startGate).
	late bool

	mu     sync.Mutex
	reaped bool // the group id may be reused: no more group signals
}

// start starts l, its output piped to the log: directly, as the leader of
// a new process group that r.Guard watches, or under its supervisor when
// there is no guard. The fork is gated by g: it returns an error wrapping
// ErrLeaseLost, with nothing started, when too little of the lease is left
// just before the fork.
func (r *Runner) start(l launch, tailBytes int, log *zap.Logger, g startGate) (*process, error) {
	if err := platformCheck(); err != nil {
		return nil, err
	}
	cmd, err := r.command(l)
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("creating the stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if r.Guard != nil {
		err = lookPath(cmd, l.env)
	}
	late := false
	if err == nil {
		late, err = g.fork(cmd)
	}
	if errors.Is(err, ErrLeaseLost) {
		for _, f := range []*os.File{outR, outW, errR, errW} {
			f.Close()
		}
		return nil, err
	}
	if err != nil && r.Guard != nil {
		// As the supervisor does: the job's program could not be
		// started; its exit code says why and the error is its output.
		fmt.Fprintf(errW, "anarchond: %v\n", err)
		outW.Close()
		errW.Close()
		p := &process{out: newOutput(log, outR, errR, tailBytes), exited: make(chan struct{}), reaped: true,
			code: supervise.StartFailureCode(err)}
		close(p.exited)
		return p, nil
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("starting the supervisor: %w", err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{}), guard: r.Guard, late: late}
	r.track(p, l.rec, log)
	p.out = newOutput(log, outR, errR, tailBytes)
	go p.wait(log)
	return p, nil
}

// command is the command that starts l: the job itself when r.Guard
// watches its group, else its supervisor, given l's spec.
func (r *Runner) command(l launch) (*exec.Cmd, error) {
	if r.Guard != nil {
		return &exec.Cmd{Path: l.argv[0], Args: l.argv, Env: l.env, Dir: l.spec.Dir, SysProcAttr: jobAttr(l.spec)}, nil
	}
	spec, err := json.Marshal(l.spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the supervisor's spec: %w", err)
	}
	cmd := exec.Command(r.Supervisor[0], append(slices.Clone(r.Supervisor[1:]), l.argv...)...)
	cmd.Env = append(slices.Clone(l.env), supervise.Env+"="+string(spec))
	cmd.SysProcAttr = supervisorAttr()
	return cmd, nil
}

// track tells the guard of p's group, just forked, and records the group
// (Records) as the attempt rec.
func (r *Runner) track(p *process, rec attemptRecord, log *zap.Logger) {
	if p.guard != nil {
		p.guard.add(p.pid)
	}
	if r.Records == nil {
		return
	}
	var err error
	if p.recSlot, err = r.Records.add(p.pid, rec); err != nil {
		log.Error("no record of the job's process group: if the daemon and its job guard die together, its processes outlive it", zap.Error(err))
		return
	}
	p.records = r.Records
}

// wait closes p.exited once the group's leader has exited, leaving it
// unreaped (finish reaps it).
func (p *process) wait(log *zap.Logger) {
	if err := waitExited(p.pid); err != nil {
		log.Error("waiting for the job's process", zap.Error(err))
	}
	close(p.exited)
}

// lookPath sets cmd.Path to the program of cmd.Args[0], searched in the
// PATH of the job's environment env (not the daemon's) when it names no
// directory, as the job's shell would.
func lookPath(cmd *exec.Cmd, env []string) error {
	name := cmd.Args[0]
	if strings.Contains(name, "/") {
		cmd.Path = name
		return nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if !filepath.IsAbs(p) && cmd.Dir != "" {
			p = filepath.Join(cmd.Dir, p)
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			cmd.Path = p
			return nil
		}
	}
	return &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// signal sends sig to the job's whole process group, unless the group's
// leader is already reaped.
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		_ = signalGroup(p.pid, sig)
	}
}

// finish is called once the supervisor has exited: it kills what is left of
// the process group, reaps the supervisor, waits for the output to be read
// and returns the exit code.
func (p *process) finish(clk clock.Clock, log *zap.Logger) int {
	if p.cmd != nil {
		p.mu.Lock()
		// The leader is a zombie still, so its pid, the group's id, cannot
		// be reused yet: this kills only processes the job left behind.
		_ = signalGroup(p.pid, syscall.SIGKILL)
		p.reaped = true
		p.mu.Unlock()
		if p.guard != nil {
			p.guard.remove(p.pid)
		}
		if p.records != nil {
			p.records.remove(p.recSlot)
		}
		_ = p.cmd.Wait() // the exit status is in ProcessState
	}
	select {
	case <-p.out.done:
	default:
		t := clk.NewTimer(drainTimeout)
		select {
		case <-p.out.done:
		case <-t.C():
			log.Warn("job output still open after the command exited; a process that left the job's process group holds it; not waiting for it")
			p.out.close()
			<-p.out.done
		}
		t.Stop()
	}
	if p.cmd == nil {
		return p.code
	}
	return exitCodeOf(p.cmd.ProcessState)
}
