package runner

import (
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/clock"
)

// Replacer is the job's slot clock, for overlap: replace
// (docs/spec.md#s3-1-replace): the attempt stops its command at the job's
// first next slot that is to run, and records the run replaced; that
// slot's claim, which found this run live (answer overlap), is held and
// asked again until the result is recorded, and then wins.
type Replacer interface {
	// Next is the job's first slot after t; zero when there is none.
	Next(t time.Time) time.Time
	// Runs reports whether slot is to run: false when the job is paused
	// at it (the command is then left running, and the slot after is
	// looked at instead).
	Runs(slot time.Time) bool
}

// replacement arms the stop of an attempt for the job's next slot.
type replacement struct {
	r     Replacer
	clk   clock.Clock
	at    time.Time   // the next slot looked at
	timer clock.Timer // fires at at; nil: no next slot
}

// newReplacement arms the stop at the first slot after slot; nil when r is
// nil (not overlap: replace) or the job has no later slot.
func newReplacement(r Replacer, clk clock.Clock, slot time.Time) *replacement {
	if r == nil {
		return nil
	}
	p := &replacement{r: r, clk: clk}
	if !p.arm(r.Next(slot)) {
		return nil
	}
	return p
}

// arm sets the timer for at; false when at is zero.
func (p *replacement) arm(at time.Time) bool {
	if at.IsZero() {
		p.timer = nil
		return false
	}
	p.at, p.timer = at, clock.NewTimerAt(p.clk, at)
	return true
}

// C is the timer's channel: nil (never ready) when nothing is armed.
func (p *replacement) C() <-chan time.Time {
	if p == nil || p.timer == nil {
		return nil
	}
	return p.timer.C()
}

// fired reports whether the slot the timer fired for is to run (the
// command must stop); otherwise it arms the timer for the slot after.
func (p *replacement) fired() bool {
	if p.r.Runs(p.at) {
		p.timer = nil
		return true
	}
	p.arm(p.r.Next(p.at))
	return false
}

// stop stops the timer.
func (p *replacement) stop() {
	if p != nil && p.timer != nil {
		p.timer.Stop()
	}
}

// replaced handles the replacement's timer: at the job's next slot that
// is to run it stops the command (SIGTERM, SIGKILL after killGrace), which
// is then recorded replaced; a command that has exited already is left
// to be recorded as it ended.
func (a *attempt) replaced(p *replacement) {
	select {
	case <-a.proc.exited:
		return // it ended on its own as the slot came: its result stands
	default:
	}
	at := p.at
	if !p.fired() {
		a.log.Info("the job's next slot is paused: the command runs on (overlap: replace)", zap.Time("next_slot", at))
		return
	}
	a.log.Warn("the job's next slot came: stopping the command (overlap: replace)",
		zap.Time("next_slot", at), zap.Duration("kill_grace", a.job.KillGrace))
	a.stopper.stop(stopReplaced, a.job.KillGrace)
}
