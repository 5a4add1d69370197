// Package storetlstest makes a throwaway certificate authority and
// certificates for tests that start a store with TLS.
package storetlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are PEM files in a test's temporary directory.
type Files struct {
	CA         string // the authority's certificate
	ServerCert string // for 127.0.0.1 and "localhost"
	ServerKey  string
	ClientCert string
	ClientKey  string
}

// New writes a fresh authority, a server certificate and a client
// certificate into t.TempDir().
func New(t testing.TB) Files {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert, caDER := issue(t, "anarchon test CA", nil, nil, true)
	f := Files{CA: write(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	srvKey, _, srvDER := issue(t, "localhost", caCert, caKey, false)
	f.ServerCert = write(t, dir, "server.pem", "CERTIFICATE", srvDER)
	f.ServerKey = writeKey(t, dir, "server.key", srvKey)
	cliKey, _, cliDER := issue(t, "anarchond", caCert, caKey, false)
	f.ClientCert = write(t, dir, "client.pem", "CERTIFICATE", cliDER)
	f.ClientKey = writeKey(t, dir, "client.key", cliKey)
	return f
}

func issue(t testing.TB, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, ca bool) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func write(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeKey(t testing.TB, dir, name string, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return write(t, dir, name, "EC PRIVATE KEY", der)
}
