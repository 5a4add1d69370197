package daemon

import (
	"context"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/cluster"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/metrics"
)

// startCluster starts the instance's heartbeat (docs/spec.md#s6-cluster)
// when the store keeps instance records: it refuses a name another live
// instance holds, writes the first beat and reads the records before the
// first slot. nil (and no error) when the store keeps none.
func startCluster(ctx context.Context, cfg *config.Config, b claim.Backend, o Options, m *metrics.Metrics, log *zap.Logger) (*cluster.Beater, error) {
	reg, ok := b.(claim.Registry)
	if !ok {
		_, why := claim.RegistryOf(b, cfg.Backend.Type)
		log.Info(why.Error() + "; the cluster view, crontab drift detection and the check of duplicate instance names are off")
		return nil, nil
	}
	host, _ := os.Hostname()
	bt := cluster.NewBeater(cluster.Options{
		Registry: reg, Clock: o.Clock, Log: log, Hooks: m.ClusterHooks(),
		Self: claim.Instance{
			Name: cfg.Instance, Host: host, PID: os.Getpid(), Version: o.Version, Tags: cfg.Tags,
			StartedAt: o.Clock.Now(), Retain: cfg.Backend.Retention,
		},
	}, cfg.Jobs)
	if err := bt.Start(ctx); err != nil {
		return nil, err
	}
	return bt, nil
}

// drifting is bt's Drifting, or nil without a heartbeat.
func drifting(bt *cluster.Beater) func(string) bool {
	if bt == nil {
		return nil
	}
	return bt.Drifting
}

// exitWait bounds, together, what the daemon does once the scheduler has
// settled the stop (docs/spec.md#s4-stop): the cluster record's last write
// (leave) and the store client's close. A store gone silent must not
// lengthen the stop past its bound; what is still under way then is ended
// by the process's exit.
const exitWait = 2 * time.Second

// leaveWait bounds how long the stop waits for the record's last write,
// within exitWait.
const leaveWait = time.Second

// leave marks this instance's record gone (cluster.Beater.Leave), waiting
// for it leaveWait at most: some store clients bound a call by their own
// timeouts rather than the context's, and a store gone silent must not
// lengthen the stop. A write still under way is ended by the store's
// close.
func leave(ctx context.Context, bt *cluster.Beater) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveWait)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		bt.Leave(lctx)
	}()
	select {
	case <-done:
	case <-lctx.Done():
	}
}

// closeStore closes b, waiting until exitBy at most (exitWait from now
// when exitBy is zero: the daemon is leaving before its scheduler ran).
// The client of a store gone silent may wait for replies that never come;
// its connections are then left to the process's exit.
func closeStore(b claim.Backend, exitBy time.Time, log *zap.Logger) {
	if exitBy.IsZero() {
		exitBy = time.Now().Add(exitWait)
	}
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	t := time.NewTimer(time.Until(exitBy))
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Warn("store client closed with an error", zap.Error(err))
		}
	case <-t.C:
		log.Warn("store client not closed within the exit's wait; its connections end with the process",
			zap.Duration("wait", exitWait))
	}
}
