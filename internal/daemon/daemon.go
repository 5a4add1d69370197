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
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/cluster"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/dashboard"
	"github.com/anarchon/anarchon/internal/metrics"
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/scheduler"
	"github.com/anarchon/anarchon/internal/supervise"
)

// Options are what the daemon needs besides the config.
type Options struct {
	Log   *zap.Logger
	Clock clock.Clock
	// Supervisor is the argv prefix of the job's supervising parent.
	Supervisor []string
	// Environ is the environment handed to jobs.
	Environ []string
	// Reload loads the crontab again (on SIGHUP, or when the file changes
	// with watch: true); it returns config.Errors for an invalid file.
	Reload func() (*config.Config, error)
	// Version is the daemon's version, published in its heartbeat record.
	Version string
}

// Run runs the daemon until SIGTERM or SIGINT (or ctx), then stops
// gracefully (docs/spec.md#s4-stop). It tells systemd (when NOTIFY_SOCKET is
// set) READY once the store answered and the crontab is scheduled, RELOADING
// and READY around a reload, STOPPING when the stop begins, and pings its
// watchdog.
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	d := &daemonRun{cfg: cfg, o: o, log: o.Log, m: metrics.New(o.Clock, cfg.Backend.Type)}
	defer d.stopServing()
	if err := d.serve(ctx); err != nil {
		return err
	}
	// Before the store: nothing is claimed while a dead daemon's jobs
	// still run.
	records, err := reapOrphans(cfg, o.Environ, d.log)
	if err != nil {
		return fmt.Errorf("%w (set stateDir to a directory the daemon can write)", err)
	}
	defer records.Close()
	notify(d.log, "STATUS=opening the store")
	if d.b, err = openStore(ctx, cfg, o.Clock, d.log); err != nil {
		return err
	}
	defer func() { closeStore(d.b, d.exitBy, d.log) }()
	d.m.StoreAnswered()
	d.dash.SetBackend(d.b)
	defer d.newRunner(records)()
	if err := d.newScheduler(ctx); err != nil {
		return err
	}
	wctx, cancelWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer d.workers.Wait()
	defer cancelWorkers()
	if err := d.startWorkers(ctx, wctx); err != nil {
		return err
	}
	d.started()
	err = d.s.Run(ctx)
	d.exitBy = time.Now().Add(exitWait)
	cancelWorkers()
	if d.beater != nil {
		leave(ctx, d.beater)
	}
	d.log.Info("anarchond stopped")
	return err
}

// daemonRun is what the steps of one Run share.
type daemonRun struct {
	cfg  *config.Config
	o    Options
	log  *zap.Logger
	m    *metrics.Metrics
	dash *dashboard.Dashboard // nil without the dashboard

	serving   sync.WaitGroup
	endServe  context.CancelFunc
	b         claim.Backend
	r         *runner.Runner
	processes string // how jobs start, for the start's log line
	beater    *cluster.Beater
	s         *scheduler.Scheduler
	workers   sync.WaitGroup
	// exitBy is when the store client's close must be over: exitWait
	// after the scheduler settled the stop (zero before).
	exitBy time.Time
}

// serve starts /metrics, /healthz, /readyz and the dashboard, when
// configured; they serve until stopServing, after the stop.
func (d *daemonRun) serve(ctx context.Context) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.endServe = cancel
	var err error
	if d.dash, err = newDashboard(d.cfg, d.o); err != nil {
		return err
	}
	if d.cfg.Metrics.Listen == "" {
		return nil
	}
	ln, err := d.m.Listen(d.cfg.Metrics.Listen)
	if err != nil {
		return err
	}
	d.log.Info("serving /metrics, /healthz and /readyz", zap.String("addr", ln.Addr().String()))
	if d.dash != nil {
		d.log.Info("serving the dashboard on / and its API on /api/v1/", zap.String("addr", ln.Addr().String()),
			zap.Bool("actions", d.dash.ActionsEnabled()))
	}
	d.serving.Go(func() {
		if err := d.m.ServeWith(sctx, ln, d.dash.Handler()); err != nil {
			d.log.Error("metrics server stopped", zap.Error(err))
		}
	})
	return nil
}

