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

// abortGrace is how long a channel whose call was abandoned (its caller's
// ctx ended first) has to close before the backend drops the whole
// connection.
const abortGrace = 2 * time.Second

// Bounds of one reconnect attempt (dial, handshake, history declare): the
// first is short, so that a connection that came back is found soon after
// a blackhole; each failed attempt doubles it, up to twice the dial
// timeout (the TCP connect and the handshake each have the dial timeout).
const reconnectAttemptMin = 2 * time.Second

// errNoAnswer: the broker did not answer a call before the caller's ctx
// ended. The backend abandoned the call (see call).
var errNoAnswer = errors.New("no answer from rabbitmq")

// session is one AMQP connection and its idle confirm channels.
type session struct {
	conn *amqp.Connection
	node node // the node it is connected to
	// raw is the TCP connection under conn. Closing it is the one sure way
	// to end calls whose replies were lost: amqp091's reader fails, and
	// with it every pending call, channel and confirm.
	raw     net.Conn
	dropped atomic.Bool
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

// drainReturns empties gc's returns once the confirm of the message with
// id came (the broker sends a basic.return before the confirm of the same
// message) and reports whether that message was returned.
func (gc *gateChannel) drainReturns(id string) (returned bool) {
	for {
		select {
		case r, ok := <-gc.returns:
			if !ok { // closed with the channel
				return returned
			}
			returned = returned || r.MessageId == id
		default:
			return returned
		}
	}
}

// dialerFor returns the TCP dialer of uri and its timeout: the URL's
// connection_timeout, or DefaultDialTimeout (amqp091's default is 30s).
// The dialer also sets that timeout as the deadline of the TLS and AMQP
// handshakes.
func dialerFor(uri amqp.URI) (func(network, addr string) (netConn, error), time.Duration) {
	timeout := DefaultDialTimeout
	if uri.ConnectionTimeout > 0 {
		timeout = time.Duration(uri.ConnectionTimeout) * time.Millisecond
	}
	return amqp.DefaultDial(timeout), timeout
}

// dialContext dials a session, giving up when ctx ends: the dial's
// connection is then closed, at once or as soon as its TCP connect ends.
// With strict, a history stream that cannot be declared fails the dial (at
// start); otherwise it is logged (a reconnect: the gates do not need the
// stream).
func (b *Backend) dialContext(ctx context.Context, strict bool) (*session, error) {
	type dialed struct {
		s   *session
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		s, err := b.dial(ctx, strict)
		ch <- dialed{s, err}
	}()
	select {
	case d := <-ch:
		return d.s, d.err
	case <-ctx.Done():
		go func() {
			if d := <-ch; d.s != nil {
				b.drop(d.s, "")
			}
		}()
		return nil, fmt.Errorf("connect to %s: %w", b.where, context.Cause(ctx))
	}
}

// dialOne opens a connection to n and (re)declares the history stream on
// it. When ctx ends, the TCP connection is closed, which ends the
// handshake or the declare at once.
func (b *Backend) dialOne(ctx context.Context, n node, strict bool) (*session, error) {
	name := "anarchon"
	if b.o.Instance != "" {
		name += " " + b.o.Instance
	}
	g := &dialGuard{ctx: ctx, dialer: n.dialer}
	stop := context.AfterFunc(ctx, g.end)
	defer stop()
	conn, err := amqp.DialConfig(n.url, amqp.Config{
		Properties: amqp.Table{"connection_name": name},
		Dial:       g.dial,
		// A copy: the client fills in ServerName.
		TLSClientConfig: b.tls.Clone(),
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to %s: %w", n.where, context.Cause(ctx))
		}
		return nil, refusal(fmt.Errorf("connect to %s: %w", n.where, b.scrub(err)), err)
	}
	s := &session{conn: conn, raw: g.raw, node: n, closed: conn.NotifyClose(make(chan *amqp.Error, 1))}
	// The broker says connection.blocked right after the handshake when an
	// alarm is already on: listen before anything else.
	blocked := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	go b.watchBlocked(s, blocked)
	dctx, cancel := b.withTimeout(ctx, n.timeout)
	err = b.declareHistory(dctx, s)
	cancel()
	if err != nil {
		if strict || conn.IsClosed() || errors.Is(err, errNoAnswer) {
			b.drop(s, "")
			return nil, err
		}
		b.log.Error("history stream not declared; claims go on, status and results fail", zap.Error(err))
	}
	if !stop() {
		// ctx ended meanwhile: its AfterFunc closed the connection.
		b.drop(s, "")
		return nil, fmt.Errorf("connect to %s: %w", n.where, context.Cause(ctx))
	}
	return s, nil
}

// dialGuard ties the TCP connection of one dial to the dial's ctx: end,
// called when ctx ends, closes it, and dial closes at once a connection
// made after that. Closing it ends the handshake or the declare on it.
type dialGuard struct {
	ctx    context.Context
	dialer func(network, addr string) (netConn, error)

	mu    sync.Mutex
	raw   net.Conn // the connection dial made; nil before
	ended bool     // ctx ended
}

// dial is amqp091's Dial: it connects with the node's dialer and keeps the
// connection, or closes it when ctx has already ended.
func (g *dialGuard) dial(network, addr string) (net.Conn, error) {
	c, err := g.dialer(network, addr)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended {
		c.Close()
		return nil, g.ctx.Err()
	}
	g.raw = c
	return c, nil
}

// end closes the connection dial made, and any it makes from now on.
func (g *dialGuard) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ended = true
	if g.raw != nil {
		g.raw.Close()
	}
}

