// Package metrics exports what the daemon does as Prometheus metrics, and
// serves /metrics, /healthz (the store answered recently and refuses
// nothing) and /readyz (the daemon is scheduling).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/runner"
	"github.com/anarchon/anarchon/internal/schedule"
	"github.com/anarchon/anarchon/internal/scheduler"
)

// Metrics holds the daemon's collectors on their own registry.
type Metrics struct {
	Registry *prometheus.Registry
	clock    clock.Clock
	backend  string

	claims        *prometheus.CounterVec
	runs          *prometheus.CounterVec
	runDuration   *prometheus.HistogramVec
	scheduleLag   prometheus.Histogram
	claimDuration *prometheus.HistogramVec
	renewals      *prometheus.CounterVec
	fenced        prometheus.Counter
	missed        *prometheus.CounterVec
	storeErrors   *prometheus.CounterVec
	refusals      *prometheus.CounterVec
	clockSkew     prometheus.Gauge
	reloads       *prometheus.CounterVec
	paused        *prometheus.GaugeVec
	hookFailures  *prometheus.CounterVec
	triggers      *prometheus.CounterVec
	retries       *prometheus.CounterVec

	mu      sync.Mutex
	storeOK time.Time // the store's last answer
	ready   bool
	// refused holds, by operation, the store's last refusal no retry
	// changes (claim.PermanentError), until that operation or a claim is
	// answered again.
	refused map[string]string
}

// New registers the collectors, with Go runtime and process metrics.
func New(c clock.Clock, backend string) *Metrics {
	r := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { r.MustRegister(c) }
	m := &Metrics{Registry: r, clock: c, backend: backend}
	m.claims = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_claims_total",
		Help: "Claims answered, by job and outcome (won, lost, running, done, late, overlap, unknown)."}, []string{"job", "outcome"})
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_runs_total",
		Help: "Executions by job and status (succeeded, failed, timeout, replaced, interrupted, fenced, stopped)."}, []string{"job", "status"})
	m.runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "anarchon_run_duration_seconds",
		Help: "How long executions ran.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"job"})
	m.scheduleLag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "anarchon_schedule_lag_seconds",
		Help: "From a run's start (its slot, plus its jitter) to the fork of its command.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	m.claimDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "anarchon_claim_duration_seconds",
		Help: "Round trip of one answered claim.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"backend"})
	m.renewals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_lease_renewals_total",
		Help: "Lease renewals by result (ok, failed, fenced)."}, []string{"result"})
	m.fenced = prometheus.NewCounter(prometheus.CounterOpts{Name: "anarchon_fenced_total",
		Help: "Executions stopped because another attempt owns the run, or the lease could not be kept."})
	m.missed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_missed_slots_total",
		Help: "Slots not run, by job and reason: late (not claimed within maxLate), catch_up (due while every instance was down, not run by the job's catchUp policy), store_unreachable (no answer from the store in time), store_refused (the store refused the claim for good)."}, []string{"job", "reason"})
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_backend_errors_total",
		Help: "Failed calls to the store by operation, refusals included."}, []string{"op"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_backend_refusals_total",
		Help: "Calls to the store it refused for good (a missing privilege, a wrong password, a queue or stream of other settings), by operation: not retried; the log names the fix."}, []string{"op"})
	m.clockSkew = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anarchon_clock_skew_seconds",
		Help: "This instance's clock minus the store's, from the lease backends' answers (includes up to one network trip)."})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_config_reloads_total",
		Help: "Crontab reloads by result (ok, error)."}, []string{"result"})
	m.paused = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anarchon_job_paused",
		Help: "1 while the job is paused by its control record in the store (anarchond pause): its slots are skipped; 0 once resumed or its pause is over."}, []string{"job"})
	m.hookFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_hook_failures_total",
		Help: "Hooks (onFailure, onSuccess, onMissed) that failed on this instance, by job and hook: could not start, exited non-zero, or timed out."}, []string{"job", "hook"})
	m.triggers = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_triggers_total",
		Help: "Triggers this instance picked up to claim their run, by job and kind (manual: anarchond trigger; retry)."}, []string{"job", "kind"})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anarchon_retries_total",
		Help: "Retries the job's retry policy asked for on this instance, by job and result: scheduled (its trigger written), not_written (the store did not take it: the retry is lost), past_next_slot (overlap skip: it would be due at or after the next slot)."}, []string{"job", "result"})
	for _, c := range []prometheus.Collector{m.claims, m.runs, m.runDuration, m.scheduleLag, m.claimDuration,
		m.renewals, m.fenced, m.missed, m.storeErrors, m.refusals, m.clockSkew, m.reloads, m.paused, m.hookFailures,
		m.triggers, m.retries} {
		f(c)
	}
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Known label values start at zero, so that rates and alerts see them.
	for _, r := range []string{"ok", "error"} {
		m.reloads.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "failed", "fenced"} {
		m.renewals.WithLabelValues(r)
	}
	for _, op := range []string{"claim", "read", "renew", "finish", "prune"} {
		m.storeErrors.WithLabelValues(op)
		m.refusals.WithLabelValues(op)
	}
	return m
}

