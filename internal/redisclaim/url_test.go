package redisclaim

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sentinelPw := filepath.Join(dir, "sentinel-pw")
	if err := os.WriteFile(sentinelPw, []byte("sentinel-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("single", func(t *testing.T) {
		cc, err := parseURL("redis://app:pa%40ss@cache:6380/2?dial_timeout=3&pool_size=7", "")
		if err != nil {
			t.Fatal(err)
		}
		o := cc.single
		if cc.Topology != Single || o == nil || o.Addr != "cache:6380" || o.DB != 2 || o.Username != "app" ||
			o.Password != "pa@ss" || o.DialTimeout != 3*time.Second || o.PoolSize != 7 || o.TLSConfig != nil {
			t.Fatalf("got %s %+v", cc.Topology, o)
		}
		if !slices.Contains(cc.secrets, "pa@ss") {
			t.Fatalf("the URL's password must be a secret to scrub: %v", cc.secrets)
		}
	})
	t.Run("single defaults", func(t *testing.T) {
		cc, err := parseURL("redis://127.0.0.1", "")
		if err != nil {
			t.Fatal(err)
		}
		if o := cc.single; o.Addr != "127.0.0.1:6379" || o.DB != 0 || o.Password != "" {
			t.Fatalf("got %+v", o)
		}
	})
	t.Run("tls", func(t *testing.T) {
		cc, err := parseURL("rediss://cache.example:6380/0?skip_verify=true", "")
		if err != nil {
			t.Fatal(err)
		}
		if o := cc.single; o.TLSConfig == nil || o.TLSConfig.ServerName != "cache.example" || !o.TLSConfig.InsecureSkipVerify {
			t.Fatalf("got %+v", o.TLSConfig)
		}
	})
	t.Run("unix", func(t *testing.T) {
		cc, err := parseURL("unix:///run/redis/redis.sock?db=3", "")
		if err != nil {
			t.Fatal(err)
		}
		if o := cc.single; cc.Topology != Single || o.Network != "unix" || o.Addr != "/run/redis/redis.sock" || o.DB != 3 {
			t.Fatalf("got %+v", o)
		}
	})
	t.Run("password file overrides", func(t *testing.T) {
		cc, err := parseURL("redis://app:in-url@cache:6379/0", pwFile)
		if err != nil {
			t.Fatal(err)
		}
		if cc.single.Username != "app" || cc.single.Password != "from-file" {
			t.Fatalf("want user app with the file's password (CRLF trimmed), got %q/%q", cc.single.Username, cc.single.Password)
		}
		if !slices.Contains(cc.secrets, "from-file") || !slices.Contains(cc.secrets, "in-url") {
			t.Fatalf("both passwords are secrets: %v", cc.secrets)
		}
	})
	t.Run("cluster list", func(t *testing.T) {
		cc, err := parseURL("redis://app:pw@n1:7000, redis://n2:7001,redis://app:pw@n3?read_timeout=2s", pwFile)
		if err != nil {
			t.Fatal(err)
		}
		o := cc.cluster
		if cc.Topology != Cluster || o == nil || !slices.Equal(o.Addrs, []string{"n1:7000", "n2:7001", "n3:6379"}) ||
			o.Username != "app" || o.Password != "from-file" || o.ReadTimeout != 2*time.Second {
			t.Fatalf("got %s %+v", cc.Topology, o)
		}
	})
	t.Run("cluster addr options", func(t *testing.T) {
		cc, err := parseURL("rediss://n1:7000/0?addr=n2:7001&addr=n3:7002", "")
		if err != nil {
			t.Fatal(err)
		}
		o := cc.cluster
		if cc.Topology != Cluster || !slices.Equal(o.Addrs, []string{"n1:7000", "n2:7001", "n3:7002"}) {
			t.Fatalf("got %s %+v", cc.Topology, o)
		}
		if o.TLSConfig == nil || o.TLSConfig.ServerName != "" {
			t.Fatalf("cluster TLS must check each node against its own name: %+v", o.TLSConfig)
		}
	})
	t.Run("cluster one seed", func(t *testing.T) {
		cc, err := parseURL("redis://config-endpoint:6379?cluster=true", "")
		if err != nil {
			t.Fatal(err)
		}
		if cc.Topology != Cluster || !slices.Equal(cc.cluster.Addrs, []string{"config-endpoint:6379"}) {
			t.Fatalf("got %s %+v", cc.Topology, cc.cluster)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		cc, err := parseURL("redis://app:data-pw@s1:26379,redis://s2:26379/4?master_name=mymaster&sentinel_username=watcher&sentinel_password_file="+sentinelPw, "")
		if err != nil {
			t.Fatal(err)
		}
		o := cc.failover
		if cc.Topology != Sentinel || o == nil || o.MasterName != "mymaster" || o.DB != 4 ||
			!slices.Equal(o.SentinelAddrs, []string{"s1:26379", "s2:26379"}) {
			t.Fatalf("got %s %+v", cc.Topology, o)
		}
		if o.Username != "app" || o.Password != "data-pw" || o.SentinelUsername != "watcher" || o.SentinelPassword != "sentinel-secret" {
			t.Fatalf("the user info is the data servers' credentials, the sentinel's come from their options: got %q/%q, sentinel %q/%q",
				o.Username, o.Password, o.SentinelUsername, o.SentinelPassword)
		}
		if !slices.Contains(cc.secrets, "sentinel-secret") {
			t.Fatalf("the sentinel password is a secret: %v", cc.secrets)
		}
	})
	t.Run("sentinel without auth", func(t *testing.T) {
		cc, err := parseURL("redis://s1:26379?master_name=m&addr=s2:26379", pwFile)
		if err != nil {
			t.Fatal(err)
		}
		o := cc.failover
		if o.Password != "from-file" || o.SentinelPassword != "" || o.SentinelUsername != "" ||
			!slices.Equal(o.SentinelAddrs, []string{"s1:26379", "s2:26379"}) {
			t.Fatalf("got %+v", o)
		}
	})

	for _, tc := range []struct{ name, url, want string }{
		{"empty", "", "the URL is empty"},
		{"scheme", "http://cache:6379", "must start with redis://, rediss:// or unix://"},
		{"no host", "redis://", "has no host"},
		{"bad db", "redis://cache/x", "invalid database number"},
		{"unknown option", "redis://cache?frobnicate=1", "unexpected option: frobnicate"},
		{"password option", "redis://cache?password=x", "option password is not accepted"},
		{"mixed schemes", "redis://a:1,rediss://b:2", "must all be redis:// or all rediss://"},
		{"different users", "redis://u:p@a:1,redis://v:p@b:2", "different user names or passwords"},
		{"different dbs", "redis://a:1/1,redis://b:2/2?master_name=m", "different databases"},
		{"different options", "redis://a:1?dial_timeout=1,redis://b:2?dial_timeout=2", "option dial_timeout differently"},
		{"empty part", "redis://a:1,,redis://b:2", "URL 2 of the list is empty"},
		{"unix list", "unix:///a.sock,unix:///b.sock", "cannot be part of a list"},
		{"unix cluster", "unix:///a.sock?cluster=true", "unix:// URL names one server"},
		{"cluster db", "redis://a:1/3,redis://b:2", "only database 0"},
		{"cluster flag", "redis://a:1?cluster=maybe", "option cluster: want true or false"},
		{"cluster and sentinel", "redis://a:1?cluster=true&master_name=m", "exclude each other"},
		{"sentinel options alone", "redis://a:1?sentinel_username=x", "need master_name"},
		{"replica only", "redis://a:26379?master_name=m&replica_only=true", "replica_only is refused"},
		{"missing sentinel password file", "redis://a:26379?master_name=m&sentinel_password_file=/nonexistent/pw", "read sentinel_password_file"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			_, err := parseURL(tc.url, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseURL(%q): want an error containing %q, got %v", tc.url, tc.want, err)
			}
		})
	}
	t.Run("refuses an empty password file", func(t *testing.T) {
		empty := filepath.Join(dir, "empty")
		if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := parseURL("redis://a:1", empty); err == nil || !strings.Contains(err.Error(), "is empty") {
			t.Fatalf("want an error for an empty password file, got %v", err)
		}
	})
}

