package natsclaim

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/anarchon/anarchon/internal/claim"
)

var (
	single  = Topology{Server: "solo"}
	three   = Topology{Server: "n1", Cluster: "east", Servers: []string{"n1", "n2", "n3"}, URLs: 3}
	oneDown = Topology{Server: "n1", Cluster: "east", Servers: []string{"n1", "n2"}, URLs: 3}
	two     = Topology{Server: "n1", Cluster: "east", Servers: []string{"n1", "n2"}, URLs: 2}
)

func TestTopologySize(t *testing.T) {
	for _, c := range []struct {
		t    Topology
		size int
		says string
	}{
		{single, 1, "single server solo"},
		{three, 3, "cluster east of 3 servers (n1, n2, n3)"},
		// A server down keeps its URL in the list: still 3.
		{oneDown, 3, "cluster east of 3 servers (2 answered: n1, n2; the client knows 3 server URLs)"},
		{Topology{Cluster: "east", URLs: 3}, 3, "none answered"},
		{two, 2, "cluster east of 2 servers (n1, n2)"},
	} {
		if got := c.t.Size(); got != c.size {
			t.Errorf("%+v: size %d, want %d", c.t, got, c.size)
		}
		if !strings.Contains(c.t.String(), c.says) {
			t.Errorf("%+v: %q does not say %q", c.t, c.t.String(), c.says)
		}
	}
}

func TestPlanReplicas(t *testing.T) {
	for _, c := range []struct {
		replicas int
		t        Topology
		want     int
		refused  string
	}{
		{0, single, 1, ""},
		{0, two, 1, ""},
		{0, three, 3, ""},
		{0, oneDown, 3, ""},
		{0, Topology{Cluster: "east", Servers: []string{"a", "b", "c", "d", "e"}}, 3, ""},
		{1, three, 1, ""},
		{3, three, 3, ""},
		{2, two, 2, ""},
		{5, three, 0, "backend.nats.replicas is 5, but the server found a cluster east of 3 servers"},
		{3, single, 0, "the server solo is a single server, not a cluster"},
		{3, two, 0, "set backend.nats.replicas to at most 2"},
	} {
		p, err := planReplicas(Options{Replicas: c.replicas}, c.t)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("replicas %d on %s: %v", c.replicas, c.t, err)
		case c.refused == "" && p.want != c.want:
			t.Errorf("replicas %d on %s: want %d, got %d", c.replicas, c.t, c.want, p.want)
		case c.refused != "" && (!claim.IsPermanent(err) || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("replicas %d on %s: want a refusal saying %q, got %v", c.replicas, c.t, c.refused, err)
		}
	}
}

func TestReplicaWarnings(t *testing.T) {
	auto3, _ := planReplicas(Options{}, three)
	auto2, _ := planReplicas(Options{}, two)
	auto1, _ := planReplicas(Options{}, single)
	cfg := func(r int, p *jetstream.Placement) jetstream.StreamConfig {
		return jetstream.StreamConfig{Name: "S", Replicas: r, Placement: p}
	}
	for _, c := range []struct {
		what string
		cfg  jetstream.StreamConfig
		plan replicaPlan
		o    Options
		n    int      // warnings
		says []string // what they say, together
	}{
		{"R3 on a cluster of 3", cfg(3, nil), auto3, Options{}, 0, nil},
		{"R1 on a single server", cfg(1, nil), auto1, Options{}, 0, nil},
		{"R1 where 3 are wanted", cfg(1, nil), auto3, Options{}, 1, []string{
			"stream S has 1 replica(s), fewer than the 3 wanted (chosen for a cluster of 3 servers)",
			"when the server holding it stops, no claim is decided", "fix: nats stream edit S --replicas 3"}},
		{"R2 where 3 are wanted", cfg(2, nil), auto3, Options{}, 1, []string{
			"stops deciding claims when 1 of its servers are down", "fix: nats stream edit S --replicas 3"}},
		{"R1 on a cluster of 2", cfg(1, nil), auto2, Options{}, 1, []string{
			"stream S has 1 replica on the cluster east of 2 servers (n1, n2)", "fix: nats stream edit S --replicas 2"}},
		{"R5 where 3 are wanted", cfg(5, nil), auto3, Options{}, 0, nil},
		{"placed as configured", cfg(3, &jetstream.Placement{Tags: []string{"a", "b"}}), auto3, Options{PlacementTags: []string{"a"}}, 0, nil},
		{"placed otherwise", cfg(3, nil), auto3, Options{PlacementTags: []string{"ssd"}, PlacementCluster: "east"}, 1, []string{
			`not as backend.nats.placementCluster "east" and placementTags [ssd] say`,
			"fix: nats stream edit S --cluster east --tag ssd"}},
	} {
		got := replicaWarnings(c.cfg, c.plan, c.o)
		all := strings.Join(got, "\n")
		if len(got) != c.n {
			t.Errorf("%s: warnings %q, want %d", c.what, got, c.n)
		}
		for _, want := range c.says {
			if !strings.Contains(all, want) {
				t.Errorf("%s: the warnings do not say %q:\n%s", c.what, want, all)
			}
		}
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"nats://a:4223":        "a:4223",
		"nats://u:p@a":         "a:4222",
		"tls://a":              "a:4222",
		"ws://a":               "a:80",
		"wss://a":              "a:443",
		"a:5222":               "a:5222",
		"nats://[::1]":         "[::1]:4222",
		"nats://%zz@host:4222": "",
	} {
		if got := hostPort(in); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
	if got := hostPort(" nats://b:4222\t"); got != "b:4222" {
		t.Errorf("hostPort with spaces around = %q, want b:4222", got)
	}
	if got := distinctHosts([]string{"nats://a:4222", "nats://a", "nats://b:4222"}); len(got) != 2 {
		t.Errorf("distinctHosts: %v, want a:4222 and b:4222", got)
	}
}
