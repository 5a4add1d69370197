package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Guard is the daemon's job guard (internal/supervise.Guard): one process
// that SIGKILLs the process groups of the daemon's running jobs when the
// daemon dies. With a Guard, the runner starts each job directly as the
// leader of a new process group and tells the guard of the group; without
// one, it starts each job under its own supervising process.
//
// The guard learns of the daemon's death by EOF on its stdin, whose write
// end only the daemon holds. When the guard itself dies, the Guard starts
// a new one and tells it of every group still running.
type Guard struct {
	argv []string
	log  *zap.Logger

	mu     sync.Mutex
	cmd    *exec.Cmd
	w      *os.File
	groups map[int]bool
	closed bool
	exited chan struct{} // closed when the current guard process exits
}

// StartGuard starts the guard process argv (e.g. {"anarchon-supervise",
// "--guard"}) and returns once it runs.
func StartGuard(argv []string, log *zap.Logger) (*Guard, error) {
	if err := platformCheck(); err != nil {
		return nil, err
	}
	if len(argv) == 0 {
		return nil, errors.New("start the job guard: no command")
	}
	if log == nil {
		log = zap.NewNop()
	}
	g := &Guard{argv: slices.Clone(argv), log: log, groups: map[int]bool{}}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.spawn(); err != nil {
		return nil, err
	}
	return g, nil
}

// spawn starts a guard process and tells it of every group; g.mu is held.
func (g *Guard) spawn() error {
	r, w, err := os.Pipe() // close-on-exec: no job inherits the write end
	if err != nil {
		return fmt.Errorf("start the job guard: %w", err)
	}
	cmd := exec.Command(g.argv[0], g.argv[1:]...)
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	// Its own group: a signal to the daemon's group (a terminal's ^C)
	// reaches the daemon, which stops its jobs, not the guard.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return fmt.Errorf("start the job guard %q: %w", g.argv[0], err)
	}
	g.cmd, g.w, g.exited = cmd, w, make(chan struct{})
	for pgid := range g.groups {
		if err := g.send('+', pgid); err != nil {
			break // the new guard died already: its watcher starts another
		}
	}
	go g.watch(cmd, g.exited)
	return nil //nolint:nilerr // a failed send means the guard died: watch starts another
}

// watch waits for a guard process to exit and, unless the Guard is closed,
// starts another (retrying every second while that fails).
func (g *Guard) watch(cmd *exec.Cmd, exited chan struct{}) {
	err := cmd.Wait()
	close(exited)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.w.Close()
	g.log.Error("the job guard exited; starting another: until it runs, the jobs' processes would outlive a daemon that dies",
		zap.Error(err), zap.Int("groups", len(g.groups)))
	for {
		if err = g.spawn(); err == nil {
			g.log.Info("job guard running again", zap.Int("groups", len(g.groups)))
			return
		}
		g.log.Error("starting the job guard", zap.Error(err))
		g.mu.Unlock()
		time.Sleep(time.Second)
		g.mu.Lock()
		if g.closed {
			return
		}
	}
}

// send writes one line to the guard; g.mu is held.
func (g *Guard) send(op byte, pgid int) error {
	b := append(strconv.AppendInt([]byte{op}, int64(pgid), 10), '\n')
	_, err := g.w.Write(b)
	return err
}

// add records a job's process group, started with the parent-death signal
// SIGKILL: if the daemon dies before the guard has read the line, the
// kernel kills the group's leader.
func (g *Guard) add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.groups[pgid] = true
	if err := g.send('+', pgid); err != nil && !g.closed {
		g.log.Warn("telling the job guard of a job", zap.Int("pgid", pgid), zap.Error(err))
	}
}

// remove forgets a group once nothing of it is left running (its leader not
// yet reaped, so the id cannot have been reused).
func (g *Guard) remove(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.groups, pgid)
	if !g.closed {
		_ = g.send('-', pgid) // a dead guard's successor is told of the groups left
	}
}

// Close stops the guard: it closes its stdin, so the guard kills the groups
// still listed (none, when every job was stopped first) and exits; Close
// waits for that.
func (g *Guard) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	err := g.w.Close()
	exited := g.exited
	g.mu.Unlock()
	<-exited
	return err
}
