package redisclaim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The failover tests run the claim path as anarchond's scheduler does,
// for 3 instances, against a private Redis Cluster or Sentinel set whose
// busiest master they kill -9 (redisproc_test.go), and check what an
// operator would: no run twice, the jobs of the dead master's slots back
// within failoverResume of the replica reporting itself master, the jobs
// of the other masters never paused more than otherPause.

const (
	// failoverResume bounds the time from the replica's promotion (its
	// ROLE answering master) to the first won claim of every job of the
	// dead master.
	failoverResume = 3 * time.Second
	// otherPause bounds how much longer than its period a job of another
	// master ever waits between two won claims.
	otherPause = 2 * time.Second
	// failoverMaxLate is the jobs' maxLate: a slot whose claim is not
	// answered within it is given up (lost), as the scheduler does.
	failoverMaxLate = 10 * time.Second
	// failoverLease is the lease strategy's lease.
	failoverLease = 10 * time.Second
)

// fanswer is one answered claim.
type fanswer struct {
	job      string
	slot     int64
	token    claim.Token
	outcome  claim.Outcome
	attempt  int
	at       time.Time
	instance int
}

// failoverLoad is the instances' claims: every second, each instance
// claims each job's slot, and re-sends the claim with the same token after
// an error (backoff 100 ms doubling to 2 s, jittered, a call bounded by
// 1 s: the scheduler's) until it is answered or the slot is older than
// maxLate (maxLate + the lease on the lease strategy); a won run finishes
// at once.
type failoverLoad struct {
	backends []claim.Backend
	jobs     []string
	lease    bool

	mu        sync.Mutex
	answers   []fanswer
	slots     int // slots claimed (of every job)
	abandoned int
	wg        sync.WaitGroup
}

// run claims every whole second from now until ctx is done, and then
// waits for the claims and finishes in flight.
func (l *failoverLoad) run(ctx context.Context) {
	slot := time.Now().Truncate(time.Second).Add(time.Second)
	for {
		select {
		case <-ctx.Done():
			l.wg.Wait()
			return
		case <-time.After(time.Until(slot)):
		}
		l.mu.Lock()
		l.slots++
		l.mu.Unlock()
		for i := range l.backends {
			for _, job := range l.jobs {
				s := slot
				l.wg.Go(func() { l.claimSlot(i, job, s) })
			}
		}
		slot = slot.Add(time.Second)
	}
}

// claimSlot is one instance's claim of (job, slot), re-sent until
// answered or given up.
func (l *failoverLoad) claimSlot(inst int, job string, slot time.Time) {
	b := l.backends[inst]
	giveUp := failoverMaxLate
	if l.lease {
		giveUp += failoverLease
	}
	req := claim.Request{Job: job, Slot: slot.UnixMilli(), Token: claim.NewToken(), Instance: fmt.Sprintf("i%d", inst),
		MaxLate: failoverMaxLate, Lease: failoverLease, MaxAttempts: 3, Overlap: claim.OverlapAllow}
	backoff := 100 * time.Millisecond
	for {
		req.Now = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		res, err := b.Claim(ctx, req)
		cancel()
		if err == nil {
			l.mu.Lock()
			l.answers = append(l.answers, fanswer{job: job, slot: req.Slot, token: req.Token, outcome: res.Outcome,
				attempt: res.Attempt, at: time.Now(), instance: inst})
			l.mu.Unlock()
			if res.Outcome == claim.Won {
				l.finish(b, req.Fence(res.Attempt))
			}
			return
		}
		if time.Since(slot) > giveUp {
			l.mu.Lock()
			l.abandoned++
			l.mu.Unlock()
			return
		}
		time.Sleep(backoff/2 + rand.N(backoff/2+1))
		backoff = min(2*backoff, 2*time.Second)
	}
}

// finish records a won run's result, re-sent until it lands or is fenced.
func (l *failoverLoad) finish(b claim.Backend, f claim.Fence) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := b.Finish(ctx, f, claim.Finish{Status: claim.StatusSucceeded, StartedAt: time.Now(), FinishedAt: time.Now()})
		cancel()
		if err == nil || errors.Is(err, claim.ErrFenced) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// failoverReport is what a failover did to the jobs.
type failoverReport struct {
	runs, twice, lost int
	// resume is, for the dead master's jobs, the latest first win after
	// the kill, from the promotion; outage the longest time between two
	// won claims of one of them.
	resume, outage time.Duration
	// otherPause is, for the other jobs, the longest time between two won
	// claims, less the jobs' period.
	otherPause time.Duration
}

func (r failoverReport) String() string {
	return fmt.Sprintf("runs %d, twice %d, lost %d; dead master's jobs: back %v after the promotion, longest gap %v; other jobs: longest pause %v",
		r.runs, r.twice, r.lost, r.resume.Round(time.Millisecond), r.outage.Round(time.Millisecond), r.otherPause.Round(time.Millisecond))
}

// report reads the answers of a load that killed a master at kill, whose
// replica reported itself master at promoted; dead holds the jobs of the
// killed master.
func (l *failoverLoad) report(kill, promoted time.Time, dead map[string]bool) failoverReport {
	var r failoverReport
	type key struct {
		job  string
		slot int64
	}
	winners := map[key]map[claim.Token]bool{}
	wins := map[string][]time.Time{}
	for _, a := range l.answers {
		if a.outcome != claim.Won {
			continue
		}
		k := key{a.job, a.slot}
		if winners[k] == nil {
			winners[k] = map[claim.Token]bool{}
		}
		winners[k][a.token] = true
		wins[a.job] = append(wins[a.job], a.at)
	}
	for _, w := range winners {
		r.runs++
		r.twice += len(w) - 1
	}
	r.lost = l.slots*len(l.jobs) - len(winners)
	for _, job := range l.jobs {
		ts := wins[job]
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		gap := maxGap(ts, kill.Add(-1500*time.Millisecond))
		if !dead[job] {
			r.otherPause = max(r.otherPause, gap-time.Second)
			continue
		}
		r.outage = max(r.outage, gap)
		// The first win answered after the kill (a reply already on its
		// way when the master died is not one).
		i, _ := slices.BinarySearchFunc(ts, kill.Add(200*time.Millisecond), func(a, b time.Time) int { return a.Compare(b) })
		if i == len(ts) {
			r.resume = time.Hour // never back
			continue
		}
		r.resume = max(r.resume, ts[i].Sub(promoted))
	}
	return r
}

// maxGap is the longest time between two consecutive times of ts from
// the last one before from on.
func maxGap(ts []time.Time, from time.Time) time.Duration {
	var gap time.Duration
	for i := 1; i < len(ts); i++ {
		if ts[i].After(from) {
			gap = max(gap, ts[i].Sub(ts[i-1]))
		}
	}
	return gap
}

// check fails t on a run twice or a bound broken, and logs the figures.
func (r failoverReport) check(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: %s", what, r)
	if r.twice > 0 {
		t.Errorf("%s: %d runs were won twice", what, r.twice)
	}
	if r.resume > failoverResume {
		t.Errorf("%s: the dead master's jobs came back %v after the replica's promotion, want at most %v", what, r.resume, failoverResume)
	}
	if r.otherPause > otherPause {
		t.Errorf("%s: a job of another master paused %v, want at most %v", what, r.otherPause, otherPause)
	}
}