// stopServing ends what serve started and waits for it.
func (d *daemonRun) stopServing() {
	if d.endServe != nil {
		d.endServe()
	}
	d.serving.Wait()
}

// newRunner makes the runner of the jobs, with their guard when one
// starts; it returns what closes the guard.
//
// The jobs start directly, each the leader of its process group, and one
// guard process takes the groups down if the daemon dies; without a guard
// each job starts under a supervising process of its own, which costs a Go
// program's start on every job.
func (d *daemonRun) newRunner(records *runner.Records) (closeGuard func()) {
	o := d.o
	d.r = &runner.Runner{
		Backend: d.b, Clock: o.Clock, Log: d.log, Instance: d.cfg.Instance,
		Supervisor: o.Supervisor, BaseEnv: jobEnviron(o.Environ), Hooks: d.m.RunnerHooks(),
		Records: records,
	}
	d.processes = "supervisor " + strings.TrimSuffix(strings.Join(o.Supervisor, " "), " --")
	argv := guardCommand(o.Supervisor)
	if argv == nil {
		return func() {}
	}
	g, err := runner.StartGuard(argv, d.log)
	if err != nil {
		d.log.Warn("no job guard: every job starts under a supervising process of its own", zap.Error(err))
		return func() {}
	}
	d.r.Guard = g
	d.processes = "guard " + strings.Join(argv, " ")
	return func() { g.Close() }
}

// newScheduler starts the instance's heartbeat (where the store keeps
// instance records) and makes the scheduler of the jobs here.
func (d *daemonRun) newScheduler(ctx context.Context) error {
	cfg := d.cfg
	var err error
	if d.beater, err = startCluster(ctx, cfg, d.b, d.o, d.m, d.log); err != nil {
		return err
	}
	d.s, err = scheduler.New(scheduler.Options{
		Backend: d.b, Clock: d.o.Clock, Log: d.log, Instance: cfg.Instance, Executor: d.r,
		ShutdownGrace: cfg.ShutdownGrace, Retention: cfg.Backend.Retention,
		Hooks: schedulerHooks(d.m), ControlPoll: scheduler.DefaultControlPoll,
		Drifting: drifting(d.beater),
	}, cfg.JobsHere())
	if err != nil {
		return err
	}
	logNotHere(d.log, cfg)
	if _, err := claim.ControllerOf(d.b, cfg.Backend.Type); err != nil {
		d.log.Info(err.Error() + "; pause and resume refuse, every job runs")
	}
	d.m.Jobs(cfg.Jobs)
	return nil
}

// startWorkers starts what runs beside the scheduler until wctx ends: the
// reloads (SIGHUP, the file's changes), the heartbeat (until ctx, the
// stop), the store's probe, systemd's watchdog, and STOPPING at the stop.
func (d *daemonRun) startWorkers(ctx, wctx context.Context) error {
	reloads := make(chan string, 1)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	d.workers.Go(func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-wctx.Done():
				return
			case <-hup:
				trigger(reloads, "SIGHUP")
			}
		}
	})
	if d.cfg.Watch {
		if err := watchFile(wctx, &d.workers, d.cfg.File, d.o.Clock, d.log, func() { trigger(reloads, "file changed") }); err != nil {
			return err
		}
	}
	d.workers.Go(func() { reloadLoop(wctx, reloads, d.cfg, d.s, d.beater, d.o.Reload, d.m, d.dash, d.log) })
	if d.beater != nil {
		// The beats stop when the stop begins (ctx, not wctx): a beat
		// that hangs on a store gone silent must not lengthen the stop.
		d.workers.Go(func() { d.beater.Run(ctx) })
	}
	d.workers.Go(func() { probeStore(wctx, d.b, d.o.Clock, d.m, d.log) })
	d.workers.Go(func() { watchdog(wctx, d.o.Clock) })
	d.workers.Go(func() {
		select {
		case <-ctx.Done():
		case <-wctx.Done():
		}
		d.m.SetReady(false)
		notify(d.log, "STOPPING=1")
	})
	return nil
}

