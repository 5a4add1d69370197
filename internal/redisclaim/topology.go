package redisclaim

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/secret"
)

// What `anarchond validate` shows of the deployment (Check), and what a
// Cluster's seeds answered when none would serve.

// TopologyReport is what a backend's URL reached.
type TopologyReport struct {
	Kind Topology
	// Addr is the single server's address, or the Sentinel master's.
	Addr string
	// Version is the server's redis_version (single, Sentinel master).
	Version string
	// MasterName, Quorum and Sentinels describe a Sentinel set.
	MasterName string
	Quorum     int
	Sentinels  int
	// Masters and Replicas count the serving nodes (a single server and a
	// Sentinel set have one master); MinReplicas is the fewest replicas
	// any master has that are up.
	Masters, Replicas, MinReplicas int
	// State is a Cluster's cluster_state.
	State string
}

// String is the line validate prints.
func (t TopologyReport) String() string {
	switch t.Kind {
	case Cluster:
		return fmt.Sprintf("redis topology: Cluster of %d masters, %d replicas (every master has at least %d), cluster_state %s",
			t.Masters, t.Replicas, t.MinReplicas, t.State)
	case Sentinel:
		return fmt.Sprintf("redis topology: Sentinel master %s at %s (Redis %s), %s, %d sentinels (quorum %d)",
			t.MasterName, t.Addr, t.Version, plural(t.Replicas, "replica"), t.Sentinels, t.Quorum)
	default:
		return fmt.Sprintf("redis topology: one server %s (Redis %s, master), %s",
			t.Addr, t.Version, plural(t.Replicas, "connected replica"))
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// describe reports what c (made from cc) reaches.
func describe(ctx context.Context, c redis.UniversalClient, cc *clientConfig) (TopologyReport, error) {
	switch {
	case cc.cluster != nil:
		return describeCluster(ctx, c)
	case cc.failover != nil:
		return describeSentinel(ctx, c, cc.failover)
	default:
		return describeSingle(ctx, c, cc.single.Addr)
	}
}

// infoFields reads one section of INFO as fields.
func infoFields(ctx context.Context, c redis.Cmdable, section string) (map[string]string, error) {
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("INFO %s: %w", section, err)
	}
	return fields(info), nil
}

// fields reads "key:value" lines (INFO, CLUSTER INFO).
func fields(raw string) map[string]string {
	f := map[string]string{}
	for line := range strings.Lines(raw) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	return f
}

func describeSingle(ctx context.Context, c redis.UniversalClient, addr string) (TopologyReport, error) {
	t := TopologyReport{Kind: Single, Addr: addr, Masters: 1}
	repl, err := infoFields(ctx, c, "replication")
	if err != nil {
		return t, err
	}
	if repl["role"] != "master" {
		return t, fmt.Errorf("the server at %s is a replica (role %s): claims would be refused (READONLY); point backend.redis.url at the master, or at the sentinels with master_name",
			addr, repl["role"])
	}
	t.Replicas, _ = strconv.Atoi(repl["connected_slaves"])
	t.MinReplicas = t.Replicas
	t.Version, _, _, _ = serverVersion(ctx, c)
	return t, nil
}

func describeSentinel(ctx context.Context, c redis.UniversalClient, o *redis.FailoverOptions) (TopologyReport, error) {
	t := TopologyReport{Kind: Sentinel, MasterName: o.MasterName, Masters: 1}
	var errs []string
	for _, addr := range o.SentinelAddrs {
		s := redis.NewSentinelClient(&redis.Options{Addr: addr, Username: o.SentinelUsername, Password: o.SentinelPassword,
			TLSConfig: o.TLSConfig, DialTimeout: o.DialTimeout, MaxRetries: -1})
		m, err := s.Master(ctx, o.MasterName).Result()
		var reps []map[string]string
		if err == nil {
			reps, err = s.Replicas(ctx, o.MasterName).Result()
		}
		s.Close()
		if err != nil {
			errs = append(errs, addr+": "+err.Error())
			continue
		}
		t.Addr = net.JoinHostPort(m["ip"], m["port"])
		t.Quorum, _ = strconv.Atoi(m["quorum"])
		others, _ := strconv.Atoi(m["num-other-sentinels"])
		t.Sentinels = others + 1
		for _, r := range reps {
			if !hasFlag(r["flags"], "s_down", "o_down", "disconnected") {
				t.Replicas++
			}
		}
		t.MinReplicas = t.Replicas
		t.Version, _, _, _ = serverVersion(ctx, c)
		return t, nil
	}
	return t, fmt.Errorf("no sentinel described master %s: %s", o.MasterName, strings.Join(errs, "; "))
}

// hasFlag reports whether the comma-separated flags hold one of want.
func hasFlag(flags string, want ...string) bool {
	return slices.ContainsFunc(strings.Split(flags, ","), func(f string) bool { return slices.Contains(want, f) })
}

func describeCluster(ctx context.Context, c redis.UniversalClient) (TopologyReport, error) {
	t := TopologyReport{Kind: Cluster}
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return t, fmt.Errorf("CLUSTER INFO: %w", err)
	}
	t.State = fields(info)["cluster_state"]
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return t, fmt.Errorf("CLUSTER NODES: %w", err)
	}
	countNodes(&t, nodes)
	return t, nil
}

