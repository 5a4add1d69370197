package pgclaim

import (
	"fmt"
	"slices"
	"strings"
)

// String is the topology as validate prints it: a line per host, then
// what the primary's replication guarantees a failover.
func (t *Topology) String() string {
	lines := make([]string, 0, len(t.Hosts)+3)
	for _, h := range t.Hosts {
		lines = append(lines, "postgres host "+h.Addr+": "+h.role())
	}
	p := t.Primary()
	if p == nil {
		return strings.Join(lines, "\n")
	}
	lines = append(lines, fmt.Sprintf("postgres primary %s: synchronous_commit %s for the backend's sessions, synchronous_standby_names %q, %s",
		p.Addr, p.SyncCommit, p.SyncNames, p.replicas()))
	return strings.Join(append(lines, t.verdicts(p)...), "\n")
}

// replicas counts and names the primary's replicas.
func (h *HostState) replicas() string {
	switch h.Replicas {
	case 0:
		return "no replica connected"
	case 1:
		return "1 replica: " + h.ReplicaList
	}
	return fmt.Sprintf("%d replicas: %s", h.Replicas, h.ReplicaList)
}

// verdicts say what a failover of this topology costs, and what to
// change.
func (t *Topology) verdicts(p *HostState) []string {
	var out []string
	if p.Replicas > 0 && len(t.Hosts) == 1 {
		out = append(out, "note: the DSN names one host: after a failover the daemons reach the new primary only if that name "+
			"moves to it (a virtual IP, DNS, a proxy); otherwise name every host (host=a,b,c)")
	}
	sync := p.SyncNames != "" && slices.Contains([]string{"on", "remote_apply", "remote_write"}, p.SyncCommit)
	switch {
	case p.Replicas == 0:
		out = append(out, "note: no streaming replica: the database is a single server, and its loss stops every claim until it is back")
	case p.Hidden > 0:
		out = append(out, "note: the replicas' state is hidden from this role (grant it pg_read_all_stats to see it)")
	}
	switch {
	case p.Replicas > 0 && !sync:
		out = append(out, "warning: asynchronous replication: a failover can lose the claims the primary acknowledged last, "+
			"and their runs can execute a second time; set synchronous_standby_names on the primary and "+
			"synchronous_commit on or remote_apply (docs/backends.md)")
	case sync && p.Hidden == 0 && p.SyncReplicas == 0:
		out = append(out, "warning: synchronous_standby_names is set but no synchronous standby is streaming: "+
			"every claim that writes waits until one is")
	case sync && p.SyncCommit == "remote_write":
		out = append(out, "ok: synchronous replication (remote_write): a failover loses no acknowledged claim, unless the "+
			"standby's host crashes with the primary")
	case sync:
		out = append(out, "ok: synchronous replication: a claim is acknowledged once a synchronous standby has it, "+
			"so a failover to that standby loses no acknowledged claim and runs nothing twice")
	}
	return out
}
