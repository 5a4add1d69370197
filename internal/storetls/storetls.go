// Package storetls builds the client TLS configuration of a store from the
// crontab's backend.<type>.tls settings, the same way for every backend.
package storetls

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Settings are a store's TLS settings (backend.<type>.tls). Any of them
// set turns TLS on for stores whose URL does not say so already.
type Settings struct {
	CAFile             string // PEM roots to verify the server with (default: the system's)
	CertFile           string // client certificate (PEM), with KeyFile
	KeyFile            string
	ServerName         string // the name to verify instead of the URL's host
	InsecureSkipVerify bool   // development only: no verification at all
}

// Enabled reports whether any setting is given.
func (t Settings) Enabled() bool {
	return t != Settings{}
}

// Config returns the client TLS configuration t describes, or nil when t
// sets nothing (the store's URL alone decides). Verification is on unless
// InsecureSkipVerify is set; TLS 1.2 is the minimum.
func Config(t Settings) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // off unless configured
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls caFile %s: no PEM certificate in it", t.CAFile)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls certFile/keyFile: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
