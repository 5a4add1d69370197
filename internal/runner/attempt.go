package runner

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
)

// attempt is one run of Run: a won attempt taken from its checks before the
// fork to its recorded result. Its phases, in order, are prepare, fork,
// supervise and settle; each of the first two may end the attempt with a
// report of its own. An attempt is used by Run's goroutine only (its
// heartbeat runs in another, and talks to it through hbEvents).
type attempt struct {
	r      *Runner
	ctx    context.Context // the daemon's hard stop: cancelled at the end of its shutdown grace
	e      Execution
	job    config.Job
	clk    clock.Clock
	log    *zap.Logger  // carries the attempt's fields (Runner.fields)
	leaser claim.Leaser // nil: a claim-only backend, which keeps no lease
	start  time.Time    // when Run began: the report's start
	// anchor is when the lease counts from: the claim's send, or that of
	// the renewal that proved the lease before the fork.
	anchor time.Time

	launch launch   // the command, set by prepare
	proc   *process // the command's process group, set by fork

	// The heartbeat, on lease backends (hbEvents nil otherwise); it lives
	// until Run returns.
	hbEvents <-chan hbEvent
	hbCancel context.CancelFunc
	hbDone   chan struct{} // closed when the heartbeat's goroutine has returned

	stopper stopper // the command's stop, and why it was stopped
}

