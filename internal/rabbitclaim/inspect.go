package rabbitclaim

import (
	"context"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/anarchon/anarchon/internal/store"
)

// check is what validate prints about the broker (store.Driver.Check):
// each node of url, whether it answers, its cluster's name and its
// version. When no node answers it says nothing: validate's open of the
// store then reports each node's failure, a refusal with its fix.
func check(ctx context.Context, st store.Settings) (string, error) {
	c := st.(Settings)
	o, err := Options{URL: c.URL, PasswordFile: c.PasswordFile, Namespace: "check"}.withDefaults()
	if err != nil {
		return "", err
	}
	if o.TLS, err = store.TLSConfig("rabbitmq", c.TLS); err != nil {
		return "", err
	}
	b := &Backend{o: o}
	if err := b.resolveNodes(); err != nil {
		return "", err
	}
	lines := make([]string, 0, len(b.nodes))
	answered := 0
	for _, n := range b.nodes {
		line, ok := b.inspectNode(ctx, n)
		if ok {
			answered++
		}
		lines = append(lines, line)
	}
	if answered == 0 {
		return "", nil
	}
	head := fmt.Sprintf("rabbitmq: %d of %d nodes answer", answered, len(b.nodes))
	if len(b.nodes) == 1 {
		head = "rabbitmq: one broker (list a cluster's nodes in url, separated by commas, to fail over between them)"
	}
	return head + "\n" + strings.Join(lines, "\n"), nil
}

// inspectNode connects to n and says what it answered.
func (b *Backend) inspectNode(ctx context.Context, n node) (string, bool) {
	where := strings.TrimPrefix(n.where, "rabbitmq ")
	type dialed struct {
		conn *amqp.Connection
		err  error
	}
	ch := make(chan dialed, 1)
	go func() {
		conn, err := amqp.DialConfig(n.url, amqp.Config{Dial: n.dialer, TLSClientConfig: b.tls.Clone()})
		ch <- dialed{conn, err}
	}()
	select {
	case <-ctx.Done():
		go func() {
			if d := <-ch; d.conn != nil {
				d.conn.Close()
			}
		}()
		return fmt.Sprintf("  %s: no answer (%v)", where, context.Cause(ctx)), false
	case d := <-ch:
		if d.err != nil {
			return fmt.Sprintf("  %s: %v", where, b.scrub(d.err)), false
		}
		defer d.conn.Close()
		p := d.conn.Properties
		return fmt.Sprintf("  %s: answers (cluster %v, RabbitMQ %v)", where, p["cluster_name"], p["version"]), true
	}
}
