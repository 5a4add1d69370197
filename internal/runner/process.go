package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/supervise"
)

// process is a started supervisor, the leader of the job's process group.
type process struct {
	cmd    *exec.Cmd
	pid    int // also the process group id
	out    *output
	exited chan struct{} // closed once the supervisor has exited (not yet reaped)

	mu     sync.Mutex
	reaped bool // the group id may be reused: no more group signals
}

// start starts the supervisor running l, its output piped to the log.
func (r *Runner) start(l launch, tailBytes int, log *zap.Logger) (*process, error) {
	if err := platformCheck(); err != nil {
		return nil, err
	}
	spec, err := json.Marshal(l.spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the supervisor's spec: %w", err)
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
	cmd := exec.Command(r.Supervisor[0], append(slices.Clone(r.Supervisor[1:]), l.argv...)...)
	cmd.Env = append(slices.Clone(l.env), supervise.Env+"="+string(spec))
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = supervisorAttr()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("starting the supervisor: %w", err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	p.out = newOutput(log, outR, errR, tailBytes)
	go func() {
		if err := waitExited(p.pid); err != nil {
			log.Error("waiting for the supervisor", zap.Error(err))
		}
		close(p.exited)
	}()
	return p, nil
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
	p.mu.Lock()
	// The supervisor is a zombie still, so its pid, the group's id, cannot be
	// reused yet: this kills only processes the job left behind.
	_ = signalGroup(p.pid, syscall.SIGKILL)
	p.reaped = true
	p.mu.Unlock()
	_ = p.cmd.Wait() // the exit status is in ProcessState
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
	return exitCodeOf(p.cmd.ProcessState)
}
