package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/supervise"
)

// Hook kinds: the crontab's keys of a job's hooks (docs/spec.md#s6-hooks).
const (
	OnFailure = "onFailure"
	OnSuccess = "onSuccess"
	OnMissed  = "onMissed"
)

// HookRun is one run of a job's hook.
type HookRun struct {
	// Kind is the hook: OnFailure, OnSuccess or OnMissed.
	Kind string
	// Command is the hook's command, run as Job.Shell -c Command.
	Command string
	// Execution is what the hook follows: the run's job, fence and slot;
	// for a missed slot the job and the slot only (attempt 0, no token).
	Execution Execution
	// Status is the outcome as the store kept it.
	Status claim.Status
	// Ran: the outcome is a run's, with ExitCode, Duration and OutputTail
	// (false for a missed slot).
	Ran        bool
	ExitCode   int
	Duration   time.Duration
	OutputTail string
	// Reason is a missed slot's reason (late, all_down, catch_up, ...).
	Reason string
}

// HookReport is the outcome of RunHook.
type HookReport struct {
	// Started: the hook's command was forked.
	Started bool
	// ExitCode is the hook's exit code as observed (128+N when killed by
	// signal N), -1 when it did not start.
	ExitCode int
	// TimedOut: the hook ran longer than the job's HookTimeout and was
	// stopped.
	TimedOut bool
	// Err says why the hook did not start, or was stopped.
	Err error
}

// Failed reports whether the hook failed: it did not start, exited
// non-zero, or timed out.
func (h HookReport) Failed() bool { return !h.Started || h.ExitCode != 0 || h.TimedOut }

// RunHook runs h as the job's command would run, by the runner's own code:
// by the job's shell, as its user and group, in its workdir, with its
// environment and the run's ANARCHON_* variables, and besides them
// ANARCHON_HOOK, ANARCHON_STATUS, ANARCHON_EXIT_CODE, ANARCHON_DURATION_MS,
// ANARCHON_OUTPUT_FILE (a file holding the run's output tail, removed when
// the hook has ended) and, for a missed slot, ANARCHON_REASON. Its output
// goes to the log as a job's does. RunHook blocks until the hook has
// exited: it is stopped (SIGTERM to its process group, SIGKILL after the
// job's killGrace) when it runs longer than the job's HookTimeout, or when
// ctx is cancelled (the daemon's hard stop). A hook that fails is logged at
// warn with its exit code and output tail, and counted (Hooks.HookFailed).
// Nothing of a hook is recorded in the store.
func (r *Runner) RunHook(ctx context.Context, h HookRun) HookReport {
	log := r.hookLog(h)
	if ctx.Err() != nil {
		log.Warn("hook not run: the daemon is stopping")
		return HookReport{ExitCode: notStartedCode, Err: ErrStopped}
	}
	e := h.Execution
	e.Job.Command, e.Job.Args = h.Command, nil
	l, err := r.prepare(e)
	if err != nil {
		return r.hookNotStarted(log, h, err)
	}
	file, err := outputFile(h.OutputTail, l.spec)
	if err != nil {
		return r.hookNotStarted(log, h, err)
	}
	defer func() {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("hook's output file not removed", zap.String("file", file), zap.Error(err))
		}
	}()
	for _, kv := range hookEnv(h, file) {
		l.env = setenv(l.env, kv[0], kv[1])
	}
	l.rec = r.recordOf(e)
	clk := r.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	start := clk.Now()
	p, err := r.start(l, e.Job.OutputTailBytes, log, startGate{clk: clk})
	if err != nil {
		return r.hookNotStarted(log, h, err)
	}
	log.Info("hook started", zap.Int("pid", p.pid))
	rep := HookReport{Started: true}
	rep.TimedOut, rep.Err = superviseHook(ctx, clk, log, p, h)
	rep.ExitCode = p.finish(clk, log)
	fields := []zap.Field{zap.Int("exit_code", rep.ExitCode), zap.Duration("duration", clk.Now().Sub(start))}
	if !rep.Failed() {
		log.Info("hook finished", fields...)
		return rep
	}
	log.Warn("hook failed", append(fields, zap.Bool("timed_out", rep.TimedOut),
		zap.String("output_tail", p.out.tailString()))...)
	r.hookFailed(h)
	return rep
}

