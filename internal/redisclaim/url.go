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
	q := u.Query()
	cc := &clientConfig{}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			cc.secrets = append(cc.secrets, pw)
		}
	}
	var password string
	havePassword := false
	if passwordFile != "" {
		if password, err = secret.ReadFile(passwordFile, "backend.redis.passwordFile"); err != nil {
			return nil, err
		}
		havePassword = true
		cc.secrets = append(cc.secrets, password)
	}
	for _, k := range []string{"password", "username", "sentinel_password"} {
		if q.Has(k) {
			return nil, fmt.Errorf("option %s is not accepted: put the user name and password in the URL's user info (redis://user:password@host) or the password in backend.redis.passwordFile", k)
		}
	}
	clusterFlag, err := popBool(q, optCluster)
	if err != nil {
		return nil, err
	}
	sentinelUser := pop(q, optSentinelUsername)
	sentinelPasswordFile := pop(q, optSentinelPasswordFile)
	addrs := slices.Concat(extra, q[optAddr])
	master := q.Get(optMasterName)

	if u.Scheme == "unix" {
		if len(addrs) > 0 || clusterFlag || master != "" {
			return nil, errors.New("a unix:// URL names one server: it cannot be a Cluster or Sentinel list")
		}
	}
	if master == "" && (sentinelUser != "" || sentinelPasswordFile != "") {
		return nil, fmt.Errorf("%s and %s need %s (a Sentinel URL)", optSentinelUsername, optSentinelPasswordFile, optMasterName)
	}
	switch {
	case master != "":
		if clusterFlag {
			return nil, fmt.Errorf("%s and %s=true exclude each other: Sentinel or Cluster?", optMasterName, optCluster)
		}
		cc.Topology = Sentinel
	case clusterFlag || len(addrs) > 0:
		cc.Topology = Cluster
	default:
		cc.Topology = Single
	}
	// go-redis's parsers take the other addresses as addr= options.
	q.Del(optAddr)
	for _, a := range addrs {
		q.Add(optAddr, a)
	}

	switch cc.Topology {
	case Single:
		o, err := goRedisParse(u, q, redis.ParseURL)
		if err != nil {
			return nil, err
		}
		if havePassword {
			o.Password = password
		}
		cc.single = o
	case Cluster:
		if db, err := dbOf(u); err != nil || db != 0 {
			return nil, errors.New("a Redis Cluster has only database 0: leave the database out of a cluster URL")
		}
		u.Path = ""
		skipVerify, err := popBool(q, optSkipVerify)
		if err != nil {
			return nil, err
		}
		o, err := goRedisParse(u, q, redis.ParseClusterURL)
		if err != nil {
			return nil, err
		}
		if havePassword {
			o.Password = password
		}
		if o.TLSConfig != nil {
			// Each node is checked against its own name, not the first seed's.
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: skipVerify}
		}
		cc.cluster = o
	case Sentinel:
		o, err := goRedisParse(u, q, redis.ParseFailoverURL)
		if err != nil {
			return nil, err
		}
		// go-redis reads the user info as the sentinels' credentials; ours
		// are the data servers', as in the other topologies.
		o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
		o.SentinelUsername, o.SentinelPassword = sentinelUser, ""
		if havePassword {
			o.Password = password
		}
		if sentinelPasswordFile != "" {
			if o.SentinelPassword, err = secret.ReadFile(sentinelPasswordFile, optSentinelPasswordFile); err != nil {
				return nil, err
			}
			cc.secrets = append(cc.secrets, o.SentinelPassword)
		}
		if o.ReplicaOnly {
			return nil, errors.New("replica_only is refused: claims write to the master")
		}
		if o.TLSConfig != nil {
			// The master's name is the one the sentinels announce.
			o.TLSConfig.ServerName = ""
		}
		cc.failover = o
	}
	return cc, nil
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
