package rabbitclaim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

type netConn = net.Conn

// session is one AMQP connection and its idle confirm channels.
type session struct {
	conn *amqp.Connection
	// closed receives the connection's close error (nil, closed channel:
	// closed by us).
	closed chan *amqp.Error
	// blocked holds the broker's reason while it blocks this connection's
	// publishes (a memory or disk alarm); nil otherwise.
	blocked atomic.Pointer[string]

	mu   sync.Mutex
	idle []*gateChannel
}

// gateChannel is a confirm-mode channel that carries one claim at a time,
// so that its next confirm, and any return before it, answers that claim.
type gateChannel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
}

// dialerFor returns the TCP dialer of uri: the URL's connection_timeout,
// or DefaultDialTimeout (amqp091's default is 30s).
func dialerFor(uri amqp.URI) func(network, addr string) (netConn, error) {
	timeout := DefaultDialTimeout
	if uri.ConnectionTimeout > 0 {
		timeout = time.Duration(uri.ConnectionTimeout) * time.Millisecond
	}
	return amqp.DefaultDial(timeout)
}

// dialContext dials a session, giving up when ctx ends (the dial itself
// goes on in the background and its connection is closed). With strict, a
// history stream that cannot be declared fails the dial (at start);
// otherwise it is logged (a reconnect: the gates do not need the stream).
func (b *Backend) dialContext(ctx context.Context, strict bool) (*session, error) {
	type dialed struct {
		s   *session
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		s, err := b.dial(strict)
		ch <- dialed{s, err}
	}()
	select {
	case d := <-ch:
		return d.s, d.err
	case <-ctx.Done():
		go func() {
			if d := <-ch; d.s != nil {
				d.s.conn.Close()
			}
		}()
		return nil, fmt.Errorf("connect to %s: %w", b.where, ctx.Err())
	}
}

// dial opens a connection and (re)declares the history stream on it.
func (b *Backend) dial(strict bool) (*session, error) {
	name := "anarchon"
	if b.o.Instance != "" {
		name += " " + b.o.Instance
	}
	conn, err := amqp.DialConfig(b.url, amqp.Config{
		Properties: amqp.Table{"connection_name": name},
		Dial:       b.dialer,
		// A copy: the client fills in ServerName.
		TLSClientConfig: b.tls.Clone(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", b.where, b.scrub(err))
	}
	s := &session{conn: conn, closed: conn.NotifyClose(make(chan *amqp.Error, 1))}
	// The broker says connection.blocked right after the handshake when an
	// alarm is already on: listen before anything else.
	blocked := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	go func() {
		for bl := range blocked { // closed with the connection
			if bl.Active {
				reason := bl.Reason
				s.blocked.Store(&reason)
				b.log.Warn("rabbitmq blocked publishing (resource alarm); claims fail until it unblocks",
					zap.String("reason", reason))
			} else {
				s.blocked.Store(nil)
				b.log.Info("rabbitmq unblocked publishing")
			}
		}
	}()
	if err := b.declareHistory(conn); err != nil {
		if strict || conn.IsClosed() {
			conn.Close()
			return nil, err
		}
		b.log.Error("history stream not declared; claims go on, status and results fail", zap.Error(err))
	}
	return s, nil
}

// watch waits for the session's connection to drop and reconnects with
// backoff, until Close. It logs once per change of state.
func (b *Backend) watch(s *session) {
	defer b.wg.Done()
	for {
		var cause *amqp.Error
		select {
		case cause = <-s.closed:
		case <-b.ctx.Done():
			return
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return
		}
		b.sess = nil
		b.mu.Unlock()
		lost := b.clock.Now()
		fields := []zap.Field{zap.String("url", b.where)}
		if cause != nil {
			fields = append(fields, zap.String("cause", b.scrub(cause).Error()))
		}
		b.log.Warn("rabbitmq connection lost; reconnecting", fields...)

		backoff, attempts := reconnectMin, 0
		var ns *session
		for ns == nil {
			wait := backoff/2 + rand.N(backoff/2+1)
			if clock.Sleep(b.ctx, b.clock, wait) != nil {
				return
			}
			attempts++
			var err error
			if ns, err = b.dialContext(b.ctx, false); err != nil {
				b.log.Debug("rabbitmq reconnect failed", zap.Int("attempt", attempts), zap.Error(err))
				backoff = min(2*backoff, reconnectMax)
			}
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			ns.conn.Close()
			return
		}
		b.sess = ns
		b.mu.Unlock()
		b.log.Info("rabbitmq connection restored", zap.String("url", b.where),
			zap.Duration("down", b.clock.Now().Sub(lost)), zap.Int("attempts", attempts))
		s = ns
	}
}

// get returns an idle gate channel or opens one.
func (s *session) get() (*gateChannel, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		gc := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return gc, nil
	}
	s.mu.Unlock()
	ch, err := s.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, err
	}
	return &gateChannel{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 4))}, nil
}

