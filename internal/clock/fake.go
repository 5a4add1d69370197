package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Fake is a manually advanced clock for tests. Its timers fire when Advance
// or Set moves the time to or past their deadline.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever the timer set changes
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake clock reading t.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer firing when the fake time reaches Now()+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newTimerAt(f.now.Add(d))
}

// NewTimerAt returns a timer firing when the fake time reaches t; if it
// already has, the timer has fired.
func (f *Fake) NewTimerAt(t time.Time) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newTimerAt(t)
}

// newTimerAt arms a new timer at t; f.mu must be held.
func (f *Fake) newTimerAt(t time.Time) Timer {
	tm := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	tm.armAt(t)
	return tm
}

// Advance moves the clock forward by d, firing due timers in deadline order.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.Set(target)
}

// Set moves the clock to t (forward or backward) and fires due timers.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
	sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].when.Before(f.timers[j].when) })
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.when.After(t) {
			select {
			case tm.c <- t:
			default:
			}
			continue
		}
		kept = append(kept, tm)
	}
	f.timers = kept
	f.notify()
}

// Timers reports how many timers are armed.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers blocks until at least n timers are armed or ctx is done. Tests
// use it to know that the code under test is waiting on the clock before they
// advance it, instead of sleeping and hoping.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		armed, ch := len(f.timers), f.changed
		f.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// WaitTimerAt blocks until a timer armed to fire at when exists or ctx is
// done: a test that knows the deadline of the timer it awaits (a grace
// period from now, say) tells it from others armed meanwhile.
func (f *Fake) WaitTimerAt(ctx context.Context, when time.Time) error {
	for {
		f.mu.Lock()
		found, ch := false, f.changed
		for _, t := range f.timers {
			found = found || t.when.Equal(when)
		}
		f.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// notify wakes WaitTimers; f.mu must be held.
func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f    *Fake
	c    chan time.Time
	when time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// arm schedules the timer; t.f.mu must be held.
func (t *fakeTimer) arm(d time.Duration) { t.armAt(t.f.now.Add(d)) }

// armAt schedules the timer at when; t.f.mu must be held.
func (t *fakeTimer) armAt(when time.Time) {
	t.when = when
	if !when.After(t.f.now) {
		select {
		case t.c <- t.f.now:
		default:
		}
		return
	}
	t.f.timers = append(t.f.timers, t)
	t.f.notify()
}

// remove unschedules the timer; t.f.mu must be held.
func (t *fakeTimer) remove() bool {
	for i, o := range t.f.timers {
		if o == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			t.f.notify()
			return true
		}
	}
	return false
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.remove()
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	active := t.remove()
	select { // drain a stale fire, as time.Timer does since Go 1.23
	case <-t.c:
	default:
	}
	t.arm(d)
	return active
}
