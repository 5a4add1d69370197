package rabbitclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/anarchon/anarchon/internal/claim"
)

// answer is what the broker said to one claim's publish.
type answer uint8

const (
	answerNone     answer = iota // no publish: see gateOp.err
	answerAck                    // the gate was empty: won
	answerNack                   // the gate was full: lost
	answerReturned               // basic.return: the gate vanished
	answerMaybe                  // published, no confirm: unknown
)

// Phases of a gateOp, moved by compare-and-swap so that the waiter and the
// worker agree on whether the claim was published.
const (
	opPending    int32 = iota // declaring; not published
	opPublishing              // the worker publishes or has published
	opAbandoned               // the waiter gave up before the publish
)

// gateOp is one claim on its way through a gate channel. The worker
// goroutine declares and publishes; Claim waits for it or for ctx.
type gateOp struct {
	phase   atomic.Int32
	done    chan struct{} // closed when answer/err/why are set
	abandon chan struct{} // closed when the waiter left after the publish
	once    sync.Once
	answer  answer
	why     string // with answerMaybe and answerReturned
	err     error  // with answerNone
}

func (op *gateOp) finish(a answer, why string, err error) {
	op.answer, op.why, op.err = a, why, err
	close(op.done)
}

func (op *gateOp) leave() { op.once.Do(func() { close(op.abandon) }) }

// claimMessage is the body of a claim.
type claimMessage struct {
	Token    claim.Token `json:"token"`
	Instance string      `json:"instance"`
	Job      string      `json:"job"`
	Slot     int64       `json:"slot"`
}

// defaultClaimTimeout bounds a claim whose ctx has no deadline (the
// scheduler always sets its claim timeout).
const defaultClaimTimeout = 30 * time.Second

// Claim makes the decision of docs/spec.md#s3-2 for req; see the package comment
// for the outcomes. Unknown comes with a nil error; an error means the
// claim was not published (IsTransient), or the broker refused the gate's
// declare (ErrQueueConflict and others). ctx bounds the wait for the
// broker (defaultClaimTimeout when it has no deadline): ending before the
// publish is a transient error, after it unknown.
func (b *Backend) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	if err := checkRequest(req); err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	queue := GateQueue(b.o.Namespace, req.Job, req.Slot)
	key := tokenKey{req.Job, req.Slot, req.Token}
	prior := b.tokens.get(key)
	late := req.Now.Sub(req.SlotTime()) > req.MaxLate
	switch {
	case prior.state == tokenWon:
		// My own claim, re-sent after its ack.
		return claim.Result{Outcome: claim.Won, Attempt: 1}, nil
	case prior.state == tokenGone:
		b.logUnknown(req, queue, "re-sent claim whose gate vanished during its first copy")
		return claim.Result{Outcome: claim.Unknown}, nil
	case prior.state == tokenMaybe && late:
		b.logUnknown(req, queue, "re-sent claim, now late, whose first copy may have reached the gate")
		return claim.Result{Outcome: claim.Unknown}, nil
	case late:
		return claim.Result{Outcome: claim.Late}, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultClaimTimeout)
		defer cancel()
	}
	started := b.clock.Now()
	a, why, err := b.claimGate(ctx, req, queue)
	if err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	switch a {
	case answerAck:
		b.tokens.set(key, tokenWon, req.Instance, started)
		b.hist.enqueue(record{
			Type: recordClaimed, Job: req.Job, Slot: req.Slot, Attempt: 1,
			Instance: req.Instance, Token: req.Token, Status: claim.StatusRunning, StartedAt: claim.StartOf(req.Now, req.Slot),
		})
		return claim.Result{Outcome: claim.Won, Attempt: 1}, nil
	case answerNack:
		if prior.state == tokenMaybe {
			b.logUnknown(req, queue, "re-sent claim found the gate full: it may hold this token's first copy")
			return claim.Result{Outcome: claim.Unknown}, nil
		}
		return claim.Result{Outcome: claim.Lost}, nil
	case answerReturned:
		b.tokens.set(key, tokenGone, req.Instance, started)
	default:
		b.tokens.set(key, tokenMaybe, req.Instance, started)
	}
	b.logUnknown(req, queue, why)
	return claim.Result{Outcome: claim.Unknown}, nil
}

// checkRequest refuses requests that cannot be decided.
func checkRequest(req claim.Request) error {
	switch {
	case req.Job == "":
		return errors.New("empty job name")
	case req.Token == "":
		return errors.New("empty token")
	case req.Now.IsZero():
		return errors.New("request without the instance's clock (Request.Now)")
	case req.MaxLate < 0:
		return fmt.Errorf("negative maxLate %v", req.MaxLate)
	}
	return nil
}