// skew records local now minus the store's now.
func (m *Metrics) skew(storeNow time.Time) {
	if !storeNow.IsZero() {
		m.clockSkew.Set(m.clock.Now().Sub(storeNow).Seconds())
	}
}

func (m *Metrics) answered() {
	m.mu.Lock()
	m.storeOK = m.clock.Now()
	m.mu.Unlock()
}

// storeError counts a failed call of op; a refusal also marks the store
// refused until op (or a claim) is answered again.
func (m *Metrics) storeError(op string, err error) {
	m.storeErrors.WithLabelValues(op).Inc()
	if !claim.IsPermanent(err) {
		return
	}
	m.refusals.WithLabelValues(op).Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refused == nil {
		m.refused = map[string]string{}
	}
	m.refused[op] = err.Error()
}

// answeredOp notes the store's answer to op: op is no longer refused, nor is
// anything once a claim is answered (the store takes this instance's
// writes).
func (m *Metrics) answeredOp(op string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.storeOK = m.clock.Now()
	if op == "claim" {
		clear(m.refused)
	}
	delete(m.refused, op)
}

// refusal is one of the store's standing refusals, or "".
func (m *Metrics) refusal() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for op, msg := range m.refused {
		return fmt.Sprintf("the store refused %s: %s", op, msg)
	}
	return ""
}

// SchedulerHooks observe claims, misses, executions and the store.
func (m *Metrics) SchedulerHooks() scheduler.Hooks {
	return scheduler.Hooks{
		Claimed: func(job string, _ time.Time, res claim.Result, took time.Duration) {
			m.claims.WithLabelValues(job, string(res.Outcome)).Inc()
			m.claimDuration.WithLabelValues(m.backend).Observe(took.Seconds())
			m.skew(res.StoreNow)
		},
		Missed: func(job, reason string, n int) { m.missed.WithLabelValues(job, reason).Add(float64(n)) },
		Finished: func(job string, _ time.Time, rep runner.Report) {
			status := string(rep.Status)
			switch {
			case rep.Fenced:
				status = "fenced"
				m.fenced.Inc()
			case status == "":
				status = "stopped"
			}
			m.runs.WithLabelValues(job, status).Inc()
			m.runDuration.WithLabelValues(job).Observe(rep.Duration.Seconds())
		},
		StoreError: m.storeError,
		StoreOK:    m.answeredOp,
		Paused: func(job string, paused bool) {
			v := 0.0
			if paused {
				v = 1
			}
			m.paused.WithLabelValues(job).Set(v)
		},
		Triggered: func(job, kind string) { m.triggers.WithLabelValues(job, kind).Inc() },
		Retried:   func(job, result string) { m.retries.WithLabelValues(job, result).Inc() },
	}
}

