package redisclaim

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/secret"
)

// Topology is how the client reaches Redis.
type Topology string

// The topologies a URL may name (see the package documentation).
const (
	Single   Topology = "single"
	Cluster  Topology = "cluster"
	Sentinel Topology = "sentinel"
)

// Query options anarchon reads itself; go-redis never sees them.
const (
	optCluster              = "cluster"
	optSentinelUsername     = "sentinel_username"
	optSentinelPasswordFile = "sentinel_password_file"
	optMasterName           = "master_name"
	optAddr                 = "addr"
	optSkipVerify           = "skip_verify"
)

// clientConfig is a parsed backend.redis.url: the topology and go-redis's
// options for it (exactly one of the three is set).
type clientConfig struct {
	Topology Topology
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
	// secrets are the passwords it carries, to scrub from errors.
	secrets []string
}

// newClient makes the go-redis client of the topology. These are the
// clients redis.NewUniversalClient makes; they are built from go-redis's own
// URL parsers' options so that no option is lost in a conversion to
// redis.UniversalOptions.
func (c *clientConfig) newClient() redis.UniversalClient {
	switch {
	case c.cluster != nil:
		return redis.NewClusterClient(c.cluster)
	case c.failover != nil && (c.failover.RouteByLatency || c.failover.RouteRandomly):
		return redis.NewFailoverClusterClient(c.failover)
	case c.failover != nil:
		return redis.NewFailoverClient(c.failover)
	default:
		return redis.NewClient(c.single)
	}
}

// parseURL parses backend.redis.url (see the package documentation) and
// applies passwordFile. Its errors never quote the URL or a password.
func parseURL(raw, passwordFile string) (*clientConfig, error) {
	u, extra, err := mergeURLs(raw)
	if err != nil {
		return nil, err
	}
	p := &urlParse{u: u, q: u.Query(), cc: &clientConfig{}}
	if err := p.readPassword(passwordFile); err != nil {
		return nil, err
	}
	if err := p.readOwnOptions(extra); err != nil {
		return nil, err
	}
	if err := p.chooseTopology(); err != nil {
		return nil, err
	}
	// go-redis's parsers take the other addresses as addr= options.
	p.q.Del(optAddr)
	for _, a := range p.addrs {
		p.q.Add(optAddr, a)
	}

	switch p.cc.Topology {
	case Single:
		err = p.single()
	case Cluster:
		err = p.cluster()
	case Sentinel:
		err = p.sentinel()
	}
	if err != nil {
		return nil, err
	}
	return p.cc, nil
}

// urlParse carries one backend.redis.url through parseURL's steps: the
// merged URL and the query left for go-redis, the options anarchon reads
// itself, and the clientConfig being built.
type urlParse struct {
	u  *url.URL
	q  url.Values
	cc *clientConfig

	// password is backend.redis.passwordFile's content; it replaces the
	// URL's password when havePassword.
	password     string
	havePassword bool

	clusterFlag          bool
	sentinelUser         string
	sentinelPasswordFile string
	// addrs are the other servers, from the URL list and addr= options.
	addrs  []string
	master string
}

// readPassword notes the URL's password as a secret and reads
// passwordFile, when set, as the data servers' password.
func (p *urlParse) readPassword(passwordFile string) error {
	if p.u.User != nil {
		if pw, ok := p.u.User.Password(); ok {
			p.cc.secrets = append(p.cc.secrets, pw)
		}
	}
	if passwordFile == "" {
		return nil
	}
	var err error
	if p.password, err = secret.ReadFile(passwordFile, "backend.redis.passwordFile"); err != nil {
		return err
	}
	p.havePassword = true
	p.cc.secrets = append(p.cc.secrets, p.password)
	return nil
}

// readOwnOptions refuses credentials given as options and takes out of the
// query the options anarchon reads itself; extra are the other URLs' hosts
// of a list.
func (p *urlParse) readOwnOptions(extra []string) error {
	for _, k := range []string{"password", "username", "sentinel_password"} {
		if p.q.Has(k) {
			return fmt.Errorf("option %s is not accepted: put the user name and password in the URL's user info (redis://user:password@host) or the password in backend.redis.passwordFile", k)
		}
	}
	var err error
	if p.clusterFlag, err = popBool(p.q, optCluster); err != nil {
		return err
	}
	p.sentinelUser = pop(p.q, optSentinelUsername)
	p.sentinelPasswordFile = pop(p.q, optSentinelPasswordFile)
	p.addrs = slices.Concat(extra, p.q[optAddr])
	p.master = p.q.Get(optMasterName)
	return nil
}

