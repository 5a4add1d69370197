package natsclaim

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/anarchon/anarchon/internal/store"
)

// testServer is how the test harnesses reach a NATS server with
// JetStream: each test gets a stream and a namespace of its own, and the
// stream is deleted afterwards.
var testServer = &store.Testing{
	Require: "nats",
	Title:   "NATS JetStream",
	URLEnv:  "ANARCHON_TEST_NATS_URL",
	URL:     defaultURL,
	URLKey:  "url",
	Start:   "start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log",
	Isolate: func(_ context.Context, p store.IsolateParams) (store.Isolation, error) {
		stream := strings.ToUpper(p.ID)
		return store.Isolation{
			Namespace: p.ID,
			Keys:      map[string]any{"stream": stream},
			Cleanup:   func(ctx context.Context) error { return DeleteStream(ctx, p.URL, stream) },
		}, nil
	},
}

// DeleteStream deletes the JetStream stream on the server at rawURL and
// its control records' and instance records' buckets, if they exist: the
// harnesses' cleanup of a test stream.
func DeleteStream(ctx context.Context, rawURL, stream string) error {
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
	for _, bucket := range []string{ControlBucket(stream), InstanceBucket(stream)} {
		if err := js.DeleteKeyValue(ctx, bucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return err
		}
	}
	return nil
}
