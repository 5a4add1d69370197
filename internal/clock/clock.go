// Package clock is the one source of time for the scheduler, the runner and
// the claim-only backends. Production code gets Real; tests get a Fake they
// can advance, and the fault-injection harness an Offset clock that skews or
// jumps one instance's view of time.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time. For Real it carries a monotonic reading,
	// so differences between two Now values are immune to wall-clock jumps.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the daemon uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether it was active.
	Reset(d time.Duration) bool
}

// Real is the system clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// atClock is a clock whose timers can be armed at an instant rather than
// after a duration (Fake).
type atClock interface {
	NewTimerAt(t time.Time) Timer
}

// NewTimerAt returns a timer of c that fires when c reads t or later. For a
// clock that moves on its own this is NewTimer(t - Now()); a Fake arms the
// instant itself, so that a step of the fake time taken between the caller's
// reading of Now and the arming of the timer cannot push the deadline back.
func NewTimerAt(c Clock, t time.Time) Timer {
	if a, ok := c.(atClock); ok {
		return a.NewTimerAt(t)
	}
	return c.NewTimer(t.Sub(c.Now()))
}

// SleepUntil waits until c reads t, or until ctx is done (then it returns
// ctx.Err()).
func SleepUntil(ctx context.Context, c Clock, t time.Time) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return await(ctx, NewTimerAt(c, t))
}

// Sleep waits for d on c, or until ctx is done (then it returns ctx.Err()).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return await(ctx, c.NewTimer(d))
}

// await waits for t to fire or ctx to be done, and stops t.
func await(ctx context.Context, t Timer) error {
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// TestClockEnv names the file whose content, an integer number of
// milliseconds, is added to every reading of the daemon's clock. It is read
// only by binaries built with the anarchon_testclock build tag (the chaos
// harness builds one; see testclock.go); a release binary never looks at
// it, so no production config or environment can skew a daemon's clock by
// accident.
const TestClockEnv = "ANARCHON_TESTCLOCK_FILE"

// Offset is a clock whose readings are those of Base shifted by Skew. Timers
// run at Base's pace: a skew moves the wall time an instance believes in, not
// the length of a second. Used by the fault-injection harness only.
type Offset struct {
	Base Clock
	Skew time.Duration
}

var _ Clock = Offset{}

// Now returns Base.Now() + Skew.
func (o Offset) Now() time.Time { return o.Base.Now().Add(o.Skew) }

// NewTimer returns Base's timer.
func (o Offset) NewTimer(d time.Duration) Timer { return o.Base.NewTimer(d) }

// WithTimeout is context.WithTimeout on c: the context ends d from now by
// c's timers (a fake clock's advance, a real clock's time).
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := c.NewTimer(d)
	go func() {
		select {
		case <-t.C():
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}
