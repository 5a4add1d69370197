package natsclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Topology is what the backend found of the NATS deployment at open: a
// single server, or a cluster and the JetStream servers of it that
// answered.
type Topology struct {
	// Server is the name of the server the client is connected to.
	Server string
	// Cluster is the name of the cluster the stream is placed in (the
	// connected server's, or backend.nats.placementCluster); "" for a
	// single server.
	Cluster string
	// Servers are the JetStream servers of Cluster that answered, sorted.
	Servers []string
	// URLs is how many distinct server URLs of Cluster the client knows
	// (those of backend.nats.url and those the servers announce); 0 when
	// the stream is placed in another cluster than the connected one.
	URLs int
}

// Size is the number of servers of the cluster: those that answered, or
// the server URLs the client knows when there are more (a server that is
// down answers nothing, but its URL stays in backend.nats.url). A single
// server is 1.
func (t Topology) Size() int {
	if t.Cluster == "" {
		return 1
	}
	return max(len(t.Servers), t.URLs, 1)
}

// String says it in a line: "single server n1" or "cluster east of 3
// servers (n1, n2, n3)".
func (t Topology) String() string {
	if t.Cluster == "" {
		return "single server " + orUnnamed(t.Server)
	}
	s := fmt.Sprintf("cluster %s of %d servers", t.Cluster, t.Size())
	switch {
	case len(t.Servers) == 0:
		s += fmt.Sprintf(" (by the %d server URLs the client knows; none answered the server list request)", t.URLs)
	case len(t.Servers) < t.Size():
		s += fmt.Sprintf(" (%d answered: %s; the client knows %d server URLs)", len(t.Servers), strings.Join(t.Servers, ", "), t.URLs)
	default:
		s += " (" + strings.Join(t.Servers, ", ") + ")"
	}
	return s
}

func orUnnamed(name string) string {
	if name == "" {
		return "(unnamed)"
	}
	return name
}

// serverListSubject is the account-scoped request every server of the
// cluster answers for the client's own account (its connections there),
// with its name, cluster and whether it runs JetStream. No system account
// privilege is needed; a user denied it is counted by its URLs instead.
const serverListSubject = "$SYS.REQ.ACCOUNT.PING.CONNZ"

// How long discover waits for the servers' answers: until none came for
// listQuiet after the last one, and listWait in all.
const (
	listQuiet = 250 * time.Millisecond
	listWait  = time.Second
)

// discover finds the topology: the connected server's cluster (or the
// placement cluster), the JetStream servers of it that answer, and the
// server URLs the client knows.
func discover(ctx context.Context, nc *nats.Conn, placementCluster string) Topology {
	t := Topology{Server: nc.ConnectedServerName(), Cluster: nc.ConnectedClusterName()}
	if t.Cluster == "" && placementCluster == "" {
		t.Servers = []string{t.Server}
		return t
	}
	connected := t.Cluster
	if placementCluster != "" {
		t.Cluster = placementCluster
	}
	t.Servers = listServers(ctx, nc, t.Cluster)
	if t.Cluster == connected {
		t.URLs = len(distinctHosts(nc.Servers()))
	}
	return t
}

// serverInfo is the part of a server's answer to serverListSubject that
// discover reads.
type serverInfo struct {
	Server struct {
		Name      string `json:"name"`
		Cluster   string `json:"cluster"`
		JetStream bool   `json:"jetstream"`
	} `json:"server"`
}

// listServers asks every server of the account for its name and returns
// the JetStream servers of cluster that answer, sorted.
func listServers(ctx context.Context, nc *nats.Conn, cluster string) []string {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(serverListSubject, inbox, []byte(`{"limit":1}`)); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, listWait)
	defer cancel()
	var names []string
	for answers := 0; ; answers++ {
		// Until the first answer, the whole wait; then a quiet spell.
		wait, stop := ctx, context.CancelFunc(func() {})
		if answers > 0 {
			wait, stop = context.WithTimeout(ctx, listQuiet)
		}
		m, err := sub.NextMsgWithContext(wait)
		stop()
		if err != nil {
			break
		}
		var si serverInfo
		if json.Unmarshal(m.Data, &si) != nil || !si.Server.JetStream || si.Server.Cluster != cluster || si.Server.Name == "" {
			continue
		}
		if !slices.Contains(names, si.Server.Name) {
			names = append(names, si.Server.Name)
		}
	}
	slices.Sort(names)
	return names
}

// distinctHosts returns the distinct host:port of the server URLs.
func distinctHosts(urls []string) []string {
	var out []string
	for _, raw := range urls {
		h := hostPort(raw)
		if h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// hostPort is the host:port a server URL dials ("" when it cannot be
// parsed), with the default port of its scheme.
func hostPort(raw string) string {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		raw = "nats://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "4222"
	switch u.Scheme {
	case "ws":
		port = "80"
	case "wss":
		port = "443"
	}
	if strings.Contains(u.Hostname(), ":") {
		return "[" + u.Hostname() + "]:" + port
	}
	return u.Hostname() + ":" + port
}
