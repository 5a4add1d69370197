package natsclaim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/anarchon/anarchon/internal/claim"
)

// MaxReplicas is the largest replica count JetStream allows a stream.
const MaxReplicas = 5

// autoReplicas is the replica count chosen on a cluster of that many
// servers or more when backend.nats.replicas is not set: the stream keeps
// deciding claims with one server down.
const autoReplicas = 3

// errCodeNoPlacement is the server's "no suitable peers for placement"
// (JSClusterNoPeersErrF): not enough servers up, in the placement cluster,
// or with the placement tags.
const errCodeNoPlacement jetstream.ErrorCode = 10005

// replicaPlan is the replica count the backend wants of the stream, and
// how it was chosen.
type replicaPlan struct {
	want int
	// auto: chosen from the cluster's size (backend.nats.replicas not
	// set).
	auto bool
	topo Topology
}

// why says where the wanted count comes from.
func (p replicaPlan) why() string {
	if !p.auto {
		return "backend.nats.replicas"
	}
	if p.topo.Cluster == "" {
		return "chosen for a single server"
	}
	return fmt.Sprintf("chosen for a cluster of %d servers", p.topo.Size())
}

// planReplicas chooses the stream's replica count: o.Replicas, or 3 on a
// cluster of 3 servers or more and 1 otherwise. More replicas than the
// cluster has servers is a refusal (claim.PermanentError) naming its size.
func planReplicas(o Options, t Topology) (replicaPlan, error) {
	p := replicaPlan{want: o.Replicas, topo: t}
	if o.Replicas == 0 {
		p.want, p.auto = 1, true
		if t.Size() >= autoReplicas {
			p.want = autoReplicas
		}
		return p, nil
	}
	if o.Replicas > t.Size() {
		return p, replicasRefusal(o.Replicas, t)
	}
	return p, nil
}

// replicasRefusal is the error of backend.nats.replicas above the
// cluster's size.
func replicasRefusal(n int, t Topology) error {
	if t.Cluster == "" {
		err := fmt.Errorf("backend.nats.replicas is %d, but the server %s is a single server, not a cluster: a stream there has 1 replica",
			n, orUnnamed(t.Server))
		return claim.Permanent("nats", err, "the stream cannot have more replicas than the cluster has servers",
			fmt.Sprintf("set backend.nats.replicas to 1 (or remove it), or connect to a NATS cluster of at least %d servers", n))
	}
	err := fmt.Errorf("backend.nats.replicas is %d, but the server found a %s: a stream keeps at most one replica per server", n, t)
	return claim.Permanent("nats", err, "the stream cannot have more replicas than the cluster has servers",
		fmt.Sprintf("set backend.nats.replicas to at most %d (or remove it: %d on a cluster of %d or more), or add servers to the cluster",
			t.Size(), autoReplicas, autoReplicas))
}

// placement is the stream's placement of o, nil when o sets none.
func placement(o Options) *jetstream.Placement {
	if o.PlacementCluster == "" && len(o.PlacementTags) == 0 {
		return nil
	}
	return &jetstream.Placement{Cluster: o.PlacementCluster, Tags: slices.Clone(o.PlacementTags)}
}

// createRefusal explains the server's refusal to place a new stream:
// placement tags no server has is a refusal (claim.PermanentError); too
// few servers up is an error a later start may not meet.
func createRefusal(err error, cfg jetstream.StreamConfig, t Topology) error {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeNoPlacement {
		return fmt.Errorf("create stream %s: %w", cfg.Name, err)
	}
	if p := cfg.Placement; p != nil && len(p.Tags) > 0 && strings.Contains(apiErr.Description, "tags") {
		return claim.Permanent("nats",
			fmt.Errorf("create stream %s: no %d servers of the %s have every tag of backend.nats.placementTags %v: %w",
				cfg.Name, cfg.Replicas, t, p.Tags, err),
			"the stream's placement tags match too few servers",
			"correct backend.nats.placementTags, or give the servers those tags (server_tags in their configuration)")
	}
	return fmt.Errorf("create stream %s with %d replicas: fewer JetStream servers of the %s are up than that: %w",
		cfg.Name, cfg.Replicas, t, err)
}

// replicaWarnings says what makes the stream (existing or just created)
// weaker than the plan: fewer replicas than wanted, a single replica on a
// cluster, another placement than configured. Each warning names the
// command that fixes it.
func replicaWarnings(cfg jetstream.StreamConfig, p replicaPlan, o Options) []string {
	var out []string
	r := max(cfg.Replicas, 1)
	switch {
	case r < p.want:
		out = append(out, fmt.Sprintf("stream %s has %d replica(s), fewer than the %d wanted (%s): %s; fix: %s",
			cfg.Name, r, p.want, p.why(), replicaCost(r), editReplicas(cfg.Name, p.want)))
	case r == 1 && p.topo.Cluster != "":
		out = append(out, fmt.Sprintf("stream %s has 1 replica on the %s: %s; fix: %s",
			cfg.Name, p.topo, replicaCost(1), editReplicas(cfg.Name, min(autoReplicas, p.topo.Size()))))
	}
	if w := placementWarning(cfg, o); w != "" {
		out = append(out, w)
	}
	return out
}

// replicaCost says what a stream of r replicas loses with one server.
func replicaCost(r int) string {
	if r == 1 {
		return "when the server holding it stops, no claim is decided until that server is back (the runs of that time are lost)"
	}
	return fmt.Sprintf("a stream of %d replicas stops deciding claims when %d of its servers are down", r, r/2+r%2)
}

// editReplicas is the command that gives stream n replicas.
func editReplicas(stream string, n int) string {
	return fmt.Sprintf("nats stream edit %s --replicas %d (or the JetStream API: $JS.API.STREAM.UPDATE.%s with num_replicas %d)",
		stream, n, stream, n)
}

// placementWarning says how the stream's placement differs from o's, or
// "".
func placementWarning(cfg jetstream.StreamConfig, o Options) string {
	want := placement(o)
	if want == nil {
		return ""
	}
	have := jetstream.Placement{}
	if cfg.Placement != nil {
		have = *cfg.Placement
	}
	var missing []string
	for _, tag := range want.Tags {
		if !slices.Contains(have.Tags, tag) {
			missing = append(missing, tag)
		}
	}
	if (want.Cluster == "" || want.Cluster == have.Cluster) && len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("stream %s is placed in cluster %q with tags %v, not as backend.nats.placementCluster %q and placementTags %v say; the backend never changes an existing stream; fix: nats stream edit %s%s",
		cfg.Name, have.Cluster, have.Tags, want.Cluster, want.Tags, cfg.Name, editPlacement(want))
}

func editPlacement(p *jetstream.Placement) string {
	var b strings.Builder
	if p.Cluster != "" {
		b.WriteString(" --cluster " + p.Cluster)
	}
	for _, tag := range p.Tags {
		b.WriteString(" --tag " + tag)
	}
	return b.String()
}
