package rabbitclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
)

// node is one broker URL the backend may connect to: a cluster's node,
// or the one broker.
type node struct {
	url     string // with the password: only ever passed to the dialer
	where   string // "rabbitmq <url with the password hidden>"
	dialer  func(network, addr string) (netConn, error)
	timeout time.Duration // the TCP connect's and the handshake's, each
}

// resolveNodes reads the URLs of o.URL into b.nodes: each with the
// password file's password and, with TLS, as amqps://. b.where names them
// all.
func (b *Backend) resolveNodes() error {
	o := b.o
	urls := strings.Split(o.URL, ",")
	wheres := make([]string, len(urls))
	for i, u := range urls {
		urls[i] = strings.TrimSpace(u)
		u = urls[i]
		b.secrets = append(b.secrets, secret.Find(u)...)
		wheres[i] = secret.Redact(u)
	}
	b.where = "rabbitmq " + strings.Join(wheres, ", ")
	pw := ""
	if o.PasswordFile != "" {
		var err error
		if pw, err = secret.ReadFile(o.PasswordFile, "backend.rabbitmq.passwordFile"); err != nil {
			return fmt.Errorf("open rabbitmq backend: %w", err)
		}
		b.secrets = append(b.secrets, pw)
	}
	b.tls = o.TLS
	for _, u := range urls {
		n, err := b.resolveNode(u, pw)
		if err != nil {
			return err
		}
		b.nodes = append(b.nodes, n)
		b.dialTimeout = max(b.dialTimeout, n.timeout)
	}
	b.tried.Store(int32(len(b.nodes) - 1)) // the first dial starts at the first node
	return nil
}

// resolveNode is one URL as the dialer takes it.
func (b *Backend) resolveNode(rawURL, pw string) (node, error) {
	n := node{url: rawURL, where: "rabbitmq " + secret.Redact(rawURL)}
	uri, err := amqp.ParseURI(rawURL)
	if err != nil {
		return n, fmt.Errorf("connect to %s: %w", n.where, b.scrub(err))
	}
	b.secrets = append(b.secrets, uri.Password)
	if pw != "" || b.tls != nil {
		if n.url, err = dialURL(rawURL, pw, b.tls != nil); err != nil {
			return n, fmt.Errorf("connect to %s: %w", n.where, b.scrub(err))
		}
		if uri, err = amqp.ParseURI(n.url); err != nil {
			return n, fmt.Errorf("connect to %s: %w", n.where, b.scrub(err))
		}
		n.where = "rabbitmq " + secret.Redact(n.url) // amqps:// when switched
	}
	n.dialer, n.timeout = dialerFor(uri)
	return n, nil
}

// dial connects to the first node that answers, trying each once in turn
// from the one after the node tried last, so that a node that is down,
// or does not answer at all, is passed over by the next dial when not by
// this one. With one node, it is dialOne. The error names every node's
// failure; it is a refusal (claim.PermanentError) only when every node
// refused.
func (b *Backend) dial(ctx context.Context, strict bool) (*session, error) {
	start := int(b.tried.Load()) + 1
	var errs []error
	permanent := true
	for k := range b.nodes {
		i := (start + k) % len(b.nodes)
		b.tried.Store(int32(i))
		s, err := b.dialOne(ctx, b.nodes[i], strict)
		if err == nil {
			return s, nil
		}
		if len(b.nodes) == 1 {
			return nil, err
		}
		errs = append(errs, err)
		permanent = permanent && claim.IsPermanent(err)
		if ctx.Err() != nil {
			break
		}
	}
	if permanent && len(errs) == len(b.nodes) {
		// Every node refused alike: the refusals, each with its fix.
		return nil, fmt.Errorf("connect to %s: every node refused: %w", b.where, errors.Join(errs...))
	}
	// A node that refused beside one that did not answer is not a
	// refusal of the store: said, not wrapped, so that it is re-sent.
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return nil, fmt.Errorf("connect to %s: no node answered: %s", b.where, strings.Join(msgs, "; "))
}
