package pgclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Topology is what the hosts of a DSN said about themselves: which one is
// the primary, its standbys and its synchronous replication settings.
// `anarchond validate` prints it (Check).
type Topology struct {
	// Hosts are the DSN's hosts, in its order.
	Hosts []HostState
}

// HostState is one host of the DSN.
type HostState struct {
	Addr string // host:port as the DSN names it
	// Err is why the host could not be asked; the rest is then zero.
	Err      error
	raw      error // Err as pgx returned it
	Standby  bool  // in recovery
	ReadOnly bool  // default_transaction_read_only on (a primary's sessions)
	Version  string
	// SyncNames is synchronous_standby_names; SyncCommit the
	// synchronous_commit in effect for the backend's sessions (its role,
	// database and backend.postgres.synchronousCommit).
	SyncNames, SyncCommit string
	// Replicas counts the rows of pg_stat_replication, SyncReplicas those
	// streaming as sync or quorum standbys; Hidden those whose state the
	// role may not see (pg_read_all_stats shows them).
	Replicas, SyncReplicas, Hidden int
	// ReplicaList names each replica: "name (state, sync_state)".
	ReplicaList string
}

// topologySQL is asked of every host.
const topologySQL = `SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on',
	current_setting('server_version'), current_setting('synchronous_standby_names'),
	current_setting('synchronous_commit'),
	(SELECT count(*) FROM pg_stat_replication)::int,
	(SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum'))::int,
	(SELECT count(*) FROM pg_stat_replication WHERE state IS NULL)::int,
	coalesce((SELECT string_agg(format('%s (%s, %s)', coalesce(application_name, '?'), coalesce(state, '?'),
		coalesce(sync_state, '?')), ', ' ORDER BY application_name) FROM pg_stat_replication), '')`

// Inspect asks every host of o.DSN, at once, what it is. It fails only
// when no host is a primary that accepts writes (the error names each
// host with what it said), or when o is invalid.
func Inspect(ctx context.Context, o Options) (*Topology, error) {
	c, err := setup(o)
	if err != nil {
		return nil, err
	}
	hosts := hostConfigs(c.cfg.ConnConfig)
	t := &Topology{Hosts: make([]HostState, len(hosts))}
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { t.Hosts[i] = probeHost(ctx, h) })
	}
	wg.Wait()
	if t.Primary() == nil {
		return nil, c.fail(t.noPrimary(c.dsn))
	}
	return t, nil
}

// noPrimary is the error of a topology without a primary: each host with
// its answer when one answered (a standby, a read-only server), else the
// hosts' connection errors as they are, so that a refusal (a wrong
// password, no such database) is classified as New classifies it.
func (t *Topology) noPrimary(dsn string) error {
	var said []string
	var raw []error
	for _, h := range t.Hosts {
		said = append(said, h.Addr+" "+h.role())
		if h.raw != nil {
			raw = append(raw, h.raw)
		}
	}
	if len(raw) == len(t.Hosts) {
		return fmt.Errorf("connect to postgres %s: %w", dsn, errors.Join(raw...))
	}
	return fmt.Errorf("postgres %s: %w", dsn, &noPrimaryError{hosts: said})
}

// hostConfigs is one connection configuration per host:port of cc, each
// with the attempts pgx would make on that host (sslmode=prefer tries TLS,
// then plaintext), and no check of the server's role: Inspect wants to
// hear from standbys too.
func hostConfigs(cc *pgx.ConnConfig) []*pgx.ConnConfig {
	all := append([]*pgconn.FallbackConfig{{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig}}, cc.Fallbacks...)
	var order []string
	by := map[string][]*pgconn.FallbackConfig{}
	for _, f := range all {
		k := hostPort(f.Host, f.Port)
		if by[k] == nil {
			order = append(order, k)
		}
		by[k] = append(by[k], f)
	}
	out := make([]*pgx.ConnConfig, 0, len(order))
	for _, k := range order {
		fs := by[k]
		one := cc.Copy()
		one.Host, one.Port, one.TLSConfig, one.Fallbacks = fs[0].Host, fs[0].Port, fs[0].TLSConfig, fs[1:]
		one.ValidateConnect = nil
		out = append(out, one)
	}
	return out
}

func hostPort(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
	}
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// probeHost connects to one host and asks topologySQL.
func probeHost(ctx context.Context, cc *pgx.ConnConfig) HostState {
	h := HostState{Addr: hostPort(cc.Host, cc.Port)}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		h.Err, h.raw = connectCause(err), err
		return h
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = conn.QueryRow(ctx, topologySQL).Scan(&h.Standby, &h.ReadOnly, &h.Version, &h.SyncNames, &h.SyncCommit,
		&h.Replicas, &h.SyncReplicas, &h.Hidden, &h.ReplicaList)
	if err != nil {
		h.Err = fmt.Errorf("ask its role: %w", err)
		h.raw = h.Err
	}
	return h
}

// connectCause is a failed connection's reason without pgx's preamble
// (which names the user and database, and the address Addr shows).
func connectCause(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	msg := ce.Unwrap().Error()
	if _, after, ok := strings.Cut(msg, "): "); ok {
		msg = after
	}
	return errors.New(strings.ReplaceAll(msg, "\n", "; "))
}

// Primary is the host that accepts writes, nil when none does.
func (t *Topology) Primary() *HostState {
	for i := range t.Hosts {
		if h := &t.Hosts[i]; h.Err == nil && !h.Standby && !h.ReadOnly {
			return h
		}
	}
	return nil
}

// role says what the host is, in a few words.
func (h HostState) role() string {
	switch {
	case h.Err != nil:
		return "could not be asked: " + h.Err.Error()
	case h.Standby:
		return "standby (in recovery), PostgreSQL " + h.Version
	case h.ReadOnly:
		return "read-only (default_transaction_read_only on), PostgreSQL " + h.Version
	}
	return "primary, PostgreSQL " + h.Version
}
