// Package daemon assembles anarchond's run: the store, the runner, the
// scheduler, and the signals that stop and reload them.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/scheduler"
)

// Options are what the daemon needs besides the config.
type Options struct {
	Log   *zap.Logger
	Clock clock.Clock
	// Supervisor is the argv prefix of the job's supervising parent.
	Supervisor []string
	// Environ is the environment handed to jobs.
	Environ []string
	// Reload loads the crontab again (on SIGHUP); it returns *config.Errors
	// for an invalid file.
	Reload func() (*config.Config, error)
}

// Run runs the daemon until SIGTERM or SIGINT (or ctx), then stops
// gracefully (SPEC §4).
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	log := o.Log
	b, err := openStore(ctx, cfg, o.Clock, log)
	if err != nil {
		return err
	}
	defer b.Close()

	r := &runner.Runner{
		Backend: b, Clock: o.Clock, Log: log, Instance: cfg.Instance,
		Supervisor: o.Supervisor, BaseEnv: o.Environ,
	}
	s, err := scheduler.New(scheduler.Options{
		Backend: b, Clock: o.Clock, Log: log, Instance: cfg.Instance, Executor: r,
		ShutdownGrace: cfg.ShutdownGrace, Retention: cfg.Backend.Retention,
	}, cfg.Jobs)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOnHUP(ctx, hup, cfg, s, o.Reload, log)

	log.Info("anarchond started", zap.String("instance", cfg.Instance), zap.String("backend", cfg.Backend.Type),
		zap.Int("jobs", len(cfg.Jobs)), zap.String("config", cfg.File))
	err = s.Run(ctx)
	log.Info("anarchond stopped")
	return err
}

// openStore opens the backend. A store reached over the network that does
// not answer at start is retried with backoff (1 s doubling to 30 s) until
// it answers or ctx ends: a daemon started before its store (at boot, or
// during the store's restart) waits for it instead of failing in a loop.
// The first failure is logged at warn, then every tenth (about every five
// minutes at the longest backoff), the others at debug. SQLite, a local
// file, fails at once: a path that cannot be opened will not heal.
func openStore(ctx context.Context, cfg *config.Config, clk clock.Clock, log *zap.Logger) (claim.Backend, error) {
	p := claim.OpenParams{Config: cfg, Log: log, Clock: clk}
	backoff, attempts := time.Second, 0
	for {
		b, err := claim.Open(ctx, p)
		if err == nil {
			if attempts > 0 {
				log.Info("store reachable", zap.String("backend", cfg.Backend.Type), zap.Int("attempts", attempts+1))
			}
			return b, nil
		}
		if cfg.Backend.Type == "sqlite" || ctx.Err() != nil {
			return nil, err
		}
		attempts++
		switch {
		case attempts == 1:
			log.Warn("store unavailable at start; retrying", zap.String("backend", cfg.Backend.Type),
				zap.Error(err), zap.Duration("next", backoff))
		case attempts%10 == 0:
			log.Warn("store still unavailable", zap.Int("attempts", attempts), zap.Error(err), zap.Duration("next", backoff))
		default:
			log.Debug("store still unavailable", zap.Int("attempts", attempts), zap.Error(err), zap.Duration("next", backoff))
		}
		if clock.Sleep(ctx, clk, backoff) != nil {
			return nil, fmt.Errorf("stopped while waiting for the store: %w", err)
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// reloadOnHUP loads the crontab again on each SIGHUP. A valid file replaces
// the jobs; an invalid one is logged with every problem and the old crontab
// keeps running. Changes outside jobs (backend, instance) need a restart.
func reloadOnHUP(ctx context.Context, hup <-chan os.Signal, cur *config.Config, s *scheduler.Scheduler, load func() (*config.Config, error), log *zap.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		if load == nil {
			continue
		}
		next, err := load()
		if err != nil {
			var errs config.Errors
			if errors.As(err, &errs) {
				for _, e := range errs {
					log.Error("reload refused: the old crontab keeps running", zap.String("problem", e.Error()))
				}
			} else {
				log.Error("reload refused: the old crontab keeps running", zap.Error(err))
			}
			continue
		}
		if !reflect.DeepEqual(next.Backend, cur.Backend) {
			log.Warn("reload: backend changes take effect after a restart; jobs are reloaded")
		}
		if err := s.Reload(ctx, next.Jobs); err != nil {
			log.Error("reload refused: the old crontab keeps running", zap.Error(err))
			continue
		}
		cur = next
	}
}
