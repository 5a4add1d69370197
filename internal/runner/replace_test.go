package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

// slots is a Replacer whose slots come every second from t0 + 1 s; the
// slots in paused are not to run.
type slots struct {
	mu     sync.Mutex
	paused map[time.Time]bool
	asked  []time.Time // the slots Runs was asked about
}

func (s *slots) Next(t time.Time) time.Time {
	if t.Before(t0) {
		return t0.Add(time.Second)
	}
	return t.Truncate(time.Second).Add(time.Second)
}

func (s *slots) Runs(slot time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, slot)
	return !s.paused[slot]
}

// startReplaceRun starts a lease job (exec sleep 30) with overlap:
// replace on a fake clock at t0, and returns once the runner waits on its
// four timers (timeout, lease guard, heartbeat, next slot).
func startReplaceRun(t *testing.T, ls *leaseStore, r Replacer) (*clock.Fake, <-chan Report, int) {
	t.Helper()
	clk := clock.NewFake(t0)
	rn, _ := newRunner(t, ls, clk)
	dir := t.TempDir()
	job := shellJob("replaced", `echo $$ > pid.tmp && mv pid.tmp pid; exec sleep 30`)
	job.Workdir = dir
	job.Timeout = time.Hour
	job.KillGrace = 10 * time.Second
	job.Overlap = string(claim.OverlapReplace)
	e := execution(job)
	e.Slot = t0
	e.ClaimedAt = clk.Now()
	e.Replace = r
	done := startRun(rn, context.Background(), e)
	pid := readPid(t, dir, "pid")
	waitTimers(t, clk, 4)
	return clk, done, pid
}

// With overlap: replace, the command is stopped at the job's next slot
// (SIGTERM) and the run recorded replaced, with the exit code the stop
// caused, fenced by the attempt's own token.
func TestReplaceStopsAtTheNextSlot(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{}
	clk, done, pid := startReplaceRun(t, ls, &slots{})
	clk.Set(t0.Add(time.Second - time.Millisecond))
	select {
	case rep := <-done:
		t.Fatalf("stopped before the next slot: %+v", rep)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Set(t0.Add(time.Second))
	rep := await(t, done, 10*time.Second)
	if rep.Status != claim.StatusReplaced || !rep.Recorded || rep.Fenced || rep.ExitCode != 128+15 {
		t.Fatalf("report = %+v, want replaced, recorded, exit 143", rep)
	}
	fins, _ := ls.finished()
	if len(fins) != 1 || fins[0].Status != claim.StatusReplaced || fins[0].ExitCode != 128+15 {
		t.Fatalf("finishes = %+v, want one replaced with exit code 143", fins)
	}
	if ls.fences[0].Token != testToken {
		t.Fatalf("finish fenced by %q, want the attempt's token", ls.fences[0].Token)
	}
	waitDead(t, pid)
}

// A next slot that is not to run (the job is paused at it) leaves the
// command running; the slot after that stops it.
func TestReplaceSkipsAPausedSlot(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{}
	sl := &slots{paused: map[time.Time]bool{t0.Add(time.Second): true}}
	clk, done, pid := startReplaceRun(t, ls, sl)
	clk.Set(t0.Add(time.Second))
	waitTimers(t, clk, 4) // re-armed for the slot after
	select {
	case rep := <-done:
		t.Fatalf("stopped at a paused slot: %+v", rep)
	default:
	}
	if !alive(pid) {
		t.Fatal("the command is gone")
	}
	clk.Set(t0.Add(2 * time.Second))
	if rep := await(t, done, 10*time.Second); rep.Status != claim.StatusReplaced || !rep.Recorded {
		t.Fatalf("report = %+v, want replaced at the slot after the paused one", rep)
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if len(sl.asked) != 2 || !sl.asked[0].Equal(t0.Add(time.Second)) || !sl.asked[1].Equal(t0.Add(2*time.Second)) {
		t.Fatalf("asked about slots %v, want t0+1s then t0+2s", sl.asked)
	}
	waitDead(t, pid)
}

// A command that ends on its own before the next slot is recorded as it
// ended: nothing was replaced.
func TestReplaceNotBeforeTheNextSlot(t *testing.T) {
	t.Parallel()
	ls := &leaseStore{}
	clk := clock.NewFake(t0)
	rn, _ := newRunner(t, ls, clk)
	job := shellJob("quick", "exit 3")
	job.Overlap = string(claim.OverlapReplace)
	e := execution(job)
	e.Slot, e.ClaimedAt, e.Replace = t0, t0, &slots{}
	rep := run(t, rn, context.Background(), e, 10*time.Second)
	if rep.Status != claim.StatusFailed || rep.ExitCode != 3 || !rep.Recorded {
		t.Fatalf("report = %+v, want failed with exit code 3", rep)
	}
}
