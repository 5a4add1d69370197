package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
)

// Interval is how often the daemon writes its heartbeat record and reads
// the others'. A record is alive for AliveBeats intervals after its beat:
// an instance is judged gone 15 s after its last beat, and a drift is
// seen within one interval of the beat that shows it.
const Interval = 5 * time.Second

// AliveBeats is how many intervals a record stays alive without a beat.
const AliveBeats = 3

// Hooks observe the heartbeat (metrics). Every field may be nil.
type Hooks struct {
	// Drift is called when the live instances begin (true) or end (false)
	// to define job differently.
	Drift func(job string, drifting bool)
	// Outdated is called with how many live instances run a version older
	// than the newest live one, when it changes.
	Outdated func(n int)
	// StoreError and StoreOK are called with every failed and answered
	// beat (op "beat") and read (op "instances").
	StoreError func(op string, err error)
	StoreOK    func(op string)
}

// Options configure a Beater.
type Options struct {
	Registry claim.Registry
	Clock    clock.Clock
	Log      *zap.Logger
	Hooks    Hooks
	// Self is this instance's record: name, host, pid, version, tags,
	// started and retention (its jobs are SetJobs').
	Self claim.Instance
	// Interval between beats (default Interval).
	Interval time.Duration
}

// Beater writes this instance's heartbeat record every Interval and keeps
// the view of every record, off the claims' path.
type Beater struct {
	o Options

	mu       sync.RWMutex
	self     claim.Instance
	view     View
	drifting map[string]bool

	// Only the beat loop touches these.
	reported map[string]string // job -> the drift last logged
	outdated map[string]string // instance -> the version last logged outdated
	nOut     int
	// failing: the last beat or read failed; inFlight: a beat is under
	// way. Leave reads both from another goroutine.
	failing  atomic.Bool
	inFlight atomic.Bool
}

// NewBeater returns a beater for jobs.
func NewBeater(o Options, jobs []config.Job) *Beater {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Interval <= 0 {
		o.Interval = Interval
	}
	b := &Beater{o: o, self: o.Self, drifting: map[string]bool{}, reported: map[string]string{}, outdated: map[string]string{}}
	b.SetJobs(jobs)
	return b
}

// SetJobs replaces the jobs the record describes (a reload); the next beat
// publishes them.
func (b *Beater) SetJobs(jobs []config.Job) {
	h, all := JobHashes(jobs)
	b.mu.Lock()
	b.self.Jobs, b.self.JobsHash = h, all
	b.mu.Unlock()
}

// Drifting reports whether the live instances define job differently, as
// last read.
func (b *Beater) Drifting(job string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.drifting[job]
}

// View is the last analysis of the records.
func (b *Beater) View() View {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.view
}

// Start checks that no other live instance has this one's name, then
// beats once and reads the records, before the first slot: a store that
// does not answer within a beat's timeout is logged and left to the loop.
// It returns an error only for a name taken (docs/spec.md#s6-cluster).
func (b *Beater) Start(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, b.o.Interval)
	recs, now, err := b.o.Registry.Instances(cctx)
	cancel()
	if err != nil {
		// Not answered within a beat's timeout: the check is skipped, and
		// the first beat left to the loop, so that the start waits no
		// longer.
		b.failing.Store(true)
		b.o.Log.Warn("cannot read the instances' heartbeat records at start; the check of a duplicate instance name is skipped, and the beats retry", zap.Error(err))
		return nil
	}
	if now.IsZero() {
		now = b.o.Clock.Now()
	}
	b.mu.RLock()
	self := b.self
	b.mu.RUnlock()
	if err := CheckName(recs, self, now, ProcessAlive); err != nil {
		return err
	}
	b.beat(ctx)
	return nil
}

// Run beats every Interval until ctx ends.
func (b *Beater) Run(ctx context.Context) {
	for clock.Sleep(ctx, b.o.Clock, b.o.Interval) == nil {
		b.beat(ctx)
	}
}

// beat writes the record, reads them all and reports what changed. A
// failure keeps the last view: it is logged once, and the recovery.
func (b *Beater) beat(ctx context.Context) {
	b.inFlight.Store(true)
	defer b.inFlight.Store(false)
	cctx, cancel := context.WithTimeout(ctx, b.o.Interval)
	defer cancel()
	b.mu.RLock()
	self := b.self
	b.mu.RUnlock()
	self.LastSeen = b.o.Clock.Now()
	_, err := b.o.Registry.Beat(cctx, self, AliveBeats*b.o.Interval)
	op := "beat"
	var (
		recs []claim.Instance
		now  time.Time
	)
	if err == nil {
		b.storeOK(op)
		op = "instances"
		recs, now, err = b.o.Registry.Instances(cctx)
	}
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		if b.o.Hooks.StoreError != nil {
			b.o.Hooks.StoreError(op, err)
		}
		if !b.failing.Swap(true) {
			b.o.Log.Warn("cannot write or read the instances' heartbeat records; the cluster view and drift detection keep the last ones until the store answers", zap.String("op", op), zap.Error(err))
		}
		return
	}
	b.storeOK(op)
	if b.failing.Swap(false) {
		b.o.Log.Info("wrote and read the instances' heartbeat records again")
	}
	if now.IsZero() {
		now = b.o.Clock.Now()
	}
	b.checkTwin(recs, self)
	b.update(Analyze(recs, now))
}

