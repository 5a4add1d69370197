package storetls

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/storetls/storetlstest"
)

func TestConfig(t *testing.T) {
	if c, err := Config(Settings{}); c != nil || err != nil {
		t.Fatalf("no settings: %v %v, want nil, nil", c, err)
	}
	f := storetlstest.New(t)
	c, err := Config(Settings{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey, ServerName: "db.internal"})
	if err != nil {
		t.Fatal(err)
	}
	if c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "db.internal" || c.InsecureSkipVerify {
		t.Fatalf("config %+v", c)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for _, tc := range []struct {
		tls  Settings
		want string
	}{
		{Settings{CAFile: "/nonexistent/ca.pem"}, "tls caFile: open /nonexistent/ca.pem"},
		{Settings{CAFile: notPEM}, "no PEM certificate in it"},
		{Settings{CertFile: f.ClientCert, KeyFile: f.ServerKey}, "tls certFile/keyFile: "},
	} {
		if _, err := Config(tc.tls); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.tls, err, tc.want)
		}
	}
}
