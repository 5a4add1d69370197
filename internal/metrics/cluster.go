package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/anarchon/anarchon/internal/cluster"
)

// ClusterHooks registers the metrics of the instances' heartbeat
// (docs/spec.md#s6-cluster) and returns the hooks that set them; call it
// once. anarchon_crontab_drift{job} is 1 while the live instances define
// the job differently, 0 once they agree again; anarchon_instances_outdated
// is how many live instances run a version older than the newest live
// one. A failed beat or read counts in anarchon_backend_errors_total (op
// beat, instances).
func (m *Metrics) ClusterHooks() cluster.Hooks {
	drift := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anarchon_crontab_drift",
		Help: "1 while the live instances define the job differently (their heartbeat records' definition hashes differ), 0 once they agree again."}, []string{"job"})
	outdated := prometheus.NewGauge(prometheus.GaugeOpts{Name: "anarchon_instances_outdated",
		Help: "Live instances running a version older than the newest live one, as this instance reads the heartbeat records."})
	m.Registry.MustRegister(drift, outdated)
	for _, op := range []string{"beat", "instances"} {
		m.storeErrors.WithLabelValues(op)
		m.refusals.WithLabelValues(op)
	}
	return cluster.Hooks{
		Drift: func(job string, on bool) {
			v := 0.0
			if on {
				v = 1
			}
			drift.WithLabelValues(job).Set(v)
		},
		Outdated:   func(n int) { outdated.Set(float64(n)) },
		StoreError: m.storeError,
		StoreOK:    m.answeredOp,
	}
}