// chooseTopology sets the topology the options name: Sentinel with a
// master name, Cluster with cluster=true or more than one address, else
// one server. It refuses options that contradict each other.
func (p *urlParse) chooseTopology() error {
	if p.u.Scheme == "unix" {
		if len(p.addrs) > 0 || p.clusterFlag || p.master != "" {
			return errors.New("a unix:// URL names one server: it cannot be a Cluster or Sentinel list")
		}
	}
	if p.master == "" && (p.sentinelUser != "" || p.sentinelPasswordFile != "") {
		return fmt.Errorf("%s and %s need %s (a Sentinel URL)", optSentinelUsername, optSentinelPasswordFile, optMasterName)
	}
	switch {
	case p.master != "":
		if p.clusterFlag {
			return fmt.Errorf("%s and %s=true exclude each other: Sentinel or Cluster?", optMasterName, optCluster)
		}
		p.cc.Topology = Sentinel
	case p.clusterFlag || len(p.addrs) > 0:
		p.cc.Topology = Cluster
	default:
		p.cc.Topology = Single
	}
	return nil
}

// single builds the options of one server (redis://, rediss:// or unix://).
func (p *urlParse) single() error {
	o, err := goRedisParse(p.u, p.q, redis.ParseURL)
	if err != nil {
		return err
	}
	if p.havePassword {
		o.Password = p.password
	}
	p.cc.single = o
	return nil
}

// cluster builds the options of a Redis Cluster, which has only database 0
// and checks each node's certificate against that node's own name.
func (p *urlParse) cluster() error {
	if db, err := dbOf(p.u); err != nil || db != 0 {
		return errors.New("a Redis Cluster has only database 0: leave the database out of a cluster URL")
	}
	p.u.Path = ""
	skipVerify, err := popBool(p.q, optSkipVerify)
	if err != nil {
		return err
	}
	o, err := goRedisParse(p.u, p.q, redis.ParseClusterURL)
	if err != nil {
		return err
	}
	if p.havePassword {
		o.Password = p.password
	}
	if o.TLSConfig != nil {
		// Each node is checked against its own name, not the first seed's.
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: skipVerify}
	}
	p.cc.cluster = o
	return nil
}

// sentinel builds the options of a master found through Sentinel. The
// user info is the data servers' credentials; the sentinels' come from
// sentinel_username and sentinel_password_file.
func (p *urlParse) sentinel() error {
	o, err := goRedisParse(p.u, p.q, redis.ParseFailoverURL)
	if err != nil {
		return err
	}
	// go-redis reads the user info as the sentinels' credentials; ours
	// are the data servers', as in the other topologies.
	o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
	o.SentinelUsername, o.SentinelPassword = p.sentinelUser, ""
	if p.havePassword {
		o.Password = p.password
	}
	if p.sentinelPasswordFile != "" {
		if o.SentinelPassword, err = secret.ReadFile(p.sentinelPasswordFile, optSentinelPasswordFile); err != nil {
			return err
		}
		p.cc.secrets = append(p.cc.secrets, o.SentinelPassword)
	}
	if o.ReplicaOnly {
		return errors.New("replica_only is refused: claims write to the master")
	}
	if o.TLSConfig != nil {
		// The master's name is the one the sentinels announce.
		o.TLSConfig.ServerName = ""
	}
	p.cc.failover = o
	return nil
}

// goRedisParse hands u, with the query q, to go-redis's parser of a
// topology's URL. Its error never quotes the URL.
func goRedisParse[O any](u *url.URL, q url.Values, parse func(string) (*O, error)) (*O, error) {
	u.RawQuery = q.Encode()
	o, err := parse(u.String())
	if err != nil {
		return nil, parseErr(err)
	}
	return o, nil
}

