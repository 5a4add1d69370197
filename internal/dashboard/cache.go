package dashboard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/status"
)

const (
	// RecentRuns is how many of the newest runs and notes, of every job,
	// one read keeps: the page's runs and /api/v1/status come from them.
	RecentRuns = 500
	// StripSlots is how many of each job's last slots its strip shows; one
	// read keeps as many of its newest runs and notes.
	StripSlots = 40
	// readers bounds the dashboard's reads in flight: it takes at most two
	// of the store's connections (SQLite keeps 8 per daemon), leaving the
	// others to the claims.
	readers = 2
	// readTimeout bounds one read of the store.
	readTimeout = 10 * time.Second
)

// errNoStore is the answer before the store is open.
var errNoStore = errors.New("the store is not open yet")

// snapshot is one read of the store, shared by every request until the
// next: what the page and the API show.
type snapshot struct {
	cfg *config.Config // the crontab it was read with
	at  time.Time      // when the read began, by this host's clock
	// err is the last read's failure; the data are then the read before
	// it (okAt), if any.
	err  error
	okAt time.Time

	jobs        []status.Job // with Recent: the newest StripSlots
	controlNote string       // the store keeps no control records
	runs        []claim.Run  // the newest RecentRuns, marked (abandoned)
	liveness    status.Liveness

	instances    []claim.Instance
	storeNow     time.Time
	noInstances  bool // the store keeps no instance records
	instancesErr error
}

// snapshotFor returns the last read, starting a new one when it is older
// than the refresh interval and none is in flight. Only the first request
// waits (for the first read, or until ctx ends); the others get the last
// read at once and the next request sees the new one.
func (d *Dashboard) snapshotFor(ctx context.Context) (*snapshot, error) {
	d.mu.Lock()
	if d.b == nil {
		d.mu.Unlock()
		return nil, errNoStore
	}
	snap, now := d.snap, d.clock.Now()
	if d.reading == nil && (snap == nil || d.stale || now.Sub(snap.at) >= d.refresh) {
		done := make(chan struct{})
		d.reading, d.stale = done, false
		go d.read(d.cfg, d.b, now, done)
	}
	reading := d.reading
	d.mu.Unlock()
	if snap != nil {
		return snap, nil
	}
	select {
	case <-reading:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snap, nil
}

// read reads the store once and publishes the result.
func (d *Dashboard) read(cfg *config.Config, b claim.Backend, at time.Time, done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	s := &snapshot{cfg: cfg, at: at, okAt: at}
	s.err = d.fill(ctx, s, b)
	d.mu.Lock()
	if s.err != nil {
		// The page says so and shows the last read that succeeded.
		if prev := d.snap; prev != nil && !prev.okAt.IsZero() {
			keep := *prev
			keep.at, keep.err = at, s.err
			s = &keep
		} else {
			s.okAt = time.Time{}
		}
	}
	d.snap, d.reading = s, nil
	d.mu.Unlock()
	close(done)
}

// fill reads the jobs, the recent runs and the instances into s.
func (d *Dashboard) fill(ctx context.Context, s *snapshot, b claim.Backend) error {
	jobs, note, err := status.ReadJobs(ctx, s.cfg, b, s.at, StripSlots, readers)
	if err != nil {
		return err
	}
	s.jobs, s.controlNote = jobs, note
	runs, err := b.ListRuns(ctx, claim.ListQuery{Limit: RecentRuns})
	if err != nil {
		return fmt.Errorf("%s: list runs: %w", describe(s.cfg), err)
	}
	s.liveness = status.LivenessOf(ctx, b, s.cfg.Jobs, s.at, runs)
	s.runs = s.liveness.Mark(runs)
	if ctl, ok := b.(claim.Controller); ok {
		// Manual runs and retries, as status shows them.
		cs, err := ctl.Controls(ctx)
		if err != nil {
			return fmt.Errorf("%s: read the control records: %w", describe(s.cfg), err)
		}
		s.runs = status.Annotate(s.runs, cs)
	}
	// Last stays as the store holds it, as jobs prints it; the strip
	// shows the abandoned runs.
	for i := range s.jobs {
		s.jobs[i].Recent = s.liveness.Mark(s.jobs[i].Recent)
	}
	reg, ok := b.(claim.Registry)
	if !ok {
		s.noInstances = true
		return nil
	}
	s.instances, s.storeNow, s.instancesErr = reg.Instances(ctx)
	if s.instancesErr != nil {
		s.instancesErr = fmt.Errorf("%s: read the instances: %w", describe(s.cfg), s.instancesErr)
	}
	return nil
}
