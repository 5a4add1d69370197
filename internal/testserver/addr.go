package testserver

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
)

// RandomID returns 8 hex digits, for namespaces no other run uses.
func RandomID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// HostPort returns the host:port of a store URL, the first of a
// comma-separated list ("" if it has none).
func HostPort(raw string) string {
	first, _, _ := strings.Cut(raw, ",")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil {
		return ""
	}
	return u.Host
}

// WithHost returns raw with its host:port replaced (by a fault proxy's, or
// a server's of the harness's own).
func WithHost(raw, hostport string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = hostport
	return u.String()
}
