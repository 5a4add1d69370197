package rabbitclaim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/secret"
)

// Defaults of Options.
const (
	// DefaultSlotTTL is a gate's x-expires when Options.SlotTTL is zero
	// (slotTtlMs, docs/spec.md#s6-config).
	DefaultSlotTTL = time.Hour
	// DefaultHistoryMaxAge is the history stream's x-max-age when
	// Options.HistoryMaxAge is zero (backend.retention's default).
	DefaultHistoryMaxAge = 7 * 24 * time.Hour
	// DefaultHistoryMaxBytes is the history stream's x-max-length-bytes when
	// Options.HistoryMaxBytes is zero.
	DefaultHistoryMaxBytes = 1 << 30
	// DefaultDialTimeout bounds the TCP connect and AMQP handshake when the
	// URL sets no connection_timeout.
	DefaultDialTimeout = 10 * time.Second
)

const (
	// defaultListLimit is ListRuns's limit when the query sets none.
	defaultListLimit = 50
	// maxInFlight bounds the claims one Backend has in flight, each on its
	// own channel (the scheduler sends up to 16 at once).
	maxInFlight = 64
	// maxIdleChannels is how many idle confirm channels a connection keeps.
	maxIdleChannels = 32
	// reconnectMin and reconnectMax bound the reconnect backoff.
	reconnectMin = 100 * time.Millisecond
	reconnectMax = 5 * time.Second
	// closeGrace is how long Close lets queued history records drain.
	closeGrace = 2 * time.Second
)

// Sentinel errors callers branch on.
var (
	// ErrUnavailable: the broker could not be asked (not connected, the
	// broker blocked publishing, the channel closed or ctx ended before the
	// publish). The claim was certainly not published: re-send it with the
	// same token.
	ErrUnavailable = errors.New("rabbitmq unavailable (claim not published)")
	// ErrQueueConflict: a queue of the backend's name exists with other
	// arguments (406 PRECONDITION_FAILED).
	ErrQueueConflict = errors.New("queue exists with different arguments (406 PRECONDITION_FAILED)")
	// ErrClosed: the Backend was closed.
	ErrClosed = errors.New("rabbitmq backend closed")
)

// IsTransient reports whether err means "no answer, and the claim was
// certainly not published": the caller may re-send it with the same token.
func IsTransient(err error) bool { return errors.Is(err, ErrUnavailable) }

// Options configures New.
type Options struct {
	// URL is the broker's amqp:// or amqps:// URL (backend.rabbitmq.url),
	// or the URLs of a cluster's nodes separated by commas: each connect,
	// and each reconnect, tries them in turn, starting after the node
	// tried last. Its passwords never appear in errors or logs.
	URL string
	// PasswordFile, if set, names a file whose content (without its
	// trailing newline) replaces the URL's password
	// (backend.rabbitmq.passwordFile).
	PasswordFile string
	// TLS, if set, is the client TLS configuration
	// (backend.rabbitmq.tls). An amqp:// URL is then dialled as amqps://
	// on the same host and port (see the package doc).
	TLS *tls.Config
	// Namespace prefixes every queue name (config namespace).
	Namespace string
	// SlotTTL is every gate's x-expires (backend.rabbitmq.slotTtlMs); 0
	// means DefaultSlotTTL. Every instance of a namespace must use the same
	// value: a gate declared with another one is ErrQueueConflict.
	SlotTTL time.Duration
	// Instance is the recorded instance of a finished run this Backend did
	// not claim itself (config instance).
	Instance string
	// HistoryMaxAge is the history stream's x-max-age and how far back
	// ListRuns reads (backend.retention); 0 means DefaultHistoryMaxAge.
	HistoryMaxAge time.Duration
	// HistoryMaxBytes is the history stream's x-max-length-bytes; 0 means
	// DefaultHistoryMaxBytes.
	HistoryMaxBytes int64
	// Log receives connection and unknown-claim messages; nil discards them.
	Log *zap.Logger
	// Clock is the instance's clock (token book expiry, the history read
	// offset, backoff); nil means clock.Real.
	Clock clock.Clock
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.URL == "":
		return o, errors.New("backend.rabbitmq.url is empty")
	case o.Namespace == "":
		return o, errors.New("namespace is empty")
	case len(o.Namespace) > 128:
		return o, fmt.Errorf("namespace %q is longer than 128 bytes (queue names are at most 255)", o.Namespace)
	case strings.HasPrefix(o.Namespace, "amq."):
		return o, fmt.Errorf("namespace %q: queue names starting with \"amq.\" are reserved by RabbitMQ", o.Namespace)
	case o.SlotTTL < 0:
		return o, fmt.Errorf("negative slot TTL %v", o.SlotTTL)
	case o.SlotTTL > 0 && o.SlotTTL < time.Millisecond:
		return o, fmt.Errorf("slot TTL %v is shorter than 1ms", o.SlotTTL)
	case o.HistoryMaxAge < 0:
		return o, fmt.Errorf("negative history max age %v", o.HistoryMaxAge)
	case o.HistoryMaxBytes < 0:
		return o, fmt.Errorf("negative history max bytes %d", o.HistoryMaxBytes)
	}
	if o.SlotTTL == 0 {
		o.SlotTTL = DefaultSlotTTL
	}
	if o.HistoryMaxAge == 0 {
		o.HistoryMaxAge = DefaultHistoryMaxAge
	}
	if o.HistoryMaxBytes == 0 {
		o.HistoryMaxBytes = DefaultHistoryMaxBytes
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o, nil
}

