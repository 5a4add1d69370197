package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/anarchon/anarchon/test/chaos/check"
)

// The fault schedule.
const (
	minGap, maxGap = 2 * time.Second, 5 * time.Second // between two faults
	// storeRestartEvery: at most one store restart per this long; the
	// first may come storeRestartFirst into the run.
	storeRestartEvery = 60 * time.Second
	storeRestartFirst = 8 * time.Second
)

// faultLog appends faults to faults.jsonl and prints one progress line per
// fault to stderr.
type faultLog struct {
	f       *os.File
	enc     *json.Encoder
	backend string
	t0      time.Time
}

func openFaultLog(path, backend string) (*faultLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fault log: %w", err)
	}
	return &faultLog{f: f, enc: json.NewEncoder(f), backend: backend, t0: time.Now()}, nil
}

// add records a fault, stamped now: call it just before applying the fault.
func (l *faultLog) add(kind check.FaultKind, inst int, skewMs int64, detail string) int64 {
	now := time.Now()
	f := check.Fault{AtMs: now.UnixMilli(), Kind: kind, Instance: inst, SkewMs: skewMs, Detail: detail}
	if err := l.enc.Encode(f); err != nil {
		progress(l.backend, "cannot write the fault log: %v", err)
	}
	who := "store"
	if inst >= 0 {
		who = instanceName(inst)
	}
	switch kind {
	case check.FaultSkew:
		detail = fmt.Sprintf("%+d ms", skewMs)
	case check.FaultQuiesce, check.FaultOverload, check.FaultOverloadEnd:
		who = "all"
	}
	progress(l.backend, "+%5.1fs %-13s %-8s %s", now.Sub(l.t0).Seconds(), kind, who, detail)
	return f.AtMs
}

func (l *faultLog) close() error { return l.f.Close() }

// progress prints one line to stderr.
func progress(backend, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "chaos %s: %s\n", backend, fmt.Sprintf(format, args...))
}

// chaos injects faults into the instances and the store of one run, on a
// schedule drawn from rng. It runs on one goroutine: a fault's end (a
// restart, a SIGCONT, a heal) is a pending action that the loop runs when
// it is due, so that what the harness believes of each instance is never
// raced.
type chaos struct {
	rng     *rand.Rand
	st      *store
	insts   []*instance
	log     *faultLog
	exits   <-chan int // instances that exited on their own
	pending []pending  // sorted by at
	// lastRestart is when the store was last restarted (or as if).
	lastRestart time.Time
	// notes are the surprises of the run (a daemon that exited on its own).
	notes []string
	// ov is the overload fault's busy loops.
	ov *overload
	// quiescing: the faults are ending; a planned overload does not start.
	quiescing bool
}

// pending is the end of a fault, due at at.
type pending struct {
	at time.Time
	do func() error
}

func (c *chaos) schedule(after time.Duration, do func() error) {
	c.pending = append(c.pending, pending{time.Now().Add(after), do})
	slices.SortStableFunc(c.pending, func(a, b pending) int { return a.at.Compare(b.at) })
}

// between returns a random duration in [lo, hi].
func (c *chaos) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)+1))
}

// run injects faults until until, one every 2–5 s, and runs the pending
// ends of faults as they fall due.
func (c *chaos) run(ctx context.Context, until time.Time) error {
	c.lastRestart = time.Now().Add(storeRestartFirst - storeRestartEvery)
	// One overload in the first half of every run, at a seeded moment;
	// more may come from the mix.
	c.planOverload(c.between(minGap, max(minGap, time.Until(until)/2-burstEvery)))
	next := time.Now().Add(c.between(minGap, maxGap))
	for {
		wake := next
		if len(c.pending) > 0 && c.pending[0].at.Before(wake) {
			wake = c.pending[0].at
		}
		if until.Before(wake) {
			wake = until
		}
		timer := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case i := <-c.exits:
			timer.Stop()
			if err := c.exited(i); err != nil {
				return err
			}
			continue
		case <-timer.C:
		}
		now := time.Now()
		if !now.Before(until) {
			return nil
		}
		for len(c.pending) > 0 && !c.pending[0].at.After(now) {
			p := c.pending[0]
			c.pending = c.pending[1:]
			if err := p.do(); err != nil {
				return err
			}
		}
		if !now.Before(next) {
			if err := c.inject(ctx); err != nil {
				return err
			}
			next = time.Now().Add(c.between(minGap, maxGap))
		}
	}
}

