package redisclaim_test

import (
	"bufio"
	"crypto/tls"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/redisclaim"
	"github.com/anarchon/anarchon/internal/storetls"
	"github.com/anarchon/anarchon/internal/storetls/storetlstest"
	"github.com/anarchon/anarchon/internal/testserver"
)

// startTLSRedis starts a redis-server of its own that speaks TLS only and
// requires client certificates issued by f.CA; it returns its address.
func startTLSRedis(t *testing.T, f storetlstest.Files) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not installed (%v): the TLS test starts one of its own"
		if testserver.For("redis").Required() {
			t.Fatalf(msg+" (ANARCHON_TEST_REQUIRE=%s requires it)", err, os.Getenv("ANARCHON_TEST_REQUIRE"))
		}
		t.Skipf(msg, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", f.ServerCert, "--tls-key-file", f.ServerKey, "--tls-ca-cert-file", f.CA,
		"--tls-auth-clients", "yes", "--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	tc, err := storetls.Config(storetls.Settings{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := pingTLS(addr, tc)
		if err == nil {
			return addr
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server exited (%v):\n%s", werr, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server does not answer over TLS at %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pingTLS sends PING over TLS and expects +PONG.
func pingTLS(addr string, tc *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, tc)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return &net.AddrError{Err: "unexpected reply " + strconv.Quote(line), Addr: addr}
	}
	return nil
}

// TestTLS runs the backend against a redis-server that requires TLS with
// client certificates: backend.redis.tls turns TLS on for a redis:// URL,
// and verification is on unless insecureSkipVerify says otherwise.
func TestTLS(t *testing.T) {
	f := storetlstest.New(t)
	addr := startTLSRedis(t, f)
	url := "redis://" + addr + "/0"
	tlsOf := func(t *testing.T, s storetls.Settings) *tls.Config {
		t.Helper()
		tc, err := storetls.Config(s)
		if err != nil {
			t.Fatal(err)
		}
		return tc
	}
	good := storetls.Settings{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey}

	t.Run("Conformance", func(t *testing.T) {
		openTLS := func(t *testing.T, ns string) claim.Backend {
			b, err := redisclaim.New(t.Context(), redisclaim.Options{URL: url, TLS: tlsOf(t, good), Namespace: ns})
			if err != nil {
				t.Fatalf("open over TLS: %v", err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		}
		claimtest.Exercise(t, claimtest.Harness{
			New: func(t *testing.T) claim.Backend { return openTLS(t, newNamespace(t)) },
			Open: func(t *testing.T, b claim.Backend) claim.Backend {
				return openTLS(t, b.(*redisclaim.Backend).Namespace())
			},
		})
	})

	t.Run("CheckStrategy", func(t *testing.T) {
		got, err := redisclaim.CheckStrategy(t.Context(), redisclaim.Options{URL: url, TLS: tlsOf(t, good), Strategy: redisclaim.StrategyAuto})
		if err != nil || (got != redisclaim.StrategyIDMP && got != redisclaim.StrategyScript) {
			t.Fatalf("CheckStrategy auto over TLS: %q %v", got, err)
		}
	})

	t.Run("ClaimOnlyRediss", func(t *testing.T) {
		// rediss:// with backend.redis.tls: the CA and client certificate
		// replace the URL's defaults, the server name stays the URL's host.
		b, err := redisclaim.NewClaimOnly(t.Context(), redisclaim.Options{
			URL: "rediss://localhost:" + strconv.Itoa(mustPort(t, addr)) + "/0", TLS: tlsOf(t, good),
			Namespace: newNamespace(t), Strategy: redisclaim.StrategyScript,
		})
		if err != nil {
			t.Fatalf("rediss:// with tls: %v", err)
		}
		b.Close()
	})

	failures := []struct {
		name string
		tls  storetls.Settings
		want []string // one of them, in the error
	}{
		{"NoClientCert", storetls.Settings{CAFile: f.CA}, []string{"certificate required", "bad certificate"}},
		{"WrongCA", storetls.Settings{CAFile: storetlstest.New(t).CA, CertFile: f.ClientCert, KeyFile: f.ClientKey},
			[]string{"certificate signed by unknown authority"}},
		{"PlainURLNoTLS", storetls.Settings{}, nil},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			o := redisclaim.Options{URL: url, TLS: tlsOf(t, tc.tls), Namespace: newNamespace(t)}
			b, err := redisclaim.New(t.Context(), o)
			if err == nil {
				b.Close()
				t.Fatal("New connected")
			}
			ok := tc.want == nil
			for _, w := range tc.want {
				ok = ok || strings.Contains(err.Error(), w)
			}
			if !ok || !strings.Contains(err.Error(), "redis") {
				t.Fatalf("want an error naming redis and one of %q, got %v", tc.want, err)
			}
			t.Logf("refused as expected: %v", err)
		})
	}
}

func mustPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
