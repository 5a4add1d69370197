package testserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
)

// The administration of the shared servers by the harnesses that start
// daemons on them (the end-to-end scripts, the chaos run, the bench): each
// isolates a run in a namespace of its own and removes it afterwards.

// RandomID returns 8 hex digits, for namespaces no other run uses.
func RandomID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// HostPort returns the host:port of a store URL ("" if it has none).
func HostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// WithHost returns raw with its host:port replaced (by a fault proxy's).
func WithHost(raw, hostport string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = hostport
	return u.String()
}

// PostgresExec runs sql on a connection of its own to dsn.
func PostgresExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("postgres: %s: %w", sql, err)
	}
	return nil
}

// DeleteRedisNamespace deletes every key of the namespace ns:
// "{ns:job}:..." and "ns:...".
func DeleteRedisNamespace(ctx context.Context, c *redis.Client, ns string) error {
	var keys []string
	for _, pattern := range []string{"{" + ns + ":*", ns + ":*"} {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 500)]
		keys = keys[len(batch):]
		if err := c.Del(ctx, batch...).Err(); err != nil {
			return err
		}
	}
	return nil
}

// DeleteRedisNamespaceAt is DeleteRedisNamespace on a client of its own
// to the server at rawURL.
func DeleteRedisNamespaceAt(ctx context.Context, rawURL, ns string) error {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	return DeleteRedisNamespace(ctx, c, ns)
}

// DeleteNATSStream deletes the JetStream stream, if it exists.
func DeleteNATSStream(ctx context.Context, rawURL, stream string) error {
	nc, err := nats.Connect(rawURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := js.DeleteStream(ctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	return nil
}

// DeleteRabbitQueues deletes the queues on conn, reopening the channel
// after an error (which closes it).
func DeleteRabbitQueues(conn *amqp.Connection, queues ...string) error {
	var errs []error
	var ch *amqp.Channel
	for _, q := range queues {
		if ch == nil || ch.IsClosed() {
			var err error
			if ch, err = conn.Channel(); err != nil {
				return errors.Join(append(errs, err)...)
			}
		}
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			errs = append(errs, fmt.Errorf("delete queue %s: %w", q, err))
		}
	}
	if ch != nil {
		ch.Close()
	}
	return errors.Join(errs...)
}

// DeleteRabbitQueuesAt is DeleteRabbitQueues on a connection of its own to
// the broker at rawURL.
func DeleteRabbitQueuesAt(rawURL string, queues ...string) error {
	conn, err := amqp.DialConfig(rawURL, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return err
	}
	defer conn.Close()
	return DeleteRabbitQueues(conn, queues...)
}
