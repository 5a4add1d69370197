package clock

import (
	"context"
	"testing"
	"time"
)

var epoch = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

func fired(t Timer) bool {
	select {
	case <-t.C():
		return true
	default:
		return false
	}
}

func TestFakeTimersFireAtTheirDeadline(t *testing.T) {
	f := NewFake(epoch)
	a, b := f.NewTimer(time.Second), f.NewTimer(3*time.Second)
	f.Advance(999 * time.Millisecond)
	if fired(a) || fired(b) {
		t.Fatal("a timer fired before its deadline")
	}
	f.Advance(time.Millisecond)
	if !fired(a) || fired(b) {
		t.Fatal("after 1s: want only the 1s timer fired")
	}
	f.Advance(5 * time.Second)
	if !fired(b) {
		t.Fatal("the 3s timer did not fire")
	}
	if f.Timers() != 0 {
		t.Fatalf("%d timers still armed", f.Timers())
	}
	if got := f.Now(); !got.Equal(epoch.Add(6 * time.Second)) {
		t.Fatalf("Now = %v", got)
	}
}

func TestFakeStopAndReset(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(time.Second)
	if !tm.Stop() || tm.Stop() {
		t.Fatal("Stop reports whether the timer was armed")
	}
	f.Advance(2 * time.Second)
	if fired(tm) {
		t.Fatal("a stopped timer fired")
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reports it was active")
	}
	f.Advance(time.Second)
	if !fired(tm) {
		t.Fatal("a reset timer did not fire")
	}
	// A fired, undrained timer is drained by Reset, as time.Timer does.
	tm.Reset(time.Second)
	f.Advance(time.Second)
	tm.Reset(time.Second)
	if fired(tm) {
		t.Fatal("Reset left a stale fire in the channel")
	}
}

func TestFakeWaitTimers(t *testing.T) {
	f := NewFake(epoch)
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Minute) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOffset(t *testing.T) {
	f := NewFake(epoch)
	o := Offset{Base: f, Skew: -3 * time.Second}
	if got := o.Now(); !got.Equal(epoch.Add(-3 * time.Second)) {
		t.Fatalf("Offset.Now = %v", got)
	}
	tm := o.NewTimer(time.Second)
	f.Advance(time.Second)
	if !fired(tm) {
		t.Fatal("an offset clock's timer runs at the base clock's pace")
	}
}

// A timer armed at an instant keeps that instant when the fake time moves
// between the caller's reading of Now and the arming; a duration computed
// from the stale reading would fire late.
func TestNewTimerAtKeepsItsInstant(t *testing.T) {
	f := NewFake(epoch)
	deadline := f.Now().Add(time.Second)
	f.Advance(400 * time.Millisecond) // the step lands before the arming
	at := NewTimerAt(f, deadline)
	rel := f.NewTimer(deadline.Sub(epoch)) // the stale duration
	f.Set(deadline)
	if !fired(at) {
		t.Fatal("the timer armed at the instant did not fire at it")
	}
	if fired(rel) {
		t.Fatal("the stale relative timer fired at the instant: the test shows nothing")
	}
	past := NewTimerAt(f, epoch)
	if !fired(past) {
		t.Fatal("a timer armed at a past instant has not fired")
	}
	if f.Timers() != 1 {
		t.Fatalf("%d timers armed, want only the stale one", f.Timers())
	}
}

func TestNewTimerAtOnARealClock(t *testing.T) {
	tm := NewTimerAt(Real{}, time.Now().Add(-time.Second))
	select {
	case <-tm.C():
	case <-time.After(5 * time.Second):
		t.Fatal("a real timer armed at a past instant did not fire")
	}
}

func TestWaitTimerAt(t *testing.T) {
	f := NewFake(epoch)
	when := epoch.Add(5 * time.Second)
	f.NewTimer(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.WaitTimerAt(ctx, when); err == nil {
		t.Fatal("WaitTimerAt returned with no timer at the instant")
	}
	done := make(chan error, 1)
	go func() { done <- f.WaitTimerAt(context.Background(), when) }()
	f.NewTimer(5 * time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitTimerAt did not see the timer armed at the instant")
	}
}
