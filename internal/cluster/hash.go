// Package cluster is the instances' view of each other
// (docs/spec.md#s6-cluster): the hash of each job's definition an
// instance publishes in its heartbeat record, the analysis of the records
// (which instances are alive, which jobs their crontabs define
// differently, which instances run an older version), and the heartbeat
// loop of the daemon. The cluster command, jobs and the dashboard read the
// same analysis.
package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/anarchon/anarchon/internal/config"
)

// A job's definition hash is one short hash per group of fields, in the
// order of Groups, joined with ".": two definitions that differ name the
// groups that differ, and the record stays small (7 hex digits a group).
// A version that hashes more fields appends groups; Compare reports the
// groups one side lacks as differing.

// Group is a group of a job's fields hashed together; Name lists the
// crontab keys it covers.
type Group struct {
	Name string
	sum  func(j config.Job) string
}

// Groups are the fields that change what a job runs, in their order in
// the hash (docs/spec.md#s6-cluster lists them).
var Groups = []Group{
	{"schedule/timezone", func(j config.Job) string { return enc(j.Schedule, j.Timezone) }},
	{"command/args/shell", func(j config.Job) string {
		return enc(j.Command, enc(j.Args...), j.Shell)
	}},
	{"user/group/workdir", func(j config.Job) string { return enc(j.User, j.Group, j.Workdir) }},
	{"env/inheritEnv", func(j config.Job) string { return enc(envLines(j.Env)...) + "|" + enc(sorted(j.InheritEnv)...) }},
	{"overlap/catchUp/onDrift", func(j config.Job) string { return enc(j.Overlap, j.CatchUp, j.OnDrift) }},
	{"leaseMs/heartbeatMs/timeout/killGraceMs/maxAttempts", func(j config.Job) string {
		return enc(j.Lease.String(), j.Heartbeat.String(), j.Timeout.String(), j.KillGrace.String(), fmt.Sprint(j.MaxAttempts))
	}},
	{"maxLateMs/claimAheadMs/claimSpreadMs/outputTailBytes", func(j config.Job) string {
		return enc(j.MaxLate.String(), j.ClaimAhead.String(), j.ClaimSpread.String(), fmt.Sprint(j.OutputTailBytes))
	}},
	{"retry/onFailure/onSuccess/onMissed/hookTimeoutMs", func(j config.Job) string {
		return enc(fmt.Sprint(j.Retry.Attempts), j.Retry.Backoff.String(), j.Retry.MaxBackoff.String(),
			j.OnFailure, j.OnSuccess, j.OnMissed, j.HookTimeout.String())
	}},
	{"jitterMs/tags/perInstance/keepRuns", func(j config.Job) string {
		return enc(j.Jitter.String(), enc(sorted(j.Tags)...), fmt.Sprint(j.PerInstance), fmt.Sprint(j.KeepRuns))
	}},
}

// groupHex is the hex digits of one group's hash.
const groupHex = 7

// JobHash is the definition hash of j.
func JobHash(j config.Job) string {
	parts := make([]string, len(Groups))
	for i, g := range Groups {
		sum := sha256.Sum256([]byte(g.sum(j)))
		parts[i] = hex.EncodeToString(sum[:4])[:groupHex]
	}
	return strings.Join(parts, ".")
}

// JobHashes are the definition hashes of jobs by name, and one hash over
// them all (12 hex digits).
func JobHashes(jobs []config.Job) (map[string]string, string) {
	out := make(map[string]string, len(jobs))
	lines := make([]string, 0, len(jobs))
	for _, j := range jobs {
		h := JobHash(j)
		out[j.Name] = h
		lines = append(lines, j.Name+"="+h)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return out, hex.EncodeToString(sum[:6])
}

// Compare returns the names of the groups in which hashes a and b differ.
func Compare(a, b string) []string {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	var out []string
	for i := range max(len(pa), len(pb)) {
		if i < len(pa) && i < len(pb) && pa[i] == pb[i] {
			continue
		}
		if i < len(Groups) {
			out = append(out, Groups[i].Name)
		} else {
			out = append(out, fmt.Sprintf("group %d (of a newer version)", i+1))
		}
	}
	return out
}

// enc joins values unambiguously (each length-prefixed).
func enc(vals ...string) string {
	var b strings.Builder
	for _, v := range vals {
		fmt.Fprintf(&b, "%d:%s;", len(v), v)
	}
	return b.String()
}

func envLines(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, enc(k, v))
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}
