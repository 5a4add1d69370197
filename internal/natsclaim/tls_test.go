package natsclaim_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/natsclaim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/storetls"
	"github.com/anarchon/anarchon/internal/storetls/storetlstest"
	"github.com/anarchon/anarchon/internal/testserver"
)

// natsServerBin is the nats-server the TLS and authentication tests start.
const natsServerBin = "/usr/sbin/nats-server"

// startNATSServer starts a private nats-server with JetStream and the
// configuration lines extra, on a free port of 127.0.0.1, and returns its
// nats:// URL. The server is killed when the test ends. Without the
// binary the test skips, or fails under ANARCHON_TEST_REQUIRE.
func startNATSServer(t *testing.T, extra string) string {
	t.Helper()
	bin := natsServerBin
	if _, err := os.Stat(bin); err != nil {
		if p, lerr := exec.LookPath("nats-server"); lerr == nil {
			bin = p
		} else {
			msg := fmt.Sprintf("nats-server is not installed (%v)", err)
			if testserver.For("nats").Required() {
				t.Fatal(msg + " (ANARCHON_TEST_REQUIRE requires it)")
			}
			t.Skip(msg)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	dir := t.TempDir()
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\n%s\n", port, filepath.Join(dir, "js"), extra)
	file := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd := exec.Command(bin, "-c", file)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("nats-server exited (%v):\n%s", err, out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return "nats://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server does not accept connections at %s after 15s:\n%s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func clientTLS(t *testing.T, c storetls.Settings) *tls.Config {
	t.Helper()
	tc, err := storetls.Config(c)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func TestTLSClientCertificate(t *testing.T) {
	f := storetlstest.New(t)
	u := startNATSServer(t, fmt.Sprintf("tls {\n cert_file: %q\n key_file: %q\n ca_file: %q\n verify: true\n}",
		f.ServerCert, f.ServerKey, f.CA))
	opts := func(tc *tls.Config) natsclaim.Options {
		return natsclaim.Options{URL: u, Stream: "ANARCHON_TLS", Namespace: "tls", TLS: tc, Timeout: 5 * time.Second}
	}

	t.Run("CA and client certificate", func(t *testing.T) {
		b, err := natsclaim.New(t.Context(), opts(clientTLS(t, storetls.Settings{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey})))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer b.Close()
		r := req("tlsjob")
		mustClaim(t, b, r, claim.Won, "claim over TLS")
		runs, err := b.ListRuns(t.Context(), claim.ListQuery{Job: r.Job})
		if err != nil {
			t.Fatalf("ListRuns: %v", err)
		}
		if len(runs) != 1 || runs[0].Slot != r.Slot || runs[0].Token != r.Token {
			t.Fatalf("ListRuns = %+v, want the run of slot %d", runs, r.Slot)
		}
	})

	t.Run("no client certificate", func(t *testing.T) {
		b, err := natsclaim.New(t.Context(), opts(clientTLS(t, storetls.Settings{CAFile: f.CA})))
		if err == nil {
			b.Close()
			t.Fatal("New without a client certificate succeeded")
		}
		if !strings.Contains(err.Error(), "certificate") && !strings.Contains(err.Error(), "tls") {
			t.Errorf("error %q does not say what failed", err)
		}
		t.Logf("without a client certificate: %v", err)
	})

	t.Run("other CA", func(t *testing.T) {
		g := storetlstest.New(t)
		b, err := natsclaim.New(t.Context(), opts(clientTLS(t, storetls.Settings{CAFile: g.CA, CertFile: g.ClientCert, KeyFile: g.ClientKey})))
		if err == nil {
			b.Close()
			t.Fatal("New trusting another CA succeeded")
		}
		if !strings.Contains(err.Error(), "certificate") {
			t.Errorf("error %q does not mention the certificate", err)
		}
		t.Logf("with another CA: %v", err)
	})

	t.Run("plain client", func(t *testing.T) {
		b, err := natsclaim.New(t.Context(), opts(nil))
		if err == nil {
			b.Close()
			t.Fatal("New without TLS succeeded against a server that requires it")
		}
	})
}

func writeSecret(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPasswordFileToken(t *testing.T) {
	u := startNATSServer(t, `authorization { token: "s3cret" }`)
	opts := func(file string) natsclaim.Options {
		return natsclaim.Options{URL: u, PasswordFile: file, Stream: "ANARCHON_AUTH", Namespace: "auth", Timeout: 5 * time.Second}
	}

	b, err := natsclaim.New(t.Context(), opts(writeSecret(t, "s3cret\n")))
	if err != nil {
		t.Fatalf("New with the token file: %v", err)
	}
	mustClaim(t, b, req("authjob"), claim.Won, "claim with a token")
	b.Close()

	for name, file := range map[string]string{"no file": "", "wrong token": writeSecret(t, "n0t-1t\n")} {
		b, err := natsclaim.New(t.Context(), opts(file))
		if err == nil {
			b.Close()
			t.Fatalf("%s: New succeeded", name)
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret") || strings.Contains(msg, "n0t-1t") {
			t.Errorf("%s: error %q shows the secret", name, msg)
		}
		if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: error %q does not say authorization failed", name, err)
		}
	}
}

func TestPasswordFileUser(t *testing.T) {
	u := startNATSServer(t, `authorization { users: [ { user: alice, password: "pa55w0rd" } ] }`)
	host := strings.TrimPrefix(u, "nats://")
	opts := func(url, file string) natsclaim.Options {
		return natsclaim.Options{URL: url, PasswordFile: file, Stream: "ANARCHON_AUTH", Namespace: "auth", Timeout: 5 * time.Second}
	}
	good := writeSecret(t, "pa55w0rd\n")
	for _, url := range []string{"nats://alice@" + host, "nats://alice:wrong@" + host} {
		b, err := natsclaim.New(t.Context(), opts(url, good))
		if err != nil {
			t.Fatalf("New(%s) with the password file: %v", secret.Redact(url), err)
		}
		b.Close()
	}
	bad := writeSecret(t, "n0t-1t")
	b, err := natsclaim.New(t.Context(), opts("nats://alice@"+host, bad))
	if err == nil {
		b.Close()
		t.Fatal("New with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), "n0t-1t") {
		t.Errorf("error %q shows the password", err)
	}
}