// Jobs gives every job of the crontab its anarchon_job_paused series, 0
// until the scheduler reports it paused, so that the metric exists before
// a job's first pause; each hook a job has its
// anarchon_hook_failures_total series, and each job with retries its
// anarchon_retries_total{result="not_written"}, from 0, so that an alert
// on their increase sees the first one.
func (m *Metrics) Jobs(jobs []config.Job) {
	for _, j := range jobs {
		m.paused.WithLabelValues(j.Name)
		if j.Retry.Attempts > 0 {
			m.retries.WithLabelValues(j.Name, scheduler.RetryNotWritten)
		}
		for hook, cmd := range map[string]string{runner.OnFailure: j.OnFailure, runner.OnSuccess: j.OnSuccess, runner.OnMissed: j.OnMissed} {
			if cmd != "" {
				m.hookFailures.WithLabelValues(j.Name, hook)
			}
		}
	}
}

// RunnerHooks observe forks, renewals and the store.
func (m *Metrics) RunnerHooks() runner.Hooks {
	return runner.Hooks{
		// The lag is counted from the run's start: the slot plus its
		// jitter (docs/spec.md#s5-jitter).
		Started: func(e runner.Execution, at time.Time) {
			m.scheduleLag.Observe(at.Sub(schedule.Start(e.Job.Name, e.Slot, e.Job.Jitter)).Seconds())
		},
		Renewed: func(result string, res claim.Result, _ error) {
			m.renewals.WithLabelValues(result).Inc()
			if result != "failed" {
				m.answeredOp("renew")
				m.skew(res.StoreNow)
			}
		},
		StoreError: m.storeError,
		HookFailed: func(job, hook string) { m.hookFailures.WithLabelValues(job, hook).Inc() },
	}
}

// Reloaded counts a crontab reload.
func (m *Metrics) Reloaded(err error) {
	if err != nil {
		m.reloads.WithLabelValues("error").Inc()
		return
	}
	m.reloads.WithLabelValues("ok").Inc()
}

// StoreAnswered notes that the store answered (a health probe).
func (m *Metrics) StoreAnswered() { m.answered() }

// LastAnswer is when the store last answered.
func (m *Metrics) LastAnswer() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.storeOK
}

// SetReady marks the daemon as scheduling (true) or stopping (false).
func (m *Metrics) SetReady(ready bool) {
	m.mu.Lock()
	m.ready = ready
	m.mu.Unlock()
}

// HealthWindow is how recently the store must have answered for /healthz;
// a refusal (claim.PermanentError) makes it unhealthy until the refused
// operation is answered.
const HealthWindow = time.Minute

// Handler serves /metrics, /healthz and /readyz.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		last := m.LastAnswer()
		if last.IsZero() {
			http.Error(w, "the store has not answered yet", http.StatusServiceUnavailable)
			return
		}
		if age := m.clock.Now().Sub(last); age > HealthWindow {
			http.Error(w, fmt.Sprintf("the store last answered %s ago", age.Round(time.Second)), http.StatusServiceUnavailable)
			return
		}
		if msg := m.refusal(); msg != "" {
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		m.mu.Lock()
		ready := m.ready
		m.mu.Unlock()
		if !ready {
			http.Error(w, "not scheduling", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Listen binds addr; Serve then serves on it until ctx ends.
func (m *Metrics) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %s: %w", addr, err)
	}
	return ln, nil
}

// headerTimeout is how long a client may take to send its request's
// headers; the whole request may take twice as long, and taking the answer
// six times (a variable for tests).
var headerTimeout = 5 * time.Second

// Serve serves the handler on ln until ctx ends.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	return m.ServeWith(ctx, ln, nil)
}

// ServeWith serves the handler on ln until ctx ends, and extra (the
// dashboard), when not nil, on every other path. A slow client is cut off:
// its request must arrive within 10 s and its answer be taken within 30 s,
// so that no client holds the daemon's resources.
func (m *Metrics) ServeWith(ctx context.Context, ln net.Listener, extra http.Handler) error {
	h := m.Handler()
	if extra != nil {
		mux := http.NewServeMux()
		for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
			mux.Handle(p, h)
		}
		mux.Handle("/", extra)
		h = mux
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, ReadTimeout: 2 * headerTimeout,
		WriteTimeout: 6 * headerTimeout, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck // best effort at exit
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
