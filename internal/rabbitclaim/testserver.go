package rabbitclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/anarchon/anarchon/internal/store"
)

// isolatedSlotTTLMs is a test's slotTtlMs: the gate queues a test leaves
// expire two minutes after it.
const isolatedSlotTTLMs = 120000

// testServer is how the test harnesses reach a RabbitMQ broker: each test
// gets a namespace of its own; its history stream is deleted afterwards
// and its gate queues expire after slotTtlMs.
var testServer = &store.Testing{
	Require: "rabbitmq",
	Title:   "RabbitMQ",
	URLEnv:  "ANARCHON_TEST_RABBITMQ_URL",
	URL:     defaultURL,
	URLKey:  "url",
	Start:   "rabbitmq-server -detached",
	Isolate: func(_ context.Context, p store.IsolateParams) (store.Isolation, error) {
		return store.Isolation{
			Namespace: p.ID,
			Keys:      map[string]any{"slotTtlMs": isolatedSlotTTLMs},
			Cleanup:   func(context.Context) error { return DeleteQueuesAt(p.URL, HistoryQueue(p.ID)) },
		}, nil
	},
}

// DeleteQueues deletes the queues on conn, reopening the channel after an
// error (which closes it): the harnesses' cleanup of a test namespace.
func DeleteQueues(conn *amqp.Connection, queues ...string) error {
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

// DeleteQueuesAt is DeleteQueues on a connection of its own to the broker
// at rawURL.
func DeleteQueuesAt(rawURL string, queues ...string) error {
	conn, err := amqp.DialConfig(rawURL, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return err
	}
	defer conn.Close()
	return DeleteQueues(conn, queues...)
}