// Backend is the RabbitMQ claim-only backend: a claim.Backend, not a
// claim.Leaser. It is safe for concurrent use.
type Backend struct {
	o           Options
	log         *zap.Logger
	clock       clock.Clock
	nodes       []node
	where       string        // "rabbitmq <urls with the passwords hidden>"
	secrets     []string      // to scrub from the client's errors
	tls         *tls.Config   // nil: as the URL says
	dialTimeout time.Duration // the longest node's: the TCP connect's, the handshake's, the history declare's, each
	// tried is the index of the node a dial tried last; the next dial
	// starts after it. Only the dials touch it, one at a time.
	tried    atomic.Int32
	gateArgs amqp.Table
	histArgs amqp.Table
	history  string // the history stream's name

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	sess     *session // nil while reconnecting
	closed   bool
	restored chan struct{} // closed (and replaced) when watch installs a new session

	slots  chan struct{} // claims in flight
	tokens *tokenBook
	hist   *historyWriter
	// prepared holds the gates declared ahead of their claims.
	prepared *preparedGates
	hooks    hooks
}

// hooks let tests act inside a claim (export_test.go).
type hooks struct {
	// declared is called with every gate a claim or a preparation
	// declared.
	declared func(queue string)
	// beforePublish is called between a gate's declare and the publish.
	beforePublish func(queue string)
}

var (
	_ claim.Backend  = (*Backend)(nil)
	_ claim.Preparer = (*Backend)(nil)
	_ claim.Recorder = (*Backend)(nil)
)

// GateQueue is the name of the gate queue of the run (job, slot).
func GateQueue(namespace, job string, slot int64) string {
	return namespace + "." + job + ".slot." + strconv.FormatInt(slot, 10)
}

// HistoryQueue is the name of the namespace's history stream.
func HistoryQueue(namespace string) string { return namespace + ".history" }

// New connects to the broker at o.URL (or one of its nodes) and declares
// the history stream.
func New(ctx context.Context, o Options) (*Backend, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open rabbitmq backend: %w", err)
	}
	b := &Backend{
		o:     o,
		log:   o.Log.With(zap.String("backend", "rabbitmq")),
		clock: o.Clock,
		gateArgs: amqp.Table{
			"x-max-length": int64(1),
			"x-overflow":   "reject-publish",
			"x-expires":    o.SlotTTL.Milliseconds(),
		},
		histArgs: amqp.Table{
			"x-queue-type":                    "stream",
			"x-max-age":                       maxAge(o.HistoryMaxAge),
			"x-max-length-bytes":              o.HistoryMaxBytes,
			"x-stream-max-segment-size-bytes": segmentSize(o.HistoryMaxBytes),
		},
		history: HistoryQueue(o.Namespace),
		slots:   make(chan struct{}, maxInFlight),
		tokens:  newTokenBook(o.Clock, o.SlotTTL),
	}
	b.prepared = newPreparedGates(2 * b.PrepareLead())
	if err := b.resolveNodes(); err != nil {
		return nil, err
	}
	b.restored = make(chan struct{})
	b.ctx, b.cancel = context.WithCancel(context.Background())

	s, err := b.dialContext(ctx, true)
	if err != nil {
		b.cancel()
		return nil, err
	}
	b.sess = s
	b.hist = newHistoryWriter(b)
	b.wg.Add(2)
	go b.watch(s)
	go b.hist.run()
	b.log.Info("connected to rabbitmq", zap.String("url", strings.TrimPrefix(s.node.where, "rabbitmq ")),
		zap.String("namespace", o.Namespace), zap.Duration("slot_ttl", o.SlotTTL))
	return b, nil
}

