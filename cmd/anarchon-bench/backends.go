package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/mattn/go-sqlite3" // database/sql driver "sqlite3", for the raw op
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/natsclaim"
	"github.com/anarchon/anarchon/internal/pgclaim"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
	"github.com/anarchon/anarchon/internal/redisclaim"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
)

// row is one backend to measure: one row of the table.
type row struct {
	name  string
	n     *int // claims to measure (a flag)
	setup func(ctx context.Context) (*store, error)
	// of names the backend whose store this row measures with other
	// settings; empty for a backend of its own. Start lag and scale
	// measure such a variant only when -lag-backends or -scale-backends
	// names it.
	of string
}

// The backends, in the table's order. (The script strategy scans a job's
// claims of the last window: its contended row, all on one job, grows with
// n; a real job has one claim per slot in the window.) postgres-async is
// postgres with backend.postgres.synchronousCommit off: a commit is
// acknowledged before it is flushed, so the two rows show what durability
// costs a claim.
var rows = []row{
	{"sqlite", nFlag, sqliteStore, ""},
	{"postgres", nFlag, postgresStore(""), ""},
	{"postgres-async", nFlag, postgresStore("off"), "postgres"},
	{"redis-lease", nFlag, redisStore(redisclaim.New), ""},
	{"redis-stream-id", nFlag, redisStore(redisclaim.NewClaimOnly, strategy(redisclaim.StrategyStreamID)), ""},
	{"redis-script", nFlag, redisStore(redisclaim.NewClaimOnly, strategy(redisclaim.StrategyScript)), ""},
	{"nats", nFlag, natsStore, ""},
	{"rabbitmq", nRabbitFlag, rabbitStore(true), ""},
	{"rabbitmq-unprepared", nRabbitFlag, rabbitStore(false), "rabbitmq"},
}

// strategy sets a Redis claim strategy.
func strategy(name string) func(*redisclaim.Options) {
	return func(o *redisclaim.Options) { o.Strategy = name }
}

// store is a fresh namespace of one backend, ready to measure.
type store struct {
	// open opens one more backend (with its own connections) on it.
	open func(ctx context.Context) (claim.Backend, error)
	// raw is one raw round trip of the store, on a connection of its own.
	raw func(ctx context.Context) error
	// floor, if set, is the cheapest durable write of the store (a
	// one-row INSERT committed with the server's sync settings), on a
	// connection of its own: what any claim that writes pays at least.
	floor func(ctx context.Context) error
	// prepare: the claims measured are prepared first, untimed, as the
	// scheduler prepares them (claim.Preparer, PrepareLead before the
	// slot); false measures a Preparer's claims unprepared.
	prepare bool
	// cleanup removes the namespace and closes the raw connection; runs
	// are the runs claimed in it.
	cleanup func(ctx context.Context, runs []runKey) error
}

// unreachable is a setup error meaning that the server did not answer.
type unreachable struct{ err error }

func (u unreachable) Error() string { return "unreachable: " + u.err.Error() }