// countNodes counts the masters that serve slots, and the replicas up
// beside each, from CLUSTER NODES.
func countNodes(t *TopologyReport, nodes string) {
	replicas := map[string]int{} // master id -> replicas up
	var masters []string
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) < 8 || hasFlag(f[2], "fail", "fail?", "handshake", "noaddr") {
			continue
		}
		switch {
		case hasFlag(f[2], "master") && len(f) > 8:
			masters = append(masters, f[0])
		case hasFlag(f[2], "slave"):
			replicas[f[3]]++
			t.Replicas++
		}
	}
	t.Masters = len(masters)
	for i, m := range masters {
		if i == 0 || replicas[m] < t.MinReplicas {
			t.MinReplicas = replicas[m]
		}
	}
}

// probeSeeds asks each seed of a Cluster URL, at once, what it says
// (CLUSTER INFO), when the client could not reach the cluster (err): the
// error then names every seed and its answer.
func probeSeeds(ctx context.Context, cc *clientConfig, err error) error {
	o := cc.cluster
	answers := make([]string, len(o.Addrs))
	var wg sync.WaitGroup
	for i, addr := range o.Addrs {
		wg.Go(func() {
			answers[i] = addr + ": " + probeSeed(ctx, o, addr)
		})
	}
	wg.Wait()
	return &seedsError{msg: "no node of the Redis Cluster would serve: " + strings.Join(answers, "; ") +
		" (check the seed addresses of backend.redis.url, and that the nodes run with cluster-enabled yes)", err: err}
}

// probeTimeout bounds one seed's probe.
const probeTimeout = 3 * time.Second

// probeSeed is what the seed at addr answers CLUSTER INFO.
func probeSeed(ctx context.Context, o *redis.ClusterOptions, addr string) string {
	var tc *tls.Config
	if o.TLSConfig != nil {
		tc = o.TLSConfig.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Username: o.Username, Password: o.Password, TLSConfig: tc,
		DialTimeout: min(o.DialTimeout, probeTimeout), DialerRetries: 1, MaxRetries: -1, Protocol: o.Protocol})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	raw, err := c.ClusterInfo(ctx).Result()
	switch {
	case redis.HasErrorPrefix(err, "This instance has cluster support disabled"):
		return "answers, but is not a Cluster node (cluster support disabled): for one server give one URL, without cluster=true"
	case err != nil:
		return err.Error()
	}
	return "answers, cluster_state " + fields(raw)["cluster_state"]
}

// seedsError names what each seed answered; it wraps the client's error
// (its classification: a refused login is permanent).
type seedsError struct {
	msg string
	err error
}

func (e *seedsError) Error() string { return e.msg }
func (e *seedsError) Unwrap() error { return e.err }

// checkReplicas refuses waitReplicas above the replicas t found: every
// claim would wait waitTimeoutMs and fail.
func checkReplicas(t TopologyReport, waitReplicas int) error {
	if waitReplicas > 0 && t.MinReplicas < waitReplicas {
		return fmt.Errorf("backend.redis.waitReplicas is %d but a master has %s up: every claim would wait waitTimeoutMs and fail; lower waitReplicas or add replicas",
			waitReplicas, plural(t.MinReplicas, "replica"))
	}
	return nil
}

// CheckTopology connects to the Redis of o (o.URL, o.PasswordFile, o.TLS)
// and reports what it reached, for anarchond validate; it refuses a URL
// that names a replica, and o.WaitReplicas above the replicas a master
// has. Its errors never contain a password.
func CheckTopology(ctx context.Context, o Options) (TopologyReport, error) {
	o, err := Options{URL: o.URL, PasswordFile: o.PasswordFile, TLS: o.TLS, WaitReplicas: o.WaitReplicas}.withDefaults()
	if err != nil {
		return TopologyReport{}, fmt.Errorf("redis: %w", err)
	}
	cc, err := parseURL(o.URL, o.PasswordFile)
	if err != nil {
		return TopologyReport{}, fmt.Errorf("redis: %w", err)
	}
	c, _, err := connect(ctx, o)
	if err != nil {
		return TopologyReport{}, err
	}
	defer c.Close()
	t, err := describe(ctx, c, cc)
	if err == nil {
		err = checkReplicas(t, o.WaitReplicas)
	}
	if err != nil {
		return t, fmt.Errorf("redis %s: %w", secret.Redact(o.URL), secret.Scrub(err, cc.secrets...))
	}
	return t, nil
}