// applyTLS makes the client use t (backend.redis.tls): it turns TLS on for
// a redis:// URL and replaces the default configuration of a rediss:// one,
// keeping the URL's skip_verify. An empty t.ServerName is the URL's host
// for one server; in a Cluster or behind Sentinel each server is checked
// against the name the client dials. A unix:// URL takes no TLS.
func (c *clientConfig) applyTLS(t *tls.Config) error {
	if t == nil {
		return nil
	}
	merge := func(old *tls.Config, serverName string) *tls.Config {
		n := t.Clone()
		if n.ServerName == "" {
			n.ServerName = serverName
		}
		if old != nil && old.InsecureSkipVerify {
			n.InsecureSkipVerify = true
		}
		return n
	}
	switch {
	case c.cluster != nil:
		c.cluster.TLSConfig = merge(c.cluster.TLSConfig, "")
	case c.failover != nil:
		c.failover.TLSConfig = merge(c.failover.TLSConfig, "")
	default:
		if c.single.Network == "unix" {
			return errors.New("backend.redis.tls is set but a unix:// URL carries no TLS")
		}
		host, _, err := net.SplitHostPort(c.single.Addr)
		if err != nil {
			host = c.single.Addr
		}
		c.single.TLSConfig = merge(c.single.TLSConfig, host)
	}
	return nil
}

// mergeURLs parses raw, one URL or a comma-separated list of URLs, into one
// URL (the first one's host) and the host:port of the others. User info,
// database and options may be written on any one URL of a list, or
// repeated identically.
func mergeURLs(raw string) (*url.URL, []string, error) {
	parts := strings.Split(raw, ",")
	var base *url.URL
	var extra []string
	for i, p := range parts {
		p = strings.TrimSpace(p)
		which := "the URL"
		if len(parts) > 1 {
			which = fmt.Sprintf("URL %d of the list", i+1)
		}
		if p == "" {
			return nil, nil, fmt.Errorf("%s is empty", which)
		}
		u, err := url.Parse(p)
		if err != nil {
			// url.Parse's message quotes the URL, password and all.
			return nil, nil, fmt.Errorf("%s is not a valid URL (percent-encode special characters such as @ / : %% # ? in the user name and password)", which)
		}
		switch u.Scheme {
		case "redis", "rediss", "unix":
		default:
			return nil, nil, fmt.Errorf("%s must start with redis://, rediss:// or unix://", which)
		}
		if u.Scheme != "unix" && u.Host == "" {
			return nil, nil, fmt.Errorf("%s has no host", which)
		}
		if i == 0 {
			base = u
			continue
		}
		if u.Scheme == "unix" || base.Scheme == "unix" {
			return nil, nil, errors.New("a unix:// URL names one server: it cannot be part of a list")
		}
		if u.Scheme != base.Scheme {
			return nil, nil, errors.New("the URLs of a list must all be redis:// or all rediss://")
		}
		if err := mergeInto(base, u); err != nil {
			return nil, nil, err
		}
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = "6379"
		}
		extra = append(extra, net.JoinHostPort(host, port))
	}
	return base, extra, nil
}

// mergeInto copies u's user info, database and options into base, where
// base has none or the same.
func mergeInto(base, u *url.URL) error {
	if u.User != nil {
		switch {
		case base.User == nil:
			base.User = u.User
		case base.User.String() != u.User.String():
			return errors.New("the URLs of a list name different user names or passwords")
		}
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		switch bp := strings.Trim(base.Path, "/"); {
		case bp == "":
			base.Path = u.Path
		case bp != p:
			return errors.New("the URLs of a list name different databases")
		}
	}
	bq, uq := base.Query(), u.Query()
	for k, vs := range uq {
		switch {
		case k == optAddr:
			bq[k] = append(bq[k], vs...)
		case !bq.Has(k):
			bq[k] = vs
		case !slices.Equal(bq[k], vs):
			return fmt.Errorf("the URLs of a list set option %s differently", k)
		}
	}
	base.RawQuery = bq.Encode()
	return nil
}

// dbOf is the database number in u's path (0 when none).
func dbOf(u *url.URL) (int, error) {
	p := strings.Trim(u.Path, "/")
	if p == "" {
		return 0, nil
	}
	return strconv.Atoi(p)
}

// pop removes option k from q and returns its last value.
func pop(q url.Values, k string) string {
	vs := q[k]
	q.Del(k)
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// popBool removes the boolean option k from q and returns its value.
func popBool(q url.Values, k string) (bool, error) {
	switch v := pop(q, k); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, fmt.Errorf("option %s: want true or false, not %q", k, v)
	}
}

// parseErr rewords a go-redis parser error; those name options and
// addresses, never the user info.
func parseErr(err error) error {
	return fmt.Errorf("bad URL: %s", strings.TrimPrefix(err.Error(), "redis: "))
}