// started logs the start and tells systemd READY. The log line's
// processes shows how jobs start: directly, watched by the guard (the
// small anarchon-supervise, or the fallback `anarchond supervise`), or
// each under a supervisor.
func (d *daemonRun) started() {
	cfg := d.cfg
	d.log.Info("anarchond started", zap.String("instance", cfg.Instance), zap.String("backend", cfg.Backend.Type),
		zap.Int("jobs", len(cfg.Jobs)), zap.String("config", cfg.File), zap.String("processes", d.processes))
	d.m.SetReady(true)
	notify(d.log, fmt.Sprintf("READY=1\nSTATUS=scheduling %d job(s) on %s", len(cfg.Jobs), cfg.Backend.Type))
	releaseMemory()
}

// guardCommand is the job guard's argv for the supervisor prefix sup (which
// ends in "--"): the same program with supervise.GuardFlag. nil when sup is
// empty.
func guardCommand(sup []string) []string {
	sup = slices.Clone(sup)
	if n := len(sup); n > 0 && sup[n-1] == "--" {
		sup = sup[:n-1]
	}
	if len(sup) == 0 {
		return nil
	}
	return append(sup, supervise.GuardFlag)
}

// jobEnviron is the daemon's environment without what systemd handed the
// daemon alone: a job must not notify or feed systemd for it.
func jobEnviron(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		for _, p := range []string{"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID="} {
			if strings.HasPrefix(kv, p) {
				return true
			}
		}
		return false
	})
}

// trigger asks for a reload; one pending request is enough.
func trigger(reloads chan<- string, why string) {
	select {
	case reloads <- why:
	default:
	}
}