// asBackend turns a constructor's typed result into a claim.Backend (never
// a non-nil interface holding a nil pointer).
func asBackend[B claim.Backend](b B, err error) (claim.Backend, error) {
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Claim-sized payload of the raw publishes (NATS, RabbitMQ).
var rawPayload = fmt.Appendf(nil, `{"token":%q,"instance":"bench","job":"raw","slot":%d}`,
	claim.NewToken(), time.Now().UnixMilli())

// sqliteStore: a database file in a fresh temporary directory. The raw op
// is SELECT 1 on a database/sql connection to the same file: SQLite has no
// network round trip, so this is the floor of any statement through the
// driver.
func sqliteStore(context.Context) (*store, error) {
	dir, err := os.MkdirTemp("", "anarchon-bench-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "bench.db")
	// Connects lazily: the first raw op runs after the backend created the
	// file and switched it to WAL. The same settings as the backend's:
	// BEGIN IMMEDIATE, synchronous=FULL.
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000&_txlock=immediate&_synchronous=FULL")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	db.SetMaxOpenConns(1)
	var scratch sync.Once
	return &store{
		open: func(ctx context.Context) (claim.Backend, error) {
			return asBackend(sqliteclaim.New(ctx, sqliteclaim.Options{Path: path}))
		},
		raw: func(ctx context.Context) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			return tx.Commit()
		},
		floor: func(ctx context.Context) error {
			var err error
			scratch.Do(func() { _, err = db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS bench_floor (v INTEGER)") })
			if err == nil {
				_, err = db.ExecContext(ctx, "INSERT INTO bench_floor (v) VALUES (1)")
			}
			return err
		},
		cleanup: func(context.Context, []runKey) error {
			return errors.Join(db.Close(), os.RemoveAll(dir))
		},
	}, nil
}

// postgresStore: the table runs in a fresh schema, dropped afterwards. The
// raw op is SELECT 1 on a pgx connection (a prepared statement after the
// first: one round trip). syncCommit, if set, is the synchronous_commit of
// the backend's sessions (backend.postgres.synchronousCommit) and of the
// raw and durable-write connections, so that the write is the floor of a
// claim committed with the same settings.
func postgresStore(syncCommit string) func(context.Context) (*store, error) {
	return func(ctx context.Context) (*store, error) {
		cfg, err := pgx.ParseConfig(*pgDSN)
		if err != nil {
			return nil, fmt.Errorf("postgres DSN: %w", err)
		}
		if syncCommit != "" {
			cfg.RuntimeParams["synchronous_commit"] = syncCommit
		}
		conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
		if err != nil {
			return nil, unreachable{err}
		}
		schema := pgx.Identifier{"anarchon_bench_" + suffix()}
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema.Sanitize()); err != nil {
			conn.Close(ctx)
			return nil, err
		}
		table := schema[0] + ".runs"
		if _, err := conn.Exec(ctx, "CREATE TABLE "+schema.Sanitize()+".bench_floor (v integer)"); err != nil {
			conn.Close(ctx)
			return nil, err
		}
		floorConn, err := pgx.ConnectConfig(ctx, cfg.Copy())
		if err != nil {
			conn.Close(ctx)
			return nil, err
		}
		return &store{
			open: func(ctx context.Context) (claim.Backend, error) {
				return asBackend(pgclaim.New(ctx, pgclaim.Options{DSN: *pgDSN, Table: table, SynchronousCommit: syncCommit}))
			},
			raw: func(ctx context.Context) error {
				var one int
				return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
			},
			floor: func(ctx context.Context) error {
				_, err := floorConn.Exec(ctx, "INSERT INTO "+schema.Sanitize()+".bench_floor (v) VALUES (1)")
				return err
			},
			cleanup: func(ctx context.Context, _ []runKey) error {
				floorConn.Close(ctx)
				_, err := conn.Exec(ctx, "DROP SCHEMA "+schema.Sanitize()+" CASCADE")
				return errors.Join(err, conn.Close(ctx))
			},
		}, nil
	}
}

// redisStore: a fresh key namespace, whose keys are deleted afterwards,
// for the strategy that open (redisclaim.New: lease) makes after edit. The
// raw op is PING on a client of its own (a single-server URL only).
func redisStore[B claim.Backend](open func(context.Context, redisclaim.Options) (B, error), edit ...func(*redisclaim.Options)) func(context.Context) (*store, error) {
	return func(ctx context.Context) (*store, error) {
		opt, err := redis.ParseURL(*redisURL)
		if err != nil {
			return nil, fmt.Errorf("raw client (a single-server redis:// URL): %w", err)
		}
		c := redis.NewClient(opt)
		if err := c.Ping(ctx).Err(); err != nil {
			c.Close()
			return nil, unreachable{err}
		}
		ns := "anarchon-bench-" + suffix()
		o := redisclaim.Options{URL: *redisURL, Namespace: ns}
		for _, e := range edit {
			e(&o)
		}
		return &store{
			open: func(ctx context.Context) (claim.Backend, error) { return asBackend(open(ctx, o)) },
			raw:  func(ctx context.Context) error { return c.Ping(ctx).Err() },
			cleanup: func(ctx context.Context, _ []runKey) error {
				return errors.Join(redisclaim.DeleteNamespace(ctx, c, ns), c.Close())
			},
		}, nil
	}
}

// natsStore: a fresh stream (created by the backend) and namespace,
// deleted afterwards. The raw op is a JetStream publish without
// Nats-Msg-Id to <ns>.bench.raw, in the same stream: the claim's publish
// minus the de-duplication.
func natsStore(context.Context) (*store, error) {
	nc, err := nats.Connect(*natsURL, nats.Name("anarchon-bench raw"))
	if err != nil {
		return nil, unreachable{err}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	sfx := suffix()
	o := natsclaim.Options{URL: *natsURL, Stream: "ANARCHON_BENCH_" + strings.ToUpper(sfx),
		Namespace: "anarchon-bench-" + sfx, DuplicateWindow: 2 * time.Hour, Name: "anarchon-bench"}
	subject := o.Namespace + ".bench.raw"
	return &store{
		open: func(ctx context.Context) (claim.Backend, error) { return asBackend(natsclaim.New(ctx, o)) },
		raw: func(ctx context.Context) error {
			_, err := js.Publish(ctx, subject, rawPayload)
			return err
		},
		cleanup: func(ctx context.Context, _ []runKey) error {
			defer nc.Close()
			if err := js.DeleteStream(ctx, o.Stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("delete stream %s: %w", o.Stream, err)
			}
			return nil
		},
	}, nil
}

// rabbitStore: a fresh namespace whose gates, history stream and raw
// queue are deleted afterwards. The raw op is a persistent publish to the
// durable queue <ns>.bench.raw, waiting for the publisher confirm (sent
// after the fsync): the claim's publish minus the gate's declare.
func rabbitStore(prepare bool) func(context.Context) (*store, error) {
	return func(context.Context) (*store, error) { return rabbitStoreOf(prepare) }
}

func rabbitStoreOf(prepare bool) (*store, error) {
	conn, err := amqp.DialConfig(*rabbitURL, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return nil, unreachable{err}
	}
	ns := "anarchon-bench-" + suffix()
	rawQueue := ns + ".bench.raw"
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil {
		_, err = ch.QueueDeclare(rawQueue, true, false, false, false, nil)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	o := rabbitclaim.Options{URL: *rabbitURL, Namespace: ns, SlotTTL: 2 * time.Hour, Instance: "bench"}
	return &store{
		open:    func(ctx context.Context) (claim.Backend, error) { return asBackend(rabbitclaim.New(ctx, o)) },
		prepare: prepare,
		raw: func(ctx context.Context) error {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", rawQueue, false, false,
				amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: rawPayload})
			if err != nil {
				return err
			}
			if acked, err := dc.WaitContext(ctx); err != nil || !acked {
				return errors.Join(errors.New("publish not confirmed"), err)
			}
			return nil
		},
		cleanup: func(_ context.Context, runs []runKey) error {
			defer conn.Close()
			queues := []string{rawQueue, rabbitclaim.HistoryQueue(ns)}
			for _, r := range runs {
				queues = append(queues, rabbitclaim.GateQueue(ns, r.job, r.slot))
			}
			return rabbitclaim.DeleteQueues(conn, queues...)
		},
	}, nil
}
