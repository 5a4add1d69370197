package rabbitclaim_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
	"github.com/anarchon/anarchon/internal/storetls"
	"github.com/anarchon/anarchon/internal/storetls/storetlstest"
)

func writeSecret(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// userOnly is the test broker's URL with its password removed.
func userOnly(t *testing.T) string {
	t.Helper()
	pu, err := url.Parse(brokerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.User("guest")
	return pu.String()
}

// TestPasswordFile: the file's content replaces the URL's password, and a
// wrong one is refused without being shown.
func TestPasswordFile(t *testing.T) {
	u := userOnly(t)
	n := newNS(t, brokerURL(t))
	b := n.open(t, func(o *rabbitclaim.Options) {
		o.URL, o.PasswordFile = u, writeSecret(t, "guest\n")
	})
	r := request("pwjob", time.Now().Truncate(time.Second))
	if res, err := b.Claim(t.Context(), r); err != nil || res.Outcome != claim.Won {
		t.Fatalf("claim with the password file: %+v %v", res, err)
	}

	// The file wins over a password written in the URL.
	pu, _ := url.Parse(u)
	pu.User = url.UserPassword("guest", "not-this-one")
	n.open(t, func(o *rabbitclaim.Options) { o.URL, o.PasswordFile = pu.String(), writeSecret(t, "guest") })

	_, err := rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: u, PasswordFile: writeSecret(t, "wrong\n"), Namespace: n.name})
	if err == nil {
		t.Fatal("a wrong password file: want an error")
	}
	if !strings.Contains(err.Error(), "username or password not allowed") {
		t.Errorf("error %q does not say the credentials were refused", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("error %q shows the password", err)
	}

	_, err = rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: u, PasswordFile: filepath.Join(t.TempDir(), "missing"), Namespace: n.name})
	if err == nil || !strings.Contains(err.Error(), "passwordFile") {
		t.Errorf("a missing password file: want an error naming passwordFile, got %v", err)
	}
}

// TestTLSNotSkipped: TLS configured with an amqp:// URL dials TLS on the
// same port, so the plain listener fails the handshake instead of the
// backend silently talking plain AMQP.
func TestTLSNotSkipped(t *testing.T) {
	u := brokerURL(t)
	f := storetlstest.New(t)
	tc, err := storetls.Config(storetls.Settings{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: u, TLS: tc, Namespace: "anarchon-test-tls"})
	if err == nil {
		t.Fatal("TLS against the plain listener: want an error")
	}
	if !strings.Contains(err.Error(), "tls") {
		t.Errorf("error %q does not say TLS failed", err)
	}
	if pw, _ := url.Parse(u); pw.User != nil {
		if p, ok := pw.User.Password(); ok && strings.Contains(err.Error(), ":"+p+"@") {
			t.Errorf("error %q shows the password", err)
		}
	}
	t.Logf("TLS against the plain listener: %v", err)
	if tc.ServerName != "" {
		t.Errorf("the caller's tls.Config was changed: ServerName %q", tc.ServerName)
	}
}