// newAttempt is the attempt to run e; its start is now.
func (r *Runner) newAttempt(ctx context.Context, e Execution) *attempt {
	a := &attempt{r: r, ctx: ctx, e: e, job: e.Job, clk: r.Clock, log: r.Log}
	if a.clk == nil {
		a.clk = clock.Real{}
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	a.log = a.log.With(r.fields(e)...)
	a.leaser, _ = r.Backend.(claim.Leaser)
	a.start = a.clk.Now()
	a.anchor = e.ClaimedAt
	if a.anchor.IsZero() {
		a.anchor = a.start
	}
	return a
}

// leased reports whether the attempt holds a lease: a lease backend and a
// job with a lease.
func (a *attempt) leased() bool { return a.leaser != nil && a.job.Lease > 0 }

// prepare makes the checks before the fork (the daemon is not stopping, the
// lease is still the attempt's) and resolves the command, its environment,
// user and workdir. When it returns false the attempt is over: the report
// says how.
func (a *attempt) prepare() (Report, bool) {
	if a.ctx.Err() != nil {
		a.log.Warn("job not started: the daemon is stopping")
		return a.hardStop(Report{ExitCode: notStartedCode}, ""), false
	}
	if rep, ok := a.checkLease(); !ok {
		return rep, false
	}
	l, err := a.r.prepare(a.e)
	if err != nil {
		return a.notStarted(err), false
	}
	l.rec = a.r.recordOf(a.e)
	a.launch = l
	return Report{}, true
}

// checkLease makes sure, on lease backends, that the lease counted from the
// claim's send is still running, renewing it first when the claim's answer
// came late. When it returns false the command must not start.
func (a *attempt) checkLease() (Report, bool) {
	if !a.leased() {
		return Report{}, true
	}
	since := a.start.Sub(a.anchor)
	if since >= a.job.Lease {
		// The lease had run out before the command could start (a re-sent
		// claim answered with its first copy's lease): the store already
		// treats the run as abandoned (a backup may have taken it over, or
		// the overlap check let the job's next slot start). Renewing would
		// revive it beside them: leave it to the backups.
		a.log.Warn("job not started: its lease had run out when the claim's answer arrived",
			zap.Duration("since_lease_start", since), zap.Duration("lease", a.job.Lease))
		return Report{Fenced: true, Err: ErrLeaseLost}, false
	}
	if since > a.job.Lease/2 {
		// The claim's answer came late (a slow or lossy store): all the
		// runner can prove is a lease counted from the claim's send, and
		// it may be nearly over. Renew it before starting the command.
		return a.proveLease()
	}
	return Report{}, true
}

// proveLease renews the lease before the command starts. On success the
// lease counts from the renewal's send (a.anchor) and ends, in store time,
// where the renewal says (a.e.LeaseUntil: "job started" logs it). A renewal
// that fails leaves the command unstarted: fenced, or unproven (a backup
// takes the run over once the lease has expired).
func (a *attempt) proveLease() (Report, bool) {
	sent := a.clk.Now()
	cctx, cancel := clock.WithTimeout(a.ctx, a.clk, callTimeout(a.job))
	res, err := a.leaser.Renew(cctx, a.e.Fence, a.job.Lease)
	cancel()
	a.r.observeRenewal(res, err)
	switch {
	case errors.Is(err, claim.ErrFenced):
		a.log.Warn(fencedMsg(err, "job not started: ", "the run belongs to another attempt"), zap.Error(err))
		return Report{Fenced: true, Err: fmt.Errorf("surrendered the run: %w", err)}, false
	case err != nil:
		a.log.Warn("job not started: the claim was answered too late to prove the lease, and renewing it failed", zap.Error(err))
		return Report{Fenced: true, Err: fmt.Errorf("%w: %w", ErrLeaseLost, err)}, false
	}
	if left := res.LeaseUntil.Sub(res.StoreNow); !res.LeaseUntil.IsZero() && !res.StoreNow.IsZero() && left < a.job.Lease {
		sent = sent.Add(left - a.job.Lease)
	}
	a.anchor = sent
	if !res.LeaseUntil.IsZero() {
		a.e.LeaseUntil = res.LeaseUntil
	}
	return Report{}, true
}

// fork starts the prepared command under the lease check around the fork
// (startGate) and logs its start. When it returns false the attempt is
// over: the fork was refused for a lease nearly over (fenced), the command
// could not be started (recorded as failed), or its exec completed after
// the lease had ended (killed at once, fenced).
func (a *attempt) fork() (Report, bool) {
	p, err := a.r.start(a.launch, a.job.OutputTailBytes, a.log, a.gate())
	if errors.Is(err, ErrLeaseLost) {
		a.log.Warn("job not started: its lease was nearly over when the fork was due", zap.Error(err))
		return Report{Fenced: true, Err: err}, false
	}
	if err != nil {
		return a.notStarted(err), false
	}
	a.proc = p
	if p.late {
		return a.startedLate(), false
	}
	if a.r.Hooks.Started != nil {
		a.r.Hooks.Started(a.e, a.clk.Now())
	}
	switch {
	case p.cmd == nil:
		// Its exit code (127 or 126) and output say why; the run is
		// recorded as failed like any other.
		a.log.Warn("job's program could not be started", zap.Int("exit_code", p.code))
	case a.e.LeaseUntil.IsZero():
		a.log.Info("job started", zap.Int("pid", p.pid))
	default:
		a.log.Info("job started", zap.Int("pid", p.pid), zap.Time("lease_until", a.e.LeaseUntil))
	}
	return Report{}, true
}

// gate is the lease check around the fork: the lease runs from a.anchor on
// lease backends; claim-only backends have none.
func (a *attempt) gate() startGate {
	g := startGate{clk: a.clk, beforeFork: a.r.beforeFork, afterFork: a.r.afterFork}
	if a.leased() {
		g.leaseEnd, g.margin = a.anchor.Add(a.job.Lease), fenceMargin(a.job.Lease)
	}
	return g
}

// recordOf is what the attempt's record (Records) says of e.
func (r *Runner) recordOf(e Execution) attemptRecord {
	slot, _ := slotOf(e)
	return attemptRecord{Job: jobName(e), Slot: slotString(slot), Attempt: e.Fence.Attempt, Instance: r.Instance}
}

// startedLate ends an attempt whose exec completed after its lease had
// ended (startGate): its process group was SIGKILLed at once; the attempt
// is fenced, and nothing is recorded (a backup may hold the run already).
func (a *attempt) startedLate() Report {
	<-a.proc.exited
	code := a.proc.finish(a.clk, a.log)
	a.log.Error("fenced: the job's exec completed after its lease had ended (a starved machine); killed it at once, result not recorded",
		zap.Int("exit_code", code))
	return Report{Fenced: true, ExitCode: code, Duration: a.clk.Now().Sub(a.start),
		Err: fmt.Errorf("%w: the exec completed after the lease ended", ErrLeaseLost)}
}

// notStarted records a command that could not be started as failed, exit
// code -1, with the error as its output.
func (a *attempt) notStarted(err error) Report {
	a.log.Error("job could not be started", zap.Error(err))
	now := a.clk.Now()
	rep := Report{Status: claim.StatusFailed, ExitCode: notStartedCode, Duration: now.Sub(a.start)}
	fin := claim.Finish{Status: claim.StatusFailed, ExitCode: notStartedCode,
		OutputTail: truncateTail(err.Error()+"\n", a.job.OutputTailBytes),
		StartedAt:  a.start.UTC(), FinishedAt: now.UTC()}
	rep.OutputTail = fin.OutputTail
	var recErr error
	rep.Recorded, rep.Fenced, recErr = a.record(fin, max(recordWindow, a.job.Lease), a.ctx.Done())
	rep.Err = err
	if recErr != nil {
		rep.Err = errors.Join(err, recErr)
	}
	return rep
}

// startHeartbeat starts renewing the lease, on lease backends. The
// heartbeat runs until stopHeartbeat, not until the hard stop: it keeps the
// lease while the command stops and while the result is recorded.
func (a *attempt) startHeartbeat() {
	hbCtx, cancel := context.WithCancel(context.WithoutCancel(a.ctx))
	a.hbCancel = cancel
	a.hbDone = make(chan struct{})
	if !a.leased() {
		close(a.hbDone)
		return
	}
	h := newHeartbeat(a.leaser, a.clk, a.log, a.e.Fence, a.job.Lease, a.job.Heartbeat)
	h.observe = a.r.observeRenewal
	a.hbEvents = h.events
	go func() {
		defer close(a.hbDone)
		h.run(hbCtx, a.anchor)
	}()
}

// stopHeartbeat stops the heartbeat and waits until no renewal can be sent
// any more. It may be called more than once.
func (a *attempt) stopHeartbeat() {
	a.hbCancel()
	<-a.hbDone
}

// supervise waits for the command to exit. Meanwhile it stops the command
// (stopper) when it times out, when the heartbeat reports the attempt
// fenced or its lease about to end, or at the daemon's hard stop.
func (a *attempt) supervise() {
	a.stopper = stopper{clk: a.clk, log: a.log, p: a.proc}
	defer a.stopper.stopTimer()
	var timeoutC <-chan time.Time
	if a.job.Timeout > 0 {
		t := a.clk.NewTimer(a.job.Timeout)
		defer t.Stop()
		timeoutC = t.C()
	}
	hbEvents, ctxDone := a.hbEvents, a.ctx.Done()
	rp := newReplacement(a.e.Replace, a.clk, a.e.Slot)
	defer rp.stop()
	for {
		select {
		case <-a.proc.exited:
			return
		case <-timeoutC:
			timeoutC = nil
			a.log.Warn("job timed out; stopping it", zap.Duration("timeout", a.job.Timeout),
				zap.Duration("kill_grace", a.job.KillGrace))
			a.stopper.stop(stopTimeout, a.job.KillGrace)
		case ev := <-hbEvents:
			hbEvents = nil
			if a.leaseEnded(ev) {
				return
			}
		case <-rp.C():
			a.replaced(rp)
		case <-ctxDone:
			ctxDone = nil
			a.log.Warn("shutdown grace is over; stopping the job", zap.Duration("kill_grace", a.job.KillGrace))
			a.stopper.stop(stopShutdown, a.job.KillGrace)
		case <-a.stopper.killC:
			a.stopper.kill()
		}
	}
}

// leaseEnded handles the heartbeat's one event: the attempt was fenced by
// another, or no renewal succeeded and the lease may end. It stops the
// command, unless the command had exited already (both were ready): then
// its result stands, recorded fenced by the token, which the store checks,
// and leaseEnded reports true.
func (a *attempt) leaseEnded(ev hbEvent) (exited bool) {
	select {
	case <-a.proc.exited:
		return true
	default:
	}
	now := a.clk.Now()
	if ev.err != nil {
		a.log.Error(fencedMsg(ev.err, "fenced: ", "another instance took over; surrendering the run"), zap.Error(ev.err))
		a.stopper.stop(stopFenced, a.job.KillGrace)
		return false
	}
	grace := min(a.job.KillGrace, ev.leaseEnd.Sub(now))
	a.log.Error("fenced by my own clock: no renewal succeeded within the lease (store unreachable, or this process was paused); stopping the job",
		zap.Duration("since_renewal", now.Sub(ev.renewed)), zap.Duration("lease", a.job.Lease),
		zap.Duration("kill_grace", max(grace, 0)))
	a.stopper.stop(stopLeaseLost, grace)
	return false
}

// settle ends the attempt once the command has exited: it reaps the
// process group (what the job left in it is killed, its record removed)
// and, as the reason of the stop decides, reports a fenced attempt with
// nothing recorded, ends it as the hard stop does, or records the result.
func (a *attempt) settle() Report {
	code := a.proc.finish(a.clk, a.log)
	end := a.clk.Now()
	rep := Report{ExitCode: code, Duration: end.Sub(a.start)}
	tail := a.proc.out.tailString()
	switch a.stopper.why {
	case stopFenced:
		rep.Fenced = true
		rep.Err = fmt.Errorf("surrendered the run: %w", claim.ErrFenced)
		a.log.Warn("job stopped after fencing; result not recorded", zap.Int("exit_code", code))
		return rep
	case stopLeaseLost:
		if killedBy(code, syscall.SIGTERM, syscall.SIGKILL) {
			rep.Fenced = true
			rep.Err = ErrLeaseLost
			a.log.Warn("job stopped after fencing myself; result not recorded", zap.Int("exit_code", code))
			return rep
		}
		// The command ended on its own, not by the stop: while this
		// process was paused, or just as its lease check fired. Its result
		// stands and is recorded fenced by the token: the store refuses it
		// if a backup took the run over meanwhile.
		a.log.Warn("lease check failed but the job had ended on its own; recording its result, fenced by its token", zap.Int("exit_code", code))
		rep.Status = statusOf(code)
	case stopShutdown:
		// A renewal after the release would take the lease back.
		a.stopHeartbeat()
		return a.hardStop(rep, tail)
	case stopTimeout:
		rep.Status = claim.StatusTimeout
	case stopReplaced:
		rep.Status = claim.StatusReplaced
	default:
		rep.Status = statusOf(code)
	}
	return a.finished(rep, tail, end)
}

// finished logs the end of a command whose result stands and records it:
// rep holds its status, exit code and duration, tail its output's tail, end
// when it was reaped.
func (a *attempt) finished(rep Report, tail string, end time.Time) Report {
	fields := []zap.Field{zap.String("status", string(rep.Status)), zap.Int("exit_code", rep.ExitCode),
		zap.Duration("duration", rep.Duration)}
	if rep.Status == claim.StatusSucceeded {
		a.log.Info("job finished", fields...)
	} else {
		a.log.Warn("job finished", fields...)
	}
	fin := claim.Finish{Status: rep.Status, ExitCode: rep.ExitCode, OutputTail: tail,
		StartedAt: a.start.UTC(), FinishedAt: end.UTC()}
	rep.OutputTail = tail
	rep.Recorded, rep.Fenced, rep.Err = a.record(fin, max(recordWindow, a.job.Lease), a.ctx.Done())
	return rep
}

// hardStop ends an attempt that the daemon's hard stop interrupted: lease
// backends release the lease, claim-only backends record it as interrupted.
// rep holds what is known of the command; tail is its output's tail.
func (a *attempt) hardStop(rep Report, tail string) Report {
	rep.Err = ErrStopped
	if a.leaser != nil {
		return a.release(rep)
	}
	rep.Status, rep.OutputTail = claim.StatusInterrupted, tail
	fin := claim.Finish{Status: claim.StatusInterrupted, ExitCode: rep.ExitCode, OutputTail: tail,
		StartedAt: a.start.UTC(), FinishedAt: a.start.Add(rep.Duration).UTC()}
	var err error
	rep.Recorded, rep.Fenced, err = a.record(fin, releaseWindow, nil)
	if err != nil {
		rep.Err = errors.Join(ErrStopped, err)
	}
	return rep
}

// release gives the lease up after the hard stop, so that a backup takes
// the run over at once, retrying for releaseWindow.
func (a *attempt) release(rep Report) Report {
	_, err := retryStore(a.ctx, a.clk, releaseWindow, callTimeout(a.job), nil, func(ctx context.Context) error {
		return a.leaser.Release(ctx, a.e.Fence)
	}, func(err error) { a.log.Warn("releasing the lease failed; retrying", zap.Error(err)) })
	switch {
	case err == nil:
		rep.Released = true
		a.log.Info("lease released for a backup to take over", zap.Int("exit_code", rep.ExitCode))
	case errors.Is(err, claim.ErrFenced):
		rep.Fenced = true
		a.log.Warn("lease not released: the run belongs to a newer attempt", zap.Error(err))
	default:
		a.log.Error("lease not released; a backup takes over when it ends", zap.Error(err))
		rep.Err = errors.Join(ErrStopped, fmt.Errorf("releasing the lease: %w", err))
	}
	return rep
}

// record stores fin with Finish, fenced by the attempt's token, retrying
// transport errors for window or until giveUp is closed.
func (a *attempt) record(fin claim.Finish, window time.Duration, giveUp <-chan struct{}) (recorded, fenced bool, err error) {
	attempts, err := retryStore(a.ctx, a.clk, window, callTimeout(a.job), giveUp, func(ctx context.Context) error {
		err := a.r.Backend.Finish(ctx, a.e.Fence, fin)
		if err != nil && !errors.Is(err, claim.ErrFenced) && a.r.Hooks.StoreError != nil {
			a.r.Hooks.StoreError("finish", err)
		}
		return err
	}, func(err error) { a.log.Warn("recording the result failed; retrying", zap.Error(err)) })
	switch {
	case err == nil:
		if attempts > 1 {
			a.log.Info("result recorded", zap.Int("attempts", attempts))
		}
		return true, false, nil
	case errors.Is(err, claim.ErrFenced):
		a.log.Warn(fencedMsg(err, "result not recorded: ", "the run is no longer this attempt's (a backup took it over, or marked it interrupted after its lease ran out)"), zap.Error(err))
		return false, true, fmt.Errorf("recording the result: %w", err)
	default:
		a.log.Error("result not recorded", zap.Error(err), zap.Int("attempts", attempts))
		return false, false, fmt.Errorf("recording the result: %w", err)
	}
}

// stopKind is why the runner stopped the command; a later, larger kind wins.
type stopKind int

const (
	stopNone stopKind = iota
	stopTimeout
	stopReplaced // the job's next slot came (overlap: replace)
	stopShutdown
	stopFenced
	stopLeaseLost
)

// stopper ends an attempt's command: SIGTERM to its process group once, then
// SIGKILL after a grace, which a later stop may only bring forward. It is
// used by supervise's goroutine only.
type stopper struct {
	clk clock.Clock
	log *zap.Logger
	p   *process

	why      stopKind // the largest reason the command was stopped for
	termSent bool
	killed   bool             // SIGKILL sent
	killT    clock.Timer      // the SIGKILL's timer, from the first stop with a grace
	killC    <-chan time.Time // killT's channel, nil once it fired (or when killT is nil)
	killAt   time.Time        // when killT fires
}

// stop ends the command for k: SIGTERM to the group unless sent already,
// and SIGKILL after grace (at once when grace <= 0), or sooner if an earlier
// stop asked for it sooner.
func (s *stopper) stop(k stopKind, grace time.Duration) {
	s.why = max(s.why, k)
	if s.killed {
		return
	}
	if !s.termSent {
		s.termSent = true
		s.p.signal(syscall.SIGTERM)
	}
	if grace <= 0 {
		s.killed = true
		s.p.signal(syscall.SIGKILL)
		return
	}
	at := s.clk.Now().Add(grace)
	switch {
	case s.killT == nil:
		s.killT = s.clk.NewTimer(grace)
		s.killC = s.killT.C()
		s.killAt = at
	case at.Before(s.killAt):
		s.killT.Reset(grace)
		s.killAt = at
	}
}

// kill sends the SIGKILL that killT was set for: the grace is over.
func (s *stopper) kill() {
	s.killC = nil
	s.killed = true
	s.log.Warn("job still running after SIGTERM; sending SIGKILL to its process group")
	s.p.signal(syscall.SIGKILL)
}

// stopTimer stops the SIGKILL's timer, if there is one.
func (s *stopper) stopTimer() {
	if s.killT != nil {
		s.killT.Stop()
	}
}
