package redisclaim

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/store"
)

// testServer is how the test harnesses reach a Redis server: each strategy
// is a configuration of its own, and each test gets a key namespace of its
// own, whose keys are deleted afterwards.
var testServer = &store.Testing{
	Require: "redis",
	Title:   "Redis",
	URLEnv:  "ANARCHON_TEST_REDIS_URL",
	URL:     defaultURL,
	URLKey:  "url",
	Start:   `redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log`,
	Variants: []store.Variant{
		{Name: "redis-lease", Keys: map[string]any{"strategy": StrategyLease}},
		{Name: "redis-stream-id", Keys: map[string]any{"strategy": StrategyStreamID}},
		{Name: "redis-script", Keys: map[string]any{"strategy": StrategyScript}},
		{Name: "redis-auto", Keys: map[string]any{"strategy": StrategyAuto}},
	},
	Isolate: func(_ context.Context, p store.IsolateParams) (store.Isolation, error) {
		return store.Isolation{
			Namespace: p.ID,
			Cleanup:   func(ctx context.Context) error { return DeleteNamespaceAt(ctx, p.URL, p.ID) },
		}, nil
	},
}

// DeleteNamespace deletes every key of the namespace ns on c's server:
// "{ns:job}:..." and "ns:...". It is the harnesses' cleanup of a test
// namespace.
func DeleteNamespace(ctx context.Context, c *redis.Client, ns string) error {
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

// DeleteNamespaceAt is DeleteNamespace on a client of its own to the
// server at rawURL (one server).
func DeleteNamespaceAt(ctx context.Context, rawURL, ns string) error {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	return DeleteNamespace(ctx, c, ns)
}
