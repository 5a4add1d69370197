package pgclaim

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/anarchon/anarchon/internal/storetls"
	"github.com/anarchon/anarchon/internal/storetls/storetlstest"
)

// TestTLSRequired: with backend.postgres.tls set, New insists on TLS that
// verifies against the configured CA, even though the DSN says
// sslmode=disable; the test server (plain, or with a certificate of another
// authority) is refused with a TLS error, never used in plaintext.
func TestTLSRequired(t *testing.T) {
	dsn := requireServer(t)
	f := storetlstest.New(t)
	tc, err := storetls.Config(storetls.Settings{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(t.Context(), Options{DSN: dsn, TLS: tc})
	if err == nil {
		b.Close()
		t.Fatal("New with backend.postgres.tls connected to a server without a certificate of the configured CA")
	}
	msg := strings.ToLower(err.Error())
	if !strings.Contains(msg, "tls") && !strings.Contains(msg, "certificate") {
		t.Fatalf("want a TLS error, got %v", err)
	}
	t.Logf("refused as expected: %v", err)
}

// TestRequireTLSFallbacks: pgx's sslmode=prefer fallbacks without TLS are
// dropped; every host keeps one TLS attempt verified against its own name.
func TestRequireTLSFallbacks(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://u@db1:5432,db2:5433/x?sslmode=prefer")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := storetls.Config(storetls.Settings{}) // nil: nothing set
	if err != nil || tc != nil {
		t.Fatalf("empty settings: %v %v", tc, err)
	}
	f := storetlstest.New(t)
	tc, err = storetls.Config(storetls.Settings{CAFile: f.CA})
	if err != nil {
		t.Fatal(err)
	}
	cc := &cfg.ConnConfig.Config
	if err := requireTLS(cc, tc); err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		host       string
		port       uint16
		serverName string
	}
	got := []attempt{{cc.Host, cc.Port, cc.TLSConfig.ServerName}}
	if cc.TLSConfig.RootCAs == nil {
		t.Error("primary: the configured CA is not used")
	}
	for _, fb := range cc.Fallbacks {
		if fb.TLSConfig == nil {
			t.Fatalf("fallback %s:%d has no TLS", fb.Host, fb.Port)
		}
		got = append(got, attempt{fb.Host, fb.Port, fb.TLSConfig.ServerName})
	}
	want := []attempt{{"db1", 5432, "db1"}, {"db2", 5433, "db2"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("attempts: want %v, got %v", want, got)
	}

	named, _ := storetls.Config(storetls.Settings{ServerName: "db.internal"})
	cfg, _ = pgxpool.ParseConfig("postgres://u@db1/x?sslmode=disable")
	if err := requireTLS(&cfg.ConnConfig.Config, named); err != nil {
		t.Fatal(err)
	}
	if c := cfg.ConnConfig.TLSConfig; c == nil || c.ServerName != "db.internal" || len(cfg.ConnConfig.Fallbacks) != 0 {
		t.Fatalf("sslmode=disable with tls: want TLS to db.internal, got %+v, fallbacks %d", c, len(cfg.ConnConfig.Fallbacks))
	}

	cfg, _ = pgxpool.ParseConfig("host=/var/run/postgresql dbname=x")
	if err := requireTLS(&cfg.ConnConfig.Config, tc); err == nil || !strings.Contains(err.Error(), "Unix socket") {
		t.Fatalf("a Unix socket with tls: want an error, got %v", err)
	}
}