// hookLog is the logger of h's messages and output: the run's fields and
// the hook's kind.
func (r *Runner) hookLog(h HookRun) *zap.Logger {
	log := r.Log
	if log == nil {
		log = zap.NewNop()
	}
	return log.With(append(r.fields(h.Execution), zap.String("hook", h.Kind))...)
}

// hookNotStarted logs and counts a hook that could not be started.
func (r *Runner) hookNotStarted(log *zap.Logger, h HookRun, err error) HookReport {
	log.Warn("hook failed: it could not be started", zap.Int("exit_code", notStartedCode), zap.Error(err))
	r.hookFailed(h)
	return HookReport{ExitCode: notStartedCode, Err: err}
}

// hookFailed passes a failed hook to the observers.
func (r *Runner) hookFailed(h HookRun) {
	if r.Hooks.HookFailed != nil {
		r.Hooks.HookFailed(jobName(h.Execution), h.Kind)
	}
}

// superviseHook waits for the hook's process p to exit, stopping it when
// it runs longer than the job's HookTimeout or when ctx is cancelled. It
// reports whether it timed out, and the stop's reason.
func superviseHook(ctx context.Context, clk clock.Clock, log *zap.Logger, p *process, h HookRun) (timedOut bool, err error) {
	job := h.Execution.Job
	st := stopper{clk: clk, log: log, p: p}
	defer st.stopTimer()
	var timeoutC <-chan time.Time
	if job.HookTimeout > 0 {
		t := clk.NewTimer(job.HookTimeout)
		defer t.Stop()
		timeoutC = t.C()
	}
	done := ctx.Done()
	for {
		select {
		case <-p.exited:
			return timedOut, err
		case <-timeoutC:
			timeoutC, timedOut = nil, true
			err = fmt.Errorf("hook ran longer than %v", job.HookTimeout)
			log.Warn("hook timed out; stopping it", zap.Duration("timeout", job.HookTimeout),
				zap.Duration("kill_grace", job.KillGrace))
			st.stop(stopTimeout, job.KillGrace)
		case <-done:
			done = nil
			if err == nil {
				err = ErrStopped
			}
			log.Warn("shutdown grace is over; stopping the hook", zap.Duration("kill_grace", job.KillGrace))
			st.stop(stopShutdown, job.KillGrace)
		case <-st.killC:
			st.kill()
		}
	}
}

// hookEnv is what a hook gets besides the job's environment.
func hookEnv(h HookRun, file string) [][2]string {
	code, ms := "", "0"
	if h.Ran {
		code, ms = strconv.Itoa(h.ExitCode), strconv.FormatInt(h.Duration.Milliseconds(), 10)
	}
	env := [][2]string{
		{"ANARCHON_HOOK", h.Kind},
		{"ANARCHON_STATUS", string(h.Status)},
		{"ANARCHON_EXIT_CODE", code},
		{"ANARCHON_DURATION_MS", ms},
		{"ANARCHON_OUTPUT_FILE", file},
	}
	if h.Reason != "" {
		env = append(env, [2]string{"ANARCHON_REASON", h.Reason})
	}
	return env
}

// outputFile writes tail to a new file (mode 0600) that the hook's user
// owns, and returns its path.
func outputFile(tail string, spec supervise.Spec) (string, error) {
	f, err := os.CreateTemp("", "anarchon-hook-*.out")
	if err != nil {
		return "", fmt.Errorf("creating the hook's output file: %w", err)
	}
	name := f.Name()
	_, err = f.WriteString(tail)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && spec.UID != nil {
		err = os.Chown(name, int(*spec.UID), int(spec.GID))
	}
	if err != nil {
		_ = os.Remove(name)
		return "", fmt.Errorf("writing the hook's output file: %w", err)
	}
	return name, nil
}