// exited handles a daemon that exited without being told to: a daemon bug
// (or a store it could not use). It is noted and restarted a second later.
func (c *chaos) exited(i int) error {
	in := c.insts[i]
	if in.state == instKilled {
		return nil
	}
	note := fmt.Sprintf("%s exited on its own: %v (see %s)", in.name, in.proc.cmd.ProcessState, in.logPath)
	progress(c.log.backend, "UNEXPECTED: %s", note)
	c.notes = append(c.notes, note)
	in.state = instKilled
	c.schedule(time.Second, func() error { return c.start(in) })
	return nil
}

// start (re)starts an instance and logs it.
func (c *chaos) start(in *instance) error {
	if in.state != instKilled {
		return nil
	}
	c.log.add(check.FaultStart, in.idx, 0, "")
	return in.start()
}

// targets are the healthy instances that may be taken down while another
// instance stays healthy.
func (c *chaos) targets() []*instance {
	var healthy []*instance
	for _, in := range c.insts {
		if in.healthy() {
			healthy = append(healthy, in)
		}
	}
	if len(healthy) < 2 {
		return nil
	}
	return healthy
}

// candidate is a fault the run may inject now.
type candidate struct {
	weight int
	apply  func(ctx context.Context) error
}

// inject picks one fault among those allowed now and applies it.
func (c *chaos) inject(ctx context.Context) error {
	var cands []candidate
	if t := c.targets(); len(t) > 0 {
		cands = append(cands,
			candidate{3, func(ctx context.Context) error { return c.kill(ctx, t) }},
			candidate{2, func(context.Context) error { return c.pause(t) }})
		if c.st.network() {
			cands = append(cands,
				candidate{1, func(context.Context) error { return c.netFault(t, "cut") }},
				candidate{1, func(context.Context) error { return c.netFault(t, "blackhole") }})
		}
	}
	if c.st.network() {
		var quiet []*instance
		for _, in := range c.insts {
			if in.state == instUp && in.netFault == "" {
				quiet = append(quiet, in)
			}
		}
		if len(quiet) > 0 {
			cands = append(cands, candidate{1, func(context.Context) error { return c.latency(quiet) }})
		}
	}
	cands = append(cands, candidate{2, func(context.Context) error { return c.skew() }})
	if !c.ov.planned {
		cands = append(cands, candidate{1, func(context.Context) error { c.planOverload(0); return nil }})
	}
	if c.st.canRestart() && time.Since(c.lastRestart) >= storeRestartEvery && c.anyHealthy() {
		cands = append(cands, candidate{6, c.restartStore})
	}
	total := 0
	for _, cd := range cands {
		total += cd.weight
	}
	n := c.rng.IntN(total)
	for _, cd := range cands {
		if n -= cd.weight; n < 0 {
			return cd.apply(ctx)
		}
	}
	return nil
}