// claimGate declares the gate and publishes the claim on a gate channel of
// its own, in a worker goroutine, and waits for the answer or for ctx. A
// ctx that ends before the publish is an error (not published); after it,
// answerMaybe.
func (b *Backend) claimGate(ctx context.Context, req claim.Request, queue string) (answer, string, error) {
	body, err := json.Marshal(claimMessage{Token: req.Token, Instance: req.Instance, Job: req.Job, Slot: req.Slot})
	if err != nil {
		return answerNone, "", err
	}
	return b.publishGate(ctx, queue, amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    string(req.Token),
		Type:         "claim",
		AppId:        "anarchon",
		Body:         body,
	})
}

// publishGate declares the gate queue and publishes msg into it (a claim
// or a note: whichever the gate takes first holds the run) on a gate
// channel of its own, in a worker goroutine, and waits for the answer or
// for ctx, as claimGate says.
func (b *Backend) publishGate(ctx context.Context, queue string, msg amqp.Publishing) (answer, string, error) {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return answerNone, "", fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
	s, err := b.current()
	if err != nil {
		<-b.slots
		return answerNone, "", err
	}
	if reason := s.blocked.Load(); reason != nil {
		<-b.slots
		return answerNone, "", unavailable("the broker blocks publishing (%s)", *reason)
	}
	gc, err := b.get(ctx, s)
	if err != nil {
		<-b.slots
		switch {
		case errors.Is(err, errNoAnswer):
			return answerNone, "", fmt.Errorf("%w: %w", ErrUnavailable, err)
		case refused(err):
			return answerNone, "", fmt.Errorf("open a channel: %w", b.scrub(err))
		}
		return answerNone, "", unavailable("open a channel: %v", b.scrub(err))
	}
	op := &gateOp{done: make(chan struct{}), abandon: make(chan struct{})}
	go b.runGate(ctx, s, gc, queue, msg, op)
	select {
	case <-op.done:
		return op.answer, op.why, op.err
	case <-ctx.Done():
	}
	if op.phase.CompareAndSwap(opPending, opAbandoned) {
		return answerNone, "", fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
	select {
	case <-op.done: // answered meanwhile
		return op.answer, op.why, op.err
	default:
	}
	op.leave()
	return answerMaybe, fmt.Sprintf("no confirm before the claim's deadline (%v)", ctx.Err()), nil
}

// runGate is the worker of one claim: declare (bounded by ctx, the
// claim's), publish, wait for the confirm (or for the waiter to leave). It
// gives the channel back when the claim was answered cleanly, and closes it
// otherwise (a late confirm must not answer the next claim), in the
// background and bounded (see abandon): a worker never waits for the
// broker longer than its claim.
func (b *Backend) runGate(ctx context.Context, s *session, gc *gateChannel, queue string, msg amqp.Publishing, op *gateOp) {
	defer func() { <-b.slots }()
	g := &gateWorker{b: b, s: s, gc: gc, queue: queue, msg: msg, op: op, fate: fateClose}
	defer g.release()
	g.prepared = b.prepared.take(queue, b.clock.Now())
	g.run(ctx)
}

// gateFate is what becomes of a gate channel once its claim's worker is
// done with it.
type gateFate uint8

const (
	fateClose     gateFate = iota // closed: a late confirm must not answer the next claim
	fateReuse                     // answered cleanly: back to the idle list
	fateHandedOff                 // a declare with no answer: call abandoned the channel
)

// gateWorker is the state of runGate's worker goroutine, which alone
// touches it: the claim's gate channel, what it publishes there, and what
// becomes of the channel after.
type gateWorker struct {
	b        *Backend
	s        *session
	gc       *gateChannel
	queue    string
	msg      amqp.Publishing
	op       *gateOp
	prepared bool // the gate was declared ahead of the claim
	fate     gateFate
}

// release gives the channel back when the claim was answered cleanly, and
// closes it in the background unless a declare with no answer handed it
// off.
func (g *gateWorker) release() {
	switch g.fate {
	case fateReuse:
		g.b.put(g.s, g.gc)
	case fateClose:
		g.b.closeChannel(g.s, g.gc.ch, "close a gate channel")
	}
}

// run declares the gate (unless it was declared ahead), publishes the
// claim and answers op from its confirm. It goes round again only when a
// gate declared ahead turned out to be gone.
func (g *gateWorker) run(ctx context.Context) {
	for published := false; ; published = true {
		if !g.prepared && !g.declare(ctx) {
			return
		}
		if h := g.b.hooks.beforePublish; h != nil {
			h(g.queue)
		}
		if !published && !g.op.phase.CompareAndSwap(opPending, opPublishing) {
			g.fate = fateReuse // the waiter left before the publish
			return
		}
		dc, ok := g.publish()
		if !ok || !g.answer(dc) {
			return
		}
	}
}

// declare declares the gate, bounded by ctx. When that fails it answers op
// with the error and reports false.
func (g *gateWorker) declare(ctx context.Context) bool {
	handed, err := g.b.declareGate(ctx, g.s, g.gc, g.queue)
	if err == nil {
		return true
	}
	if handed {
		g.fate = fateHandedOff
	}
	g.op.finish(answerNone, "", err)
	return false
}

// publish publishes the claim and waits for its confirm, which it returns.
// It reports false, and leaves the channel to be closed, when there is no
// confirm to read: the publish failed or the Backend closed (op answered),
// or the waiter left.
func (g *gateWorker) publish() (*amqp.DeferredConfirmation, bool) {
	dc, err := g.gc.ch.PublishWithDeferredConfirm("", g.queue, true, false, g.msg)
	switch {
	case errors.Is(err, amqp.ErrClosed):
		// amqp091 answers ErrClosed only before the publish's last frame
		// was written: the broker never routes an incomplete publish
		// (and an earlier copy, if any, was returned: stored nowhere).
		g.op.finish(answerNone, "", unavailable("publish to %q: %v", g.queue, err))
		return nil, false
	case err != nil:
		g.op.finish(answerMaybe, fmt.Sprintf("publish failed after it may have been sent: %v", g.b.scrub(err)), nil)
		return nil, false
	}
	select {
	case <-dc.Done():
		return dc, true
	case <-g.op.abandon:
		return nil, false
	case <-g.b.ctx.Done():
		g.op.finish(answerMaybe, "backend closed before the confirm", nil)
		return nil, false
	}
}

// answer answers op from dc, the confirm that came, and any return before
// it, and sets the channel's fate. It reports true, answering nothing,
// when the claim must be published again: the gate declared ahead was
// gone and the waiter is still there.
func (g *gateWorker) answer(dc *amqp.DeferredConfirmation) (again bool) {
	returned := g.gc.drainReturns(g.msg.MessageId)
	switch {
	case returned && g.prepared:
		// The gate declared ahead is gone (expired, deleted): the
		// claim was stored nowhere. Declare the gate and publish
		// again, unless the waiter has left (it answered unknown: a
		// claim stored now would win a run that nobody runs).
		select {
		case <-g.op.abandon:
			g.fate = fateReuse
			return false
		default:
		}
		g.prepared = false
		return true
	case returned:
		g.fate = fateReuse
		g.op.finish(answerReturned, "the gate vanished between its declare and the publish (basic.return 312 NO_ROUTE)", nil)
	case dc.Acked():
		g.fate = fateReuse
		g.op.finish(answerAck, "", nil)
	case g.gc.ch.IsClosed():
		// amqp091 completes the confirms of a closing channel as nacks,
		// after it marked the channel closed.
		g.op.finish(answerMaybe, "the channel closed before the confirm", nil)
	default:
		g.fate = fateReuse
		g.op.finish(answerNack, "", nil)
	}
	return false
}

// declareGate declares the gate queue on gc, bounded by ctx. handedOff
// reports a declare that got no answer: the channel then belongs to the
// abandon that call started.
func (b *Backend) declareGate(ctx context.Context, s *session, gc *gateChannel, queue string) (handedOff bool, err error) {
	_, err = call(ctx, b, s, gc.ch, fmt.Sprintf("declare queue %q", queue), func() (amqp.Queue, error) {
		return gc.ch.QueueDeclare(queue, true, false, false, false, b.gateArgs)
	}, nil)
	if err == nil {
		if h := b.hooks.declared; h != nil {
			h(queue)
		}
		return false, nil
	}
	return errors.Is(err, errNoAnswer), b.declareFailure(queue, err)
}

// declareFailure is the error of a failed declare of queue: transient
// (ErrUnavailable) unless the broker refused it for good. A 404 on a
// declare is transient: the broker holds the queue's durable record but
// found no live queue for it, because its node is down (a cluster), or
// because another declare was creating it at that instant (most likely
// RabbitMQ 3.x looking the queue up with dirty reads of its two queue
// tables while the creating declare's transaction writes them). Nothing was
// published after a failed declare, so the claim may be sent again.
func (b *Backend) declareFailure(queue string, err error) error {
	var ae *amqp.Error
	switch _, _, conflict := inequivalentArg(err); {
	case errors.Is(err, errNoAnswer):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case conflict:
		return conflictError(queue, err)
	case errors.As(err, &ae) && ae.Server && ae.Code == amqp.NotFound:
		return unavailable("declare queue %q: the broker has no live queue for its record (its node is down, or another declare is creating it): %v", queue, b.scrub(err))
	case refused(err):
		return refusal(fmt.Errorf("declare queue %q: %w", queue, b.scrub(err)), err)
	}
	return unavailable("declare queue %q: %v", queue, b.scrub(err))
}
