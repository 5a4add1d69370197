package pgclaim

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// target_session_attrs asking for a server that takes no writes is
// refused at validation, in both DSN forms and from the environment; the
// others are accepted (the backend checks every connection itself).
func TestTargetSessionAttrs(t *testing.T) {
	for dsn, refused := range map[string]bool{
		"postgres://u@a,b/db?target_session_attrs=read-write":        false,
		"postgres://u@a:5432,b:5433/db?target_session_attrs=primary": false,
		"host=a,b dbname=x target_session_attrs=any":                 false,
		"host=a,b dbname=x": false,
		"host=a,b target_session_attrs=standby dbname=x":          true,
		"host=a target_session_attrs='read-only'":                 true,
		"postgresql://a,b/db?target_session_attrs=prefer-standby": true,
	} {
		msg := checkDSN(dsn)
		if refused != (msg != "") {
			t.Errorf("%s: refused %v, want %v (%q)", dsn, msg != "", refused, msg)
		}
		if refused && !strings.Contains(msg, "use target_session_attrs=read-write") {
			t.Errorf("%s: the message must say what to use: %q", dsn, msg)
		}
	}
	t.Setenv("PGTARGETSESSIONATTRS", "standby")
	if checkDSN("host=a dbname=x") == "" {
		t.Error("PGTARGETSESSIONATTRS=standby must be refused too")
	}
	if msg := checkDSN("host=a dbname=x target_session_attrs=read-write"); msg != "" {
		t.Errorf("the DSN's own target_session_attrs outranks the environment's: %q", msg)
	}
}

// silentHost accepts connections and never answers, as a host that died
// without refusing (a power cut, a partition) does once the connection
// is made; it closes them at the test's end.
func silentHost(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return l.Addr().String()
}

// A multi-host DSN whose first host never answers: the connect timeout
// (multiHostConnectTimeout, the DSN setting none) bounds the attempt on
// it, and the backend opens on the next host; its pooled connections then
// serve the claims.
func TestSilentFirstHostSkipped(t *testing.T) {
	requireServer(t)
	u, err := url.Parse(testDSN())
	if err != nil || u.Scheme == "" {
		t.Skipf("%s is not a URL", dsnEnv)
	}
	u.Host = silentHost(t) + "," + u.Host
	start := time.Now()
	b := openWith(t, Options{DSN: u.String(), Table: newSchema(t) + ".runs"})
	t.Logf("opened %v after the first attempt went to a host that never answers (no connect_timeout: %v per host)",
		time.Since(start).Round(time.Millisecond), multiHostConnectTimeout)
	claimOnce(t, b, "silent", time.Now().UnixMilli())
	claimOnce(t, b, "silent", time.Now().UnixMilli()+1000)
}
