package testserver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
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

// FreePorts returns n distinct TCP ports of 127.0.0.1 that nothing listens
// on now, for servers a test starts (each is held until all are chosen,
// so none repeats).
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