func TestParseVersion(t *testing.T) {
	for v, want := range map[string][3]int{"7.0.15": {7, 0, 1}, "8.6.0": {8, 6, 1}, "6.2": {6, 2, 1}, "255.255.255": {255, 255, 1},
		"7": {0, 0, 0}, "x.y.z": {0, 0, 0}} {
		major, minor, ok := parseVersion(v)
		if got := [3]int{major, minor, map[bool]int{true: 1}[ok]}; ok && got != want || !ok && want[2] != 0 {
			t.Errorf("parseVersion(%q) = %d, %d, %v; want %v", v, major, minor, ok, want)
		}
	}
}

// TestApplyTLS: backend.redis.tls turns TLS on or replaces rediss://'s
// defaults; the server name is the URL's host for one server and left to
// the dialled name in a Cluster or behind Sentinel.
func TestApplyTLS(t *testing.T) {
	ca := x509.NewCertPool()
	want := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca}
	for _, tc := range []struct {
		url, serverName string
		skipVerify      bool
	}{
		{"redis://cache:6380/0", "cache", false},
		{"rediss://cache.example:6380/0?skip_verify=true", "cache.example", true},
		{"redis://n1:7000,redis://n2:7001", "", false},
		{"rediss://s1:26379?master_name=m", "", false},
	} {
		cc, err := parseURL(tc.url, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := cc.applyTLS(want); err != nil {
			t.Fatal(err)
		}
		var got *tls.Config
		switch {
		case cc.single != nil:
			got = cc.single.TLSConfig
		case cc.cluster != nil:
			got = cc.cluster.TLSConfig
		default:
			got = cc.failover.TLSConfig
		}
		if got == nil || got == want || got.RootCAs != ca || got.ServerName != tc.serverName || got.InsecureSkipVerify != tc.skipVerify {
			t.Errorf("%s: got %+v", tc.url, got)
		}
	}
	cc, _ := parseURL("unix:///run/redis.sock", "")
	if err := cc.applyTLS(want); err == nil {
		t.Error("unix:// with tls: want an error")
	}
	if want.ServerName != "" {
		t.Error("applyTLS changed its argument")
	}
}
