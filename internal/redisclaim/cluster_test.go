package redisclaim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/redisclaim"
)

// failoverJobs is how many every-second jobs the failover tests run.
const failoverJobs = 20

// TestClusterFailover: 3 instances claim 20 every-second jobs on a private
// Redis Cluster (3 masters, a replica each, cluster-node-timeout 2000 ms),
// in a namespace whose index of jobs lives on the master that holds the
// most jobs; that master is killed (SIGKILL). No run is won twice; the
// dead master's jobs are back within failoverResume of its replica
// reporting itself master, the others never pause more than otherPause.
// The clients reload the slot map every minute only (go-redis's default):
// they follow the failover on its errors.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster (about 25 s a strategy)")
	}
	for _, strategy := range []string{redisclaim.StrategyLease, redisclaim.StrategyScript} {
		t.Run(strategy, func(t *testing.T) { clusterFailover(t, strategy) })
	}
}

func clusterFailover(t *testing.T, strategy string) {
	rc := startCluster(t)
	topo, err := redisclaim.CheckTopology(t.Context(), redisclaim.Options{URL: rc.URL, WaitReplicas: 1})
	if want := "redis topology: Cluster of 3 masters, 3 replicas (every master has at least 1), cluster_state ok"; err != nil || topo.String() != want {
		t.Errorf("validate's topology: got %q %v, want %q", topo, err, want)
	}
	masters := rc.slotMasters(t)
	jobs := make([]string, failoverJobs)
	for i := range jobs {
		jobs[i] = fmt.Sprintf("j%02d", i)
	}
	ns, victim, dead := pickNamespace(t, masters, jobs)
	t.Logf("namespace %s: %d of %d jobs and the index of jobs on %s", ns, len(dead), len(jobs), victim)
	load := &failoverLoad{jobs: jobs, lease: strategy == redisclaim.StrategyLease}
	for range 3 {
		load.backends = append(load.backends, openOn(t, rc.URL, ns, strategy, func(o *redisclaim.Options) {
			o.ReloadInterval = time.Minute
		}))
	}
	replica := rc.replicaOf(t, victim)
	kill, promoted := runFailover(t, load, func() { rc.node(victim).kill() }, replica)
	load.report(kill, promoted, dead).check(t, "cluster "+strategy)
	checkStatusLists(t, load.backends[0], jobs)
}

// runFailover runs load, kills a master with kill once every job has run,
// waits for replica to report itself master, runs 6 s more and stops.
func runFailover(t *testing.T, load *failoverLoad, kill func(), replica *redisProc) (killed, promoted time.Time) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { load.run(ctx); close(done) }()
	defer func() { stop(); <-done }()
	await(t, 20*time.Second, "every job to run twice", func() error {
		load.mu.Lock()
		defer load.mu.Unlock()
		won := map[string]int{}
		for _, a := range load.answers {
			if a.outcome == claim.Won {
				won[a.job]++
			}
		}
		for _, j := range load.jobs {
			if won[j] < 2 {
				return fmt.Errorf("job %s won %d times", j, won[j])
			}
		}
		return nil
	})
	// Half-way between two slots.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)))
	killed = time.Now()
	kill()
	rcl := replica.client(t)
	await(t, 60*time.Second, "the replica "+replica.Addr+" to report itself master", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		r, err := role(ctx, rcl)
		if err == nil && r != "master" {
			err = errors.New("role " + r)
		}
		return err
	})
	promoted = time.Now()
	t.Logf("the replica reported itself master %v after the kill", promoted.Sub(killed).Round(time.Millisecond))
	time.Sleep(6 * time.Second)
	stop()
	<-done
	return killed, promoted
}

// checkStatusLists fails t unless status (ListRuns) lists runs of every
// job.
func checkStatusLists(t *testing.T, b claim.Backend, jobs []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runs, err := b.ListRuns(ctx, claim.ListQuery{Limit: 100000})
	if err != nil {
		t.Fatalf("status after the failover: %v", err)
	}
	seen := map[string]bool{}
	for _, r := range runs {
		seen[r.Job] = true
	}
	for _, j := range jobs {
		if !seen[j] {
			t.Errorf("status lists no run of job %s", j)
		}
	}
}

// openOn opens a backend of strategy on the Redis at url, closed when t
// ends.
func openOn(t testing.TB, url, ns, strategy string, mod ...func(*redisclaim.Options)) claim.Backend {
	t.Helper()
	o := redisclaim.Options{URL: url, Namespace: ns, Strategy: strategy}
	for _, m := range mod {
		m(&o)
	}
	var b claim.Backend
	var err error
	if strategy == redisclaim.StrategyLease {
		b, err = redisclaim.New(t.Context(), o)
	} else {
		b, err = redisclaim.NewClaimOnly(t.Context(), o)
	}
	if err != nil {
		t.Fatalf("open %s on %s: %v", strategy, url, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// slotMasters maps every hash slot to its master's address.
func (rc *redisCluster) slotMasters(t testing.TB) []string {
	t.Helper()
	shards, err := rc.nodes[0].client(t).ClusterShards(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 16384)
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role != "master" {
				continue
			}
			for _, r := range sh.Slots {
				for i := r.Start; i <= r.End; i++ {
					out[i] = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
				}
			}
		}
	}
	return out
}

// pickNamespace draws namespaces until the master that holds the most of
// jobs also holds the index of jobs (<ns>:jobs); it returns the namespace,
// that master and its jobs.
func pickNamespace(t testing.TB, masters []string, jobs []string) (ns, victim string, dead map[string]bool) {
	t.Helper()
	for range 10000 {
		ns = "ha-" + strconv.FormatUint(rand.Uint64(), 36)
		per := map[string][]string{}
		for _, j := range jobs {
			m := masters[keySlot("{"+ns+":"+j+"}:state")]
			per[m] = append(per[m], j)
		}
		victim = ""
		for m, js := range per {
			if victim == "" || len(js) > len(per[victim]) {
				victim = m
			}
		}
		if masters[keySlot(ns+":jobs")] != victim {
			continue
		}
		dead = map[string]bool{}
		for _, j := range per[victim] {
			dead[j] = true
		}
		return ns, victim, dead
	}
	t.Fatal("no namespace puts the index of jobs on the busiest master")
	return "", "", nil
}