// put gives back a channel whose claim was answered; a closed one, or one
// beyond the idle limit, is dropped.
func (s *session) put(gc *gateChannel) {
	if gc.ch.IsClosed() || s.conn.IsClosed() {
		return
	}
	s.mu.Lock()
	if len(s.idle) < maxIdleChannels {
		s.idle = append(s.idle, gc)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	gc.ch.Close()
}

// declareHistory declares the history stream on a channel of its own. A
// stream with other retention arguments is kept as it is (logged); a queue
// of that name that is not a stream is ErrQueueConflict.
func (b *Backend) declareHistory(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("declare history stream %q: %w", b.history, b.scrub(err))
	}
	_, err = ch.QueueDeclare(b.history, true, false, false, false, b.histArgs)
	if err == nil {
		ch.Close()
		return nil
	}
	arg, detail, conflict := inequivalentArg(err)
	if !conflict || arg == "x-queue-type" || arg == "durable" || arg == "exclusive" || arg == "auto_delete" {
		if conflict {
			return fmt.Errorf("declare history stream: %w", conflictError(b.history, err))
		}
		return fmt.Errorf("declare history stream %q: %w", b.history, b.scrub(err))
	}
	// The 406 names the first argument that differs, and RabbitMQ checks
	// x-max-length-bytes before x-queue-type: find out whether the queue is
	// a stream at all.
	stream, err := isStream(conn, b.history)
	switch {
	case err != nil:
		return fmt.Errorf("declare history stream %q: %w", b.history, b.scrub(err))
	case !stream:
		return fmt.Errorf("declare history stream: %w", &queueConflict{msg: fmt.Sprintf(
			"queue %q exists and is not a stream (x-queue-type): delete it or use another namespace", b.history)})
	}
	b.log.Warn("the history stream exists with other retention arguments; keeping them (delete the stream, or set them with a policy, to apply the configured ones)",
		zap.String("queue", b.history), zap.String("argument", arg), zap.String("detail", detail))
	return nil
}

// isStream reports whether the existing queue is a stream. A consumer with
// x-stream-offset and no prefetch is refused either way, with a 406 that
// tells: "consumer prefetch count is not set" on a stream, "invalid arg
// 'x-stream-offset' ... of queue type rabbit_classic_queue" on others. A
// consumer that is accepted anyway gets messages it never acks: closing its
// channel gives them back.
func isStream(conn *amqp.Connection, queue string) (bool, error) {
	ch, err := conn.Channel()
	if err != nil {
		return false, err
	}
	defer ch.Close()
	_, err = ch.Consume(queue, "", false, false, false, false, amqp.Table{"x-stream-offset": "next"})
	var ae *amqp.Error
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed:
		return strings.Contains(ae.Reason, "prefetch"), nil
	}
	return false, err
}

// refused reports whether err is the broker refusing an operation on a
// live connection (403, 404, 405, 406 on the channel): re-sending cannot
// help. Anything else that fails before a publish (a broken pipe, a closed
// channel or connection, a connection-level error) is the connection's
// loss, and the claim was not published.
func refused(err error) bool {
	var ae *amqp.Error
	if !errors.As(err, &ae) || !ae.Server {
		return false
	}
	switch ae.Code {
	case amqp.AccessRefused, amqp.NotFound, amqp.ResourceLocked, amqp.PreconditionFailed:
		return true
	}
	return false
}

// unavailable wraps ErrUnavailable with why.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}

// logUnknown logs a claim answered unknown.
func (b *Backend) logUnknown(req claim.Request, queue, why string) {
	b.log.Warn("claim unknown: the broker gave no decision; the run is skipped",
		zap.String("job", req.Job), zap.Time("slot", req.SlotTime()), zap.Int64("slot_ms", req.Slot),
		zap.String("token", req.Token.Short()), zap.String("queue", queue), zap.String("why", why))
}
