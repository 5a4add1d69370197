package natsclaim

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/anarchon/anarchon/internal/secret"
)

// probeTimeout bounds the dial of one server of backend.nats.url by
// probeServers.
const probeTimeout = 2 * time.Second

// deadServer is a server of backend.nats.url that does not answer.
type deadServer struct {
	url string // redacted
	err error
}

// serverList returns the servers of a URL list, as written.
func serverList(rawURL string) []string {
	var out []string
	for _, part := range strings.Split(rawURL, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// probeServers dials every server of rawURL, but skip (a host:port), at
// once and returns those that do not answer, in the list's order. It
// tells which servers of a list are down, which nats.go does not.
func probeServers(ctx context.Context, rawURL, skip string) []deadServer {
	servers := serverList(rawURL)
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		hp := hostPort(s)
		if hp == "" || hp == skip {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: probeTimeout}
			conn, err := d.DialContext(ctx, "tcp", hp)
			if err != nil {
				errs[i] = err
				return
			}
			_ = conn.Close()
		}()
	}
	wg.Wait()
	var dead []deadServer
	for i, err := range errs {
		if err != nil {
			dead = append(dead, deadServer{url: secret.Redact(servers[i]), err: err})
		}
	}
	return dead
}

// noServerError is the error of a connection none of the servers took,
// naming each server and why it did not answer. It returns err as it is
// when some server answered (the refusal is then that server's).
func noServerError(ctx context.Context, rawURL string, err error) error {
	servers := serverList(rawURL)
	dead := probeServers(ctx, rawURL, "")
	if len(dead) == 0 || len(dead) < len(servers) {
		return err
	}
	parts := make([]string, len(dead))
	for i, d := range dead {
		parts[i] = fmt.Sprintf("%s: %v", d.url, d.err)
	}
	what := "the server of backend.nats.url does not answer"
	if len(servers) > 1 {
		what = fmt.Sprintf("none of the %d servers of backend.nats.url answers", len(servers))
	}
	return fmt.Errorf("%s (%s): %w", what, strings.Join(parts, "; "), err)
}
