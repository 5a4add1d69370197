package redisclaim_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/redisclaim"
)

// TestSentinelFailover: 3 instances claim 20 every-second jobs through a
// private Sentinel set (a master, a replica, 3 sentinels, quorum 2,
// down-after-milliseconds 2000); the master is killed (SIGKILL). No run
// is won twice, and every job is back within failoverResume of the
// replica reporting itself master.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Sentinel set (about 20 s)")
	}
	master, replica, url := startSentinelSet(t)
	topo, err := redisclaim.CheckTopology(t.Context(), redisclaim.Options{URL: url, WaitReplicas: 1})
	want := regexp.MustCompile(`^redis topology: Sentinel master anarchon at ` + regexp.QuoteMeta(master.Addr) +
		` \(Redis 7\.[0-9.]+\), 1 replica, 3 sentinels \(quorum 2\)$`)
	if err != nil || !want.MatchString(topo.String()) {
		t.Errorf("validate's topology: got %q %v", topo, err)
	}
	jobs := make([]string, failoverJobs)
	dead := map[string]bool{}
	for i := range jobs {
		jobs[i] = fmt.Sprintf("j%02d", i)
		dead[jobs[i]] = true
	}
	load := &failoverLoad{jobs: jobs, lease: true}
	for range 3 {
		load.backends = append(load.backends, openOn(t, url, "ha", redisclaim.StrategyLease))
	}
	kill, promoted := runFailover(t, load, master.kill, replica)
	load.report(kill, promoted, dead).check(t, "sentinel lease")
	checkStatusLists(t, load.backends[0], jobs)
}

// sentinelMaster is the master name of the private Sentinel sets.
const sentinelMaster = "anarchon"

// startSentinelSet starts a master, its replica and 3 sentinels that
// monitor it, and waits until each sentinel knows the replica and the
// other sentinels. It returns the master, the replica and the URL of the
// set.
func startSentinelSet(t testing.TB) (master, replica *redisProc, url string) {
	t.Helper()
	master = startRedis(t, freePort(t, false), "")
	replica = startRedis(t, freePort(t, false), fmt.Sprintf("replicaof 127.0.0.1 %d\n", master.Port))
	rcl := replica.client(t)
	await(t, 20*time.Second, "the replica to sync", func() error {
		info, err := rcl.Info(t.Context(), "replication").Result()
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			err = fmt.Errorf("replica not in sync: %s", info)
		}
		return err
	})
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %[1]s 2000\n"+
		"sentinel failover-timeout %[1]s 10000\n", sentinelMaster, master.Port)
	var urls []string
	for range 3 {
		s := startRedis(t, freePort(t, false), conf, "--sentinel")
		urls = append(urls, "redis://"+s.Addr)
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		t.Cleanup(func() { sc.Close() })
		await(t, 30*time.Second, "sentinel "+s.Addr+" to know the replica and the other sentinels", func() error {
			return sentinelReady(t.Context(), sc, len(urls)-1)
		})
	}
	for _, u := range urls {
		sc := redis.NewSentinelClient(&redis.Options{Addr: strings.TrimPrefix(u, "redis://")})
		t.Cleanup(func() { sc.Close() })
		await(t, 30*time.Second, "sentinel "+u+" to know the other 2", func() error {
			return sentinelReady(t.Context(), sc, 2)
		})
	}
	return master, replica, strings.Join(urls, ",") + "/0?master_name=" + sentinelMaster
}

// sentinelReady returns nil once the sentinel knows the master's replica
// and others other sentinels.
func sentinelReady(ctx context.Context, sc *redis.SentinelClient, others int) error {
	m, err := sc.Master(ctx, sentinelMaster).Result()
	if err != nil {
		return err
	}
	if m["num-slaves"] != "1" || m["num-other-sentinels"] != strconv.Itoa(others) {
		return fmt.Errorf("num-slaves %s, num-other-sentinels %s", m["num-slaves"], m["num-other-sentinels"])
	}
	return nil
}
