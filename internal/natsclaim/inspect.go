package natsclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/anarchon/anarchon/internal/secret"
	"github.com/nats-io/nats.go/jetstream"
)

// Report is what Inspect found: the deployment, the stream and what
// weakens it. Its String is what `anarchond validate` prints.
type Report struct {
	Topology Topology
	// Down are the servers of backend.nats.url that did not answer, each
	// with its reason (credentials hidden).
	Down []string
	// Stream is the stream's name; Exists whether it exists yet.
	Stream string
	Exists bool
	// Replicas is the stream's replica count, or the one the backend
	// creates it with; ReplicasFrom says where that count comes from.
	Replicas     int
	ReplicasFrom string
	// Leader is the server leading the stream; Followers its other
	// replicas, each with its state ("n2 current").
	Leader    string
	Followers []string
	// Warnings say what weakens the stream, each with its fix.
	Warnings []string
}

// String is the report in a few lines.
func (r Report) String() string {
	var b strings.Builder
	b.WriteString("nats: " + r.Topology.String())
	if r.Topology.Cluster != "" {
		b.WriteString(", connected to " + orUnnamed(r.Topology.Server))
	}
	for _, d := range r.Down {
		fmt.Fprintf(&b, "\n  server %s", d)
	}
	switch {
	case !r.Exists:
		fmt.Fprintf(&b, "\n  stream %s: not created yet; anarchond creates it with %d replica(s) (%s)",
			r.Stream, r.Replicas, r.ReplicasFrom)
	case r.Leader == "":
		fmt.Fprintf(&b, "\n  stream %s: %d replica(s), no leader now (an election in progress, or too few of its servers up)",
			r.Stream, r.Replicas)
	default:
		fmt.Fprintf(&b, "\n  stream %s: %d replica(s), leader %s", r.Stream, r.Replicas, r.Leader)
		if len(r.Followers) > 0 {
			b.WriteString("; " + strings.Join(r.Followers, ", "))
		}
	}
	for _, w := range r.Warnings {
		b.WriteString("\n  warning: " + w)
	}
	return b.String()
}

// Inspect connects as New does and reports the topology and the stream
// without creating or changing anything. Replicas above the cluster's
// size are refused (claim.PermanentError), as New refuses them; so is an
// existing stream New would refuse, when o names the namespace.
func Inspect(ctx context.Context, o Options) (Report, error) {
	ns := o.Namespace
	if ns == "" {
		o.Namespace = "_" // the stream's subjects are then not checked
	}
	o, err := o.withDefaults()
	if err != nil {
		return Report{}, fmt.Errorf("inspect nats: %w", err)
	}
	c, err := dial(ctx, o)
	if err != nil {
		return Report{}, err
	}
	defer c.nc.Close()
	r := Report{Topology: discover(ctx, c.nc, o.PlacementCluster), Stream: o.Stream}
	for _, d := range c.dead {
		r.Down = append(r.Down, fmt.Sprintf("%s does not answer (%v)", d.url, d.err))
	}
	plan, err := planReplicas(o, r.Topology)
	if err != nil {
		return r, fmt.Errorf("%s: %w", c.where, err)
	}
	r.Replicas, r.ReplicasFrom = plan.want, plan.why()
	s, err := readStream(ctx, c.js, o.Stream, o.Log)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return r, nil
	case err != nil:
		return r, fmt.Errorf("%s: read stream %s: %w", c.where, o.Stream, secret.Scrub(refusal(err), c.secrets...))
	}
	info := s.CachedInfo()
	r.Exists, r.Replicas = true, max(info.Config.Replicas, 1)
	r.Leader, r.Followers = streamPeers(info)
	if r.Leader == "" && r.Topology.Cluster == "" {
		r.Leader = orUnnamed(r.Topology.Server) // a single server's stream names none
	}
	if ns != "" {
		if err := checkStream(info.Config, o); err != nil {
			return r, fmt.Errorf("%s: %w", c.where, streamRefusal(err))
		}
	}
	r.Warnings = replicaWarnings(info.Config, plan, o)
	return r, nil
}

// streamPeers returns the stream's leader and its other replicas with
// their state.
func streamPeers(info *jetstream.StreamInfo) (string, []string) {
	if info.Cluster == nil {
		return "", nil
	}
	var peers []string
	for _, p := range info.Cluster.Replicas {
		state := "current"
		switch {
		case p == nil:
			continue
		case p.Offline:
			state = "offline"
		case !p.Current:
			state = fmt.Sprintf("behind by %d operations", p.Lag)
		}
		peers = append(peers, p.Name+" "+state)
	}
	return info.Cluster.Leader, peers
}