// openStore opens the backend. A store reached over the network that does
// not answer at start is retried with backoff (1 s doubling to 30 s) until
// it answers or ctx ends: a daemon started before its store (at boot, or
// during the store's restart) waits for it instead of failing in a loop.
// The first failure is logged at warn, then every tenth (about every five
// minutes at the longest backoff), the others at debug. SQLite, a local
// file (store.Driver.Local), fails at once: a path that cannot be opened
// will not heal; so does
// a store's refusal (claim.PermanentError: a missing privilege, a wrong
// password), whose message names the fix: the daemon exits with it, and
// systemd shows it, instead of waiting for a store that will not change.
func openStore(ctx context.Context, cfg *config.Config, clk clock.Clock, log *zap.Logger) (claim.Backend, error) {
	backoff, attempts := time.Second, 0
	for {
		b, err := cfg.OpenStore(ctx, log, clk)
		if err == nil {
			if attempts > 0 {
				log.Info("store reachable", zap.String("backend", cfg.Backend.Type), zap.Int("attempts", attempts+1))
			}
			return b, nil
		}
		if cfg.Backend.LocalStore() || claim.IsPermanent(err) || ctx.Err() != nil {
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

// reloadLoop loads the crontab again on each request (SIGHUP, or the file
// changed with watch: true). A valid file replaces the jobs; an invalid one
// is logged with every problem and counted, and the old crontab keeps
// running. Changes outside jobs (backend, instance) need a restart.
func reloadLoop(ctx context.Context, reloads <-chan string, cur *config.Config, s *scheduler.Scheduler, bt *cluster.Beater, load func() (*config.Config, error), m *metrics.Metrics, dash *dashboard.Dashboard, log *zap.Logger) {
	for {
		var why string
		select {
		case <-ctx.Done():
			return
		case why = <-reloads:
		}
		if load == nil {
			continue
		}
		notify(log, reloadingState())
		next, err := load()
		if err == nil {
			err = s.Reload(ctx, next.JobsHere())
		}
		m.Reloaded(err)
		if err != nil {
			var errs config.Errors
			if errors.As(err, &errs) {
				for _, e := range errs {
					log.Error("reload refused: the old crontab keeps running", zap.String("cause", why), zap.String("problem", e.Error()))
				}
			} else {
				log.Error("reload refused: the old crontab keeps running", zap.String("cause", why), zap.Error(err))
			}
			notify(log, "READY=1\nSTATUS=reload refused; the old crontab keeps running")
			continue
		}
		if !reflect.DeepEqual(next.Backend, cur.Backend) {
			log.Warn("reload: backend changes take effect after a restart; jobs are reloaded")
		}
		for _, w := range next.Warnings {
			log.Warn("crontab warning", zap.String("cause", why), zap.String("warning", w))
		}
		log.Info("crontab reloaded", zap.String("cause", why), zap.Int("jobs", len(next.Jobs)))
		notify(log, fmt.Sprintf("READY=1\nSTATUS=scheduling %d job(s)", len(next.Jobs)))
		cur = next
		logNotHere(log, next)
		m.Jobs(next.Jobs)
		dash.SetConfig(next)
		if bt != nil {
			bt.SetJobs(next.Jobs)
		}
		releaseMemory()
	}
}

// schedulerHooks are the metrics' hooks, and the memory the start's scan of
// runs left running (one read per job) freed handed back once it is over.
func schedulerHooks(m *metrics.Metrics) scheduler.Hooks {
	h := m.SchedulerHooks()
	h.Adopted = func(int) { releaseMemory() }
	return h
}

// releaseMemory returns the memory freed since the crontab was loaded to
// the system at once. Loading a large crontab (YAML, then one schedule per
// job) allocates several times what the scheduled jobs keep; the Go
// runtime would otherwise hand that back over minutes, and an idle daemon
// would show the load's peak as its resident size. One collection, at
// start and after a reload: milliseconds, off the scheduler's path.
func releaseMemory() { debug.FreeOSMemory() }

// probeInterval is how often an idle daemon asks its store whether it
// answers, so that /healthz reflects the store between claims.
const probeInterval = 15 * time.Second

// probeStore lists one run when nothing else reached the store lately.
func probeStore(ctx context.Context, b claim.Backend, clk clock.Clock, m *metrics.Metrics, log *zap.Logger) {
	for clock.Sleep(ctx, clk, probeInterval) == nil {
		if clk.Now().Sub(m.LastAnswer()) < probeInterval {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, probeInterval)
		_, err := b.ListRuns(pctx, claim.ListQuery{Limit: 1})
		cancel()
		if err == nil {
			m.StoreAnswered()
		} else if ctx.Err() == nil {
			log.Debug("store probe failed", zap.Error(err))
		}
	}
}

// watchdog pings systemd's watchdog at half its interval, when enabled.
func watchdog(ctx context.Context, clk clock.Clock) {
	interval, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	for clock.Sleep(ctx, clk, interval/2) == nil {
		sddaemon.SdNotify(false, sddaemon.SdNotifyWatchdog) //nolint:errcheck // nothing to do about it
	}
}

// notify sends state to systemd; without NOTIFY_SOCKET it does nothing.
func notify(log *zap.Logger, state string) {
	if _, err := sddaemon.SdNotify(false, state); err != nil {
		log.Warn("systemd notification failed", zap.String("state", state), zap.Error(err))
	}
}

// reloadingState is RELOADING=1 with the monotonic timestamp systemd wants
// with it.
func reloadingState() string {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return "RELOADING=1"
	}
	return fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", ts.Nano()/1000)
}

// logNotHere logs each job of cfg that this instance does not schedule for
// want of its tags (docs/spec.md#s6-placement).
func logNotHere(log *zap.Logger, cfg *config.Config) {
	for _, line := range cfg.NotHere() {
		log.Info(line)
	}
}