// dialURL returns rawURL with pw (if not empty) as its password and, with
// useTLS, an amqp:// scheme turned into amqps:// on the same host and port
// (5672 when the URL names none). Its errors never quote the URL.
func dialURL(rawURL, pw string, useTLS bool) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", errors.New("the URL cannot be parsed")
	}
	if pw != "" {
		user := "guest" // amqp091's default, as for a URL without user info
		if u.User != nil {
			user = u.User.Username()
		}
		u.User = url.UserPassword(user, pw)
	}
	if useTLS && u.Scheme == "amqp" {
		if u.Port() == "" {
			u.Host = net.JoinHostPort(u.Hostname(), "5672")
		}
		u.Scheme = "amqps"
	}
	return u.String(), nil
}

// Namespace returns the namespace the Backend's queues are in.
func (b *Backend) Namespace() string { return b.o.Namespace }

// Close lets queued history records drain for a short while (2s), then
// closes the connection. Claims in flight answer unknown or fail. It
// returns nil: a connection that is already broken is gone all the same.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()

	b.hist.stopAndDrain(closeGrace)
	b.cancel()
	b.mu.Lock()
	s := b.sess
	b.sess = nil
	b.mu.Unlock()
	if s != nil {
		// Connection.Close waits for the broker's close-ok, which a dead
		// network never sends: wait for it only a while.
		done := make(chan error, 1)
		go func() { done <- s.conn.Close() }()
		t := b.clock.NewTimer(closeGrace)
		select {
		case cerr := <-done:
			if cerr != nil && !errors.Is(cerr, amqp.ErrClosed) {
				b.log.Debug("rabbitmq connection closed with an error", zap.Error(b.scrub(cerr)))
			}
		case <-t.C():
			b.log.Debug("rabbitmq connection close: no answer from the broker", zap.Duration("waited", closeGrace))
			b.drop(s, "") // ends the close and the connection's goroutines
		}
		t.Stop()
	}
	b.wg.Wait()
	return nil
}

// current returns the live session, or an error wrapping ErrUnavailable
// (reconnecting) or ErrClosed.
func (b *Backend) current() (*session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return nil, ErrClosed
	case b.sess == nil:
		return nil, fmt.Errorf("%w: connection to %s is down, reconnecting", ErrUnavailable, b.where)
	}
	return b.sess, nil
}

// restoredSignal returns a channel closed when the connection is next
// restored.
func (b *Backend) restoredSignal() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.restored
}

// connected returns the live session, also while Close drains the history
// writer; an error wrapping ErrUnavailable while reconnecting.
func (b *Backend) connected() (*session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess == nil {
		return nil, fmt.Errorf("%w: connection to %s is down, reconnecting", ErrUnavailable, b.where)
	}
	return b.sess, nil
}

// maxAge formats d as an x-max-age value ("7D", "36h", "90m", "45s"), the
// same string for the same d on every instance (RabbitMQ compares the
// arguments of a re-declare as written).
func maxAge(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dD", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", max(1, int64((d+time.Second-1)/time.Second)))
}

// segmentSize is the history stream's segment size: retention (by age and
// by size) drops whole segments, so a segment is at most a sixteenth of
// the size cap, between 1 MiB and 64 MiB (RabbitMQ's default is 500 MB).
func segmentSize(maxBytes int64) int64 {
	return min(max(maxBytes/16, 1<<20), 64<<20)
}

// scrub returns err with the backend's passwords and every URL password in
// its message hidden (secret.Scrub).
func (b *Backend) scrub(err error) error { return secret.Scrub(err, b.secrets...) }