func (c *chaos) anyHealthy() bool {
	return slices.ContainsFunc(c.insts, (*instance).healthy)
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// kill SIGKILLs one of targets and restarts it 0.5–3 s later. The moment
// is one of: a slot boundary of the victim's clock + 0–20 ms (its claims
// in flight), while one of its jobs runs, or now.
func (c *chaos) kill(ctx context.Context, targets []*instance) error {
	in := pick(c.rng, targets)
	mode := "now"
	switch r := c.rng.IntN(10); {
	case r < 4:
		mode = "slot boundary"
		// Every job fires on whole seconds of the victim's own clock.
		skew := time.Duration(in.skewMs) * time.Millisecond
		own := time.Now().Add(skew)
		at := own.Truncate(time.Second).Add(time.Second).Add(-skew).Add(c.between(0, 20*time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(at)):
		}
	case r < 8:
		var busy []*instance
		for _, t := range targets {
			if t.journal.running(time.Now()) > 0 {
				busy = append(busy, t)
			}
		}
		if len(busy) > 0 {
			in, mode = pick(c.rng, busy), "mid-job"
		}
	}
	c.log.add(check.FaultKill, in.idx, 0, mode)
	if err := in.kill(); err != nil {
		return err
	}
	c.schedule(c.between(500*time.Millisecond, 3*time.Second), func() error { return c.start(in) })
	return nil
}

// pause SIGSTOPs one of targets for 0.5–1.5 s (shorter than the lease) or
// 4–6 s (longer), then SIGCONTs it.
func (c *chaos) pause(targets []*instance) error {
	in := pick(c.rng, targets)
	d := c.between(500*time.Millisecond, 1500*time.Millisecond)
	if c.rng.IntN(2) == 0 {
		d = c.between(4*time.Second, 6*time.Second)
	}
	detail := fmt.Sprintf("pause %dms", d.Milliseconds())
	c.log.add(check.FaultStop, in.idx, 0, detail)
	if err := in.pause(); err != nil {
		return err
	}
	c.schedule(d, func() error {
		if in.state != instStopped {
			return nil
		}
		c.log.add(check.FaultCont, in.idx, 0, detail)
		return in.resume()
	})
	return nil
}

// netFault cuts or blackholes the store connection of one of targets for
// 1–6 s, then heals it.
func (c *chaos) netFault(targets []*instance, fault string) error {
	in := pick(c.rng, targets)
	d := c.between(time.Second, 6*time.Second)
	kind := check.FaultCut
	if fault == "blackhole" {
		kind = check.FaultBlackhole
	}
	c.log.add(kind, in.idx, 0, fmt.Sprintf("%s %dms", fault, d.Milliseconds()))
	in.setNet(fault, 0)
	c.schedule(d, func() error { return c.heal(in) })
	return nil
}

// latency delays one instance's store traffic by 50–400 ms for 2–5 s.
func (c *chaos) latency(quiet []*instance) error {
	in := pick(c.rng, quiet)
	lat := c.between(50*time.Millisecond, 400*time.Millisecond).Round(time.Millisecond)
	d := c.between(2*time.Second, 5*time.Second)
	c.log.add(check.FaultLatency, in.idx, 0, fmt.Sprintf("latency %dms for %dms", lat.Milliseconds(), d.Milliseconds()))
	in.setNet("latency", lat)
	c.schedule(d, func() error { return c.heal(in) })
	return nil
}

func (c *chaos) heal(in *instance) error {
	if in.netFault == "" {
		return nil
	}
	c.log.add(check.FaultHeal, in.idx, 0, "")
	in.setNet("", 0)
	return nil
}

// skew sets one instance's clock offset to a random value in ±1.5 s, or
// back to 0 (one time in four).
func (c *chaos) skew() error {
	in := pick(c.rng, c.insts)
	var ms int64
	if c.rng.IntN(4) != 0 {
		ms = c.rng.Int64N(3001) - 1500
	}
	c.log.add(check.FaultSkew, in.idx, ms, "")
	return in.setSkew(ms)
}

// restartStore restarts the store: stopped gracefully, started again,
// awaited until it answers.
func (c *chaos) restartStore(ctx context.Context) error {
	c.lastRestart = time.Now()
	err := c.st.restart(ctx,
		func() { c.log.add(check.FaultStoreDown, -1, 0, c.st.Name) },
		func() { c.log.add(check.FaultStoreUp, -1, 0, c.st.Name) })
	if err != nil {
		return fmt.Errorf("store restart: %w", err)
	}
	return nil
}

// quiesce ends the faults: it logs "quiesce" (the run's EndMs), ends every
// pending fault at once (restarts, SIGCONTs, heals), sets every clock
// back to 0 and waits until every daemon is scheduling again.
func (c *chaos) quiesce(ctx context.Context) (int64, error) {
	endMs := c.log.add(check.FaultQuiesce, -1, 0, "")
	c.quiescing = true
	// Daemons that exited on their own and were not handled yet.
	for drained := false; !drained; {
		select {
		case i := <-c.exits:
			if err := c.exited(i); err != nil {
				return endMs, err
			}
		default:
			drained = true
		}
	}
	for _, p := range c.pending {
		if err := p.do(); err != nil {
			return endMs, err
		}
	}
	c.pending = nil
	for _, in := range c.insts {
		if in.skewMs != 0 {
			c.log.add(check.FaultSkew, in.idx, 0, "")
			if err := in.setSkew(0); err != nil {
				return endMs, err
			}
		}
	}
	for _, in := range c.insts {
		if err := in.waitReady(ctx, 30*time.Second); err != nil {
			return endMs, err
		}
	}
	return endMs, nil
}
