package dashboard

import (
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/cluster"
	"github.com/anarchon/anarchon/internal/status"
)

// instanceRecords are the instances' heartbeat records read at storeNow
// (zero: the store has no clock; now is used) as `cluster --json` prints
// them, by name (cluster.Analyze's order), escaped as by status.
func instanceRecords(insts []claim.Instance, storeNow, now time.Time) []status.InstanceRecord {
	if storeNow.IsZero() {
		storeNow = now
	}
	v := cluster.Analyze(insts, storeNow)
	out := make([]status.InstanceRecord, 0, len(v.Members))
	for _, m := range v.Members {
		out = append(out, status.InstanceRecordOf(m))
	}
	return out
}