// watchBlocked follows the broker's connection.blocked and unblocked
// notices on blocked (closed with the connection) into s.blocked, logging
// each.
func (b *Backend) watchBlocked(s *session, blocked <-chan amqp.Blocking) {
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
}

// drop closes the session's TCP connection without the AMQP close
// handshake (which a broker whose replies are lost never completes):
// amqp091 then fails every pending call with an error, and watch
// reconnects. why, when set, is logged.
func (b *Backend) drop(s *session, why string) {
	if !s.dropped.CompareAndSwap(false, true) {
		return
	}
	if why != "" {
		b.log.Warn("rabbitmq connection dropped: the broker did not answer; reconnecting",
			zap.String("url", b.where), zap.String("why", why))
	}
	s.raw.Close()
}

// call runs fn, a sequence of amqp091 calls (which take no context and
// wait for their reply forever when it is lost: a blackhole on a
// connection that stays open), in a goroutine, and waits for it or for
// ctx. When ctx ends first, call returns an error wrapping errNoAnswer and
// ctx's error, and abandons fn: see abandon; ch is the channel fn uses (nil
// when there is none yet, as while opening one). orphan, if not nil,
// receives what fn returns without an error after it was abandoned (a
// channel opened too late, to close).
func call[T any](ctx context.Context, b *Backend, s *session, ch *amqp.Channel, what string, fn func() (T, error), orphan func(T)) (T, error) {
	const (
		running int32 = iota
		finished
		abandoned
	)
	var (
		state atomic.Int32
		res   T
		err   error
		zero  T
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, e := fn()
		if state.CompareAndSwap(running, finished) {
			res, err = r, e
		} else if e == nil && orphan != nil {
			orphan(r)
		}
	}()
	select {
	case <-done:
		return res, err
	case <-ctx.Done():
	}
	if !state.CompareAndSwap(running, abandoned) {
		<-done // finished meanwhile
		return res, err
	}
	go b.abandon(s, ch, done, what)
	return zero, fmt.Errorf("%s: %w (%w)", what, errNoAnswer, context.Cause(ctx))
}

// abandon ends calls their caller stopped waiting for: it closes ch (nil:
// none) and waits up to abortGrace for the close and for the calls (done;
// nil: none) to end. A broker that answers the channel's close is alive,
// and only that channel is lost; otherwise it drops the connection, which
// ends both at once.
func (b *Backend) abandon(s *session, ch *amqp.Channel, done <-chan struct{}, what string) {
	var closed chan struct{}
	if ch != nil {
		closed = make(chan struct{})
		go func() {
			defer close(closed)
			ch.Close()
		}()
	}
	t := b.clock.NewTimer(abortGrace)
	defer t.Stop()
	for done != nil || closed != nil {
		select {
		case <-done:
			done = nil
		case <-closed:
			closed = nil
		case <-t.C():
			b.drop(s, fmt.Sprintf("%s: no answer, and the channel did not close within %v", what, abortGrace))
			return
		}
	}
}

// withTimeout is context.WithTimeout on the Backend's clock.
func (b *Backend) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return clock.WithTimeout(parent, b.clock, d)
}

// closeChannel closes ch in the background, bounded as abandon is.
func (b *Backend) closeChannel(s *session, ch *amqp.Channel, what string) {
	go b.abandon(s, ch, nil, what)
}

// openChannel opens a channel (in confirm mode with confirm), bounded by
// ctx (see call).
func (b *Backend) openChannel(ctx context.Context, s *session, confirm bool) (*amqp.Channel, error) {
	return call(ctx, b, s, nil, "open a channel", func() (*amqp.Channel, error) {
		ch, err := s.conn.Channel()
		if err != nil || !confirm {
			return ch, err
		}
		if err := ch.Confirm(false); err != nil {
			b.closeChannel(s, ch, "close a channel")
			return nil, err
		}
		return ch, nil
	}, func(ch *amqp.Channel) { b.closeChannel(s, ch, "close a channel opened too late") })
}