// checkTwin logs an error when the record of this instance's name, read
// just after this instance wrote it, is another process's: two live
// daemons share the name (docs/spec.md#s6-cluster).
func (b *Beater) checkTwin(recs []claim.Instance, self claim.Instance) {
	for _, r := range recs {
		if r.Name == self.Name && (r.Host != self.Host || r.PID != self.PID) {
			b.o.Log.Error("another live instance writes its heartbeat under this instance's name; set instance (or ANARCHON_INSTANCE) to a name of its own on each",
				zap.String("instance", self.Name), zap.String("other_host", r.Host), zap.Int("other_pid", r.PID),
				zap.String("host", self.Host), zap.Int("pid", self.PID))
		}
	}
}

func (b *Beater) storeOK(op string) {
	if b.o.Hooks.StoreOK != nil {
		b.o.Hooks.StoreOK(op)
	}
}

// update keeps v and logs and reports each drift and outdated instance
// once when it begins or changes, and once when it ends.
func (b *Beater) update(v View) {
	drifting := make(map[string]bool, len(v.Drift))
	for _, d := range v.Drift {
		drifting[d.Job] = true
	}
	b.mu.Lock()
	b.view, b.drifting = v, drifting
	b.mu.Unlock()
	seen := map[string]bool{}
	for _, d := range v.Drift {
		seen[d.Job] = true
		desc := Describe(d)
		if b.reported[d.Job] == desc {
			continue
		}
		if _, was := b.reported[d.Job]; !was && b.o.Hooks.Drift != nil {
			b.o.Hooks.Drift(d.Job, true)
		}
		b.reported[d.Job] = desc
		b.o.Log.Warn("crontab drift: the live instances define this job differently (each runs its own definition; onDrift: pause stops it on all of them until they agree)",
			zap.String("job", d.Job), zap.Strings("fields", d.Fields), zap.String("instances", desc))
	}
	for job := range b.reported {
		if seen[job] {
			continue
		}
		delete(b.reported, job)
		b.o.Log.Info("crontab drift over: the live instances define this job alike again", zap.String("job", job))
		if b.o.Hooks.Drift != nil {
			b.o.Hooks.Drift(job, false)
		}
	}
	b.reportVersions(v)
}

// reportVersions logs each live instance running an older version than
// the newest, once per version, and reports how many there are.
func (b *Beater) reportVersions(v View) {
	n, now := 0, map[string]string{}
	for _, m := range v.Members {
		if !m.Outdated {
			continue
		}
		n++
		now[m.Name] = m.Version
		if b.outdated[m.Name] != m.Version {
			b.o.Log.Warn("version drift: an instance runs an older version than the newest live one",
				zap.String("instance", m.Name), zap.String("host", m.Host), zap.String("version", m.Version), zap.String("newest", v.Newest))
		}
	}
	for name := range b.outdated {
		if _, still := now[name]; !still {
			b.o.Log.Info("version drift over: the instance runs the newest version, or is gone", zap.String("instance", name))
		}
	}
	b.outdated = now
	if n != b.nOut && b.o.Hooks.Outdated != nil {
		b.o.Hooks.Outdated(n)
	}
	b.nOut = n
}

// Describe says which instances hold which definition of d's job:
// "a, b: 1a2b3c4.…; c: 5d6e7f8.…; missing on d".
func Describe(d JobDrift) string {
	parts := make([]string, 0, len(d.Variants)+1)
	for _, v := range d.Variants {
		parts = append(parts, strings.Join(v.Instances, ", ")+": "+shortHash(v.Hash))
	}
	if len(d.Missing) > 0 {
		parts = append(parts, "not defined on "+strings.Join(d.Missing, ", "))
	}
	return strings.Join(parts, "; ")
}

func shortHash(h string) string {
	if len(h) > 15 {
		return h[:15] + "..."
	}
	return h
}

// CheckName refuses self's name when another live record holds it: on
// another host, or on this host under a process that still runs
// (processAlive). A live record of this host whose process is gone is
// this instance's own, before a restart, and is taken over.
func CheckName(recs []claim.Instance, self claim.Instance, now time.Time, processAlive func(pid int) bool) error {
	for _, r := range recs {
		if r.Name != self.Name || !r.Alive(now) {
			continue
		}
		seen := now.Sub(r.LastSeen).Round(time.Millisecond)
		if r.Host != self.Host {
			return fmt.Errorf("instance name %q is taken: a live instance on host %s (pid %d, last beat %s ago) has it, and this is host %s; "+
				"two instances with one name would take each other's runs for their own: set instance (or ANARCHON_INSTANCE) to a name of its own on one of them",
				self.Name, r.Host, r.PID, seen, self.Host)
		}
		if r.PID != self.PID && processAlive(r.PID) {
			return fmt.Errorf("instance name %q is taken: another daemon on this host (%s, pid %d, last beat %s ago) runs under it, likely with the same crontab; "+
				"stop it, or set instance (or ANARCHON_INSTANCE) to a name of its own for each",
				self.Name, r.Host, r.PID, seen)
		}
	}
	return nil
}

// ProcessAlive reports whether a process pid runs on this host (one this
// process may not signal counts).
func ProcessAlive(pid int) bool {
	if pid <= 0 || pid == os.Getpid() {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Leave writes the record one last time, expired at once, so that the
// cluster view shows the stopped instance gone at once rather than after
// its ttl; bounded by ctx, and a failure is left to the ttl. After a failed
// beat, or while a beat is still under way, it writes nothing: the store
// did not answer (or not yet), and the stop must not wait for it.
func (b *Beater) Leave(ctx context.Context) {
	if b.failing.Load() || b.inFlight.Load() {
		return
	}
	b.mu.RLock()
	self := b.self
	b.mu.RUnlock()
	self.LastSeen = b.o.Clock.Now()
	if _, err := b.o.Registry.Beat(ctx, self, 0); err != nil {
		b.o.Log.Debug("could not mark this instance's heartbeat record gone; it expires by itself", zap.Error(err))
	}
}