// watch waits for the session's connection to drop and reconnects with
// backoff, until Close. It logs once per change of state. Each attempt is
// bounded (reconnectAttemptMin, doubling up to twice the dial timeout), so
// that an attempt whose replies are lost does not hold the reconnection.
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
		b.drop(s, "") // the TCP connection too, whatever closed the AMQP one
		lost := b.clock.Now()
		fields := []zap.Field{zap.String("url", s.node.where)}
		if cause != nil {
			fields = append(fields, zap.String("cause", b.scrub(cause).Error()))
		}
		b.log.Warn("rabbitmq connection lost; reconnecting", fields...)

		backoff, attempts := reconnectMin, 0
		limit := min(reconnectAttemptMin, 2*b.dialTimeout)
		var ns *session
		for ns == nil {
			wait := backoff/2 + rand.N(backoff/2+1)
			if clock.Sleep(b.ctx, b.clock, wait) != nil {
				return
			}
			attempts++
			ctx, cancel := b.withTimeout(b.ctx, limit)
			var err error
			ns, err = b.dialContext(ctx, false)
			cancel()
			if err != nil {
				b.log.Debug("rabbitmq reconnect failed", zap.Int("attempt", attempts), zap.Error(err))
				backoff = min(2*backoff, reconnectMax)
				limit = min(2*limit, 2*b.dialTimeout)
			}
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			b.drop(ns, "")
			return
		}
		// Logged before the session is handed out: no claim on the new
		// connection can be answered, and logged, before its restoration.
		b.log.Info("rabbitmq connection restored", zap.String("url", ns.node.where),
			zap.Duration("down", b.clock.Now().Sub(lost)), zap.Int("attempts", attempts))
		b.sess = ns
		close(b.restored)
		b.restored = make(chan struct{})
		b.mu.Unlock()
		s = ns
	}
}

// get returns an idle gate channel or opens one, bounded by ctx.
func (b *Backend) get(ctx context.Context, s *session) (*gateChannel, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		gc := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return gc, nil
	}
	s.mu.Unlock()
	ch, err := b.openChannel(ctx, s, true)
	if err != nil {
		return nil, err
	}
	return &gateChannel{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 4))}, nil
}

// put gives back a channel whose claim was answered; a closed one, or one
// beyond the idle limit, is dropped.
func (b *Backend) put(s *session, gc *gateChannel) {
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
	b.closeChannel(s, gc.ch, "close a gate channel")
}

// declareHistory declares the history stream on a channel of its own,
// bounded by ctx (see call). A stream with other retention arguments is
// kept as it is (logged); a queue of that name that is not a stream is
// ErrQueueConflict.
func (b *Backend) declareHistory(ctx context.Context, s *session) error {
	_, err := call(ctx, b, s, nil, fmt.Sprintf("declare history stream %q", b.history), func() (struct{}, error) {
		return struct{}{}, b.declareHistoryOn(s)
	}, nil)
	return err
}

func (b *Backend) declareHistoryOn(s *session) error {
	ch, err := s.conn.Channel()
	if err != nil {
		return fmt.Errorf("declare history stream %q: %w", b.history, b.scrub(err))
	}
	_, err = ch.QueueDeclare(b.history, true, false, false, false, b.histArgs)
	if err == nil {
		b.closeChannel(s, ch, "close the history declare's channel")
		return nil
	}
	arg, detail, conflict := inequivalentArg(err)
	if !conflict || arg == "x-queue-type" || arg == "durable" || arg == "exclusive" || arg == "auto_delete" {
		if conflict {
			return fmt.Errorf("declare history stream: %w", conflictError(b.history, err))
		}
		return refusal(fmt.Errorf("declare history stream %q: %w", b.history, b.scrub(err)), err)
	}
	// The 406 names the first argument that differs, and RabbitMQ checks
	// x-max-length-bytes before x-queue-type: find out whether the queue is
	// a stream at all.
	stream, err := b.isStream(s, b.history)
	switch {
	case err != nil:
		return fmt.Errorf("declare history stream %q: %w", b.history, b.scrub(err))
	case !stream:
		return fmt.Errorf("declare history stream: %w", conflictRefusal(&queueConflict{msg: fmt.Sprintf(
			"queue %q exists and is not a stream (x-queue-type): delete it or use another namespace", b.history)}))
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
func (b *Backend) isStream(s *session, queue string) (bool, error) {
	ch, err := s.conn.Channel()
	if err != nil {
		return false, err
	}
	defer b.closeChannel(s, ch, "close the stream check's channel")
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
	// Debug: the scheduler warns of every slot answered unknown.
	b.log.Debug("claim unknown: the broker gave no decision; the run is skipped",
		zap.String("job", req.Job), zap.Time("slot", req.SlotTime()), zap.Int64("slot_ms", req.Slot),
		zap.String("token", req.Token.Short()), zap.String("queue", queue), zap.String("why", why))
}
