package rabbitclaim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// recordType is the kind of a history record.
type recordType string

// History record types.
const (
	recordClaimed  recordType = "claimed"  // a claim was won
	recordFinished recordType = "finished" // Finish
	recordNoted    recordType = "noted"    // Record: a slot no attempt ran
	recordMarker   recordType = "marker"   // ListRuns's end-of-read marker
)

// record is one message of the history stream (JSON).
type record struct {
	Type       recordType   `json:"type"`
	ID         string       `json:"id,omitempty"` // a marker's id
	Job        string       `json:"job,omitempty"`
	Slot       int64        `json:"slot"`
	Attempt    int          `json:"attempt,omitempty"`
	Instance   string       `json:"instance,omitempty"`
	Token      claim.Token  `json:"token,omitempty"`
	Status     claim.Status `json:"status,omitempty"`
	ExitCode   *int         `json:"exit_code,omitempty"`
	StartedAt  time.Time    `json:"started_at,omitzero"`
	FinishedAt time.Time    `json:"finished_at,omitzero"`
	OutputTail string       `json:"output_tail,omitempty"`
	Reason     string       `json:"reason,omitempty"`  // a note's
	HeldBy     int64        `json:"held_by,omitempty"` // a note's
}

// Limits of the history writer.
const (
	historyQueueLen       = 4096            // records waiting to be written
	historyBatch          = 64              // records published before waiting for their confirms
	historyConfirmTimeout = 5 * time.Second // a batch's confirms, before the channel is dropped
	historyPrefetch       = 512             // ListRuns's consumer prefetch
)

// histItem is a record on its way to the stream.
type histItem struct {
	rec  record
	id   string
	body []byte
	done chan error      // buffered; nil when nobody waits
	ctx  context.Context // the waiter's; nil when nobody waits
}

func (it *histItem) signal(err error) {
	if it.done != nil {
		it.done <- err
	}
}

// historyWriter writes records to the history stream, in order, from one
// goroutine with its own confirm channel: the "claimed" records in the
// background (no latency on the claim), Finish's and ListRuns's records
// waited for. A record is retried until it is confirmed or the Backend
// closes. A batch whose confirms do not arrive within
// historyConfirmTimeout, or before a caller waiting for one of its records
// gives up, loses its channel (and, if the broker does not answer the
// close either, the connection: see abandon); its unconfirmed records are
// published again on a new one. A record may so be written twice: the
// reader keeps one record per run.
type historyWriter struct {
	b        *Backend
	queue    chan *histItem
	stop     chan struct{} // closed by Close: write what is queued, then exit
	stopOnce sync.Once
	exited   chan struct{}

	// owned by run
	sess    *session
	ch      *amqp.Channel
	returns chan amqp.Return
	failing bool
}

func newHistoryWriter(b *Backend) *historyWriter {
	return &historyWriter{b: b, queue: make(chan *histItem, historyQueueLen),
		stop: make(chan struct{}), exited: make(chan struct{})}
}

func newItem(rec record, wait bool) (*histItem, error) {
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode %s record: %w", rec.Type, err)
	}
	it := &histItem{rec: rec, id: string(claim.NewToken()), body: body}
	if wait {
		it.done = make(chan error, 1)
	}
	return it, nil
}

// enqueue queues rec without waiting; a full queue drops it (logged).
func (w *historyWriter) enqueue(rec record) {
	it, err := newItem(rec, false)
	if err != nil {
		w.b.log.Warn("history record dropped", zap.Error(err))
		return
	}
	select {
	case w.queue <- it:
	default:
		w.b.log.Warn("history queue full: record dropped", zap.String("type", string(rec.Type)),
			zap.String("job", rec.Job), zap.Int64("slot_ms", rec.Slot), zap.String("token", rec.Token.Short()))
	}
}

// write queues rec and waits until the broker confirmed it, or ctx ends.
func (w *historyWriter) write(ctx context.Context, rec record) error {
	it, err := newItem(rec, true)
	if err != nil {
		return err
	}
	it.ctx = ctx
	select {
	case w.queue <- it:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.exited:
		return ErrClosed
	}
	select {
	case err := <-it.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-w.exited:
		select {
		case err := <-it.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// stopAndDrain asks run to write what is queued and exit, and waits for it
// up to grace.
func (w *historyWriter) stopAndDrain(grace time.Duration) {
	w.stopOnce.Do(func() { close(w.stop) })
	t := w.b.clock.NewTimer(grace)
	defer t.Stop()
	select {
	case <-w.exited:
	case <-t.C():
	}
}

// run is the writer's goroutine.
func (w *historyWriter) run() {
	defer w.b.wg.Done()
	defer close(w.exited)
	defer w.dropChannel()
	for {
		var it *histItem
		select {
		case it = <-w.queue:
		case <-w.stop:
			select {
			case it = <-w.queue:
			default:
				return
			}
		}
		batch := []*histItem{it}
	collect:
		for len(batch) < historyBatch {
			select {
			case it := <-w.queue:
				batch = append(batch, it)
			default:
				break collect
			}
		}
		w.writeBatch(batch)
	}
}

// writeBatch publishes batch, retrying what failed with backoff (at once
// when the connection is restored) until it is confirmed or the Backend is
// closed.
func (w *historyWriter) writeBatch(batch []*histItem) {
	b := w.b
	backoff := reconnectMin
	for len(batch) > 0 {
		if b.ctx.Err() != nil {
			for _, it := range batch {
				it.signal(ErrClosed)
			}
			return
		}
		restored := b.restoredSignal()
		failed, err := w.publish(batch)
		if len(failed) == 0 {
			if w.failing {
				b.log.Info("history stream writes resumed", zap.String("queue", b.history))
				w.failing = false
			}
			return
		}
		if !w.failing {
			b.log.Warn("history stream write failed; retrying", zap.String("queue", b.history),
				zap.Int("records", len(failed)), zap.Error(err))
			w.failing = true
		}
		batch = failed
		t := b.clock.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-t.C():
			backoff = min(2*backoff, reconnectMax)
		case <-restored:
			backoff = reconnectMin
		case <-b.ctx.Done(): // fails the batch above
		}
		t.Stop()
	}
}

// dropChannel gives up the writer's channel (closed in the background,
// bounded: see abandon). Its pending confirms are then lost.
func (w *historyWriter) dropChannel() {
	if w.ch != nil {
		w.b.closeChannel(w.sess, w.ch, "close the history channel")
		w.ch = nil
	}
}

// errCallerLeft: a caller waiting for a record of the batch gave up.
var errCallerLeft = errors.New("a caller waiting for a record gave up")

// attempt returns the bound of one publish of batch: historyConfirmTimeout,
// or less when the ctx of a caller waiting for one of its records ends
// first (it will send its record again, which must not wait behind a
// channel whose replies are lost). Waiters already gone do not count. The
// second function stops watching a waiter: call it before signalling it
// (the caller may cancel its ctx once answered). The third releases the
// bound.
func (w *historyWriter) attempt(batch []*histItem) (context.Context, func(i int), func()) {
	b := w.b
	ctx, cancel := context.WithCancelCause(b.ctx)
	t := b.clock.NewTimer(historyConfirmTimeout)
	go func() {
		select {
		case <-t.C():
			cancel(fmt.Errorf("no answer within %v", historyConfirmTimeout))
		case <-ctx.Done():
		}
	}()
	stops := make([]func() bool, len(batch))
	for i, it := range batch {
		if it.ctx != nil && it.ctx.Err() == nil {
			stops[i] = context.AfterFunc(it.ctx, func() { cancel(errCallerLeft) })
		}
	}
	unwatch := func(i int) {
		if stops[i] != nil {
			stops[i]()
			stops[i] = nil
		}
	}
	return ctx, unwatch, func() {
		for i := range stops {
			unwatch(i)
		}
		t.Stop()
		cancel(context.Canceled)
	}
}

// publish publishes batch and waits for the confirms (bounded: see
// attempt). It signals the confirmed items and returns the others.
func (w *historyWriter) publish(batch []*histItem) ([]*histItem, error) {
	b := w.b
	s, err := b.connected()
	if err != nil {
		return batch, err
	}
	ctx, unwatch, release := w.attempt(batch)
	defer release()
	if err := w.ensureChannel(ctx, s); err != nil {
		return batch, err
	}
	dcs, err := w.publishEach(batch)
	confirmed, returned, cerr := w.awaitConfirms(ctx, batch, dcs, unwatch)
	if cerr != nil {
		err = cerr
	}
	var failed []*histItem
	for i, it := range batch {
		if !confirmed[i] {
			failed = append(failed, it)
		}
	}
	if len(returned) > 0 {
		err = w.redeclare(s)
	}
	if len(failed) > 0 && err == nil {
		err = errors.New("the broker refused the records (nack)")
	}
	return failed, err
}

// ensureChannel opens the writer's confirm channel on s, bounded by ctx,
// unless it already has a live one there: a channel of an older session,
// or one that closed, is dropped first.
func (w *historyWriter) ensureChannel(ctx context.Context, s *session) error {
	if w.sess == s && w.ch != nil && !w.ch.IsClosed() {
		return nil
	}
	w.dropChannel()
	ch, err := w.b.openChannel(ctx, s, true)
	if err != nil {
		return w.b.scrub(err)
	}
	w.sess, w.ch = s, ch
	w.returns = ch.NotifyReturn(make(chan amqp.Return, historyBatch))
	return nil
}

// publishEach publishes the records of batch in order, up to the first
// publish that fails, and returns the deferred confirms of those published
// and that failure.
func (w *historyWriter) publishEach(batch []*histItem) ([]*amqp.DeferredConfirmation, error) {
	b := w.b
	dcs := make([]*amqp.DeferredConfirmation, 0, len(batch))
	for _, it := range batch {
		dc, err := w.ch.PublishWithDeferredConfirm("", b.history, true, false, amqp.Publishing{
			ContentType:  "application/json",
			DeliveryMode: amqp.Persistent,
			MessageId:    it.id,
			Type:         string(it.rec.Type),
			AppId:        "anarchon",
			Body:         it.body,
		})
		if err != nil {
			return dcs, b.scrub(err)
		}
		dcs = append(dcs, dc)
	}
	return dcs, nil
}

// awaitConfirms waits, in order, for dcs, the confirms of the first
// records of batch, and signals each record the broker acked and did not
// return. When ctx ends first (see attempt) it drops the channel and
// returns why. It reports which records were confirmed, and the ids of
// those returned.
func (w *historyWriter) awaitConfirms(ctx context.Context, batch []*histItem, dcs []*amqp.DeferredConfirmation,
	unwatch func(i int)) (confirmed []bool, returned map[string]bool, err error) {
	// A return comes before the confirm of its message: drained after
	// each confirm, it is seen before that item is signalled.
	returned = map[string]bool{}
	confirmed = make([]bool, len(batch))
	for i, dc := range dcs {
		select {
		case <-dc.Done():
			w.drainReturns(returned)
			if dc.Acked() && !returned[batch[i].id] {
				confirmed[i] = true
				unwatch(i)
				batch[i].signal(nil)
			}
			continue
		case <-ctx.Done():
			if w.b.ctx.Err() != nil {
				err = ErrClosed
			} else {
				err = fmt.Errorf("%d of %d records not confirmed: %w (%w)", len(batch)-i, len(batch), errNoAnswer, context.Cause(ctx))
			}
		}
		// Drop the channel: its confirms are lost or late. The records
		// not confirmed are published again on a new one.
		w.dropChannel()
		break
	}
	w.drainReturns(returned)
	return confirmed, returned, err
}

// drainReturns adds to returned the ids of the messages the broker
// returned so far (basic.return), without waiting.
func (w *historyWriter) drainReturns(returned map[string]bool) {
	for {
		select {
		case r, ok := <-w.returns:
			if !ok { // closed with the channel
				return
			}
			returned[r.MessageId] = true
		default:
			return
		}
	}
}

// redeclare declares the history stream again on s, after the broker
// returned records: the stream is gone (deleted by hand). It returns the
// batch's error: the declare's, or, when it succeeded, the return's.
func (w *historyWriter) redeclare(s *session) error {
	b := w.b
	err := fmt.Errorf("history stream %q does not exist (basic.return)", b.history)
	dctx, cancel := b.withTimeout(b.ctx, historyConfirmTimeout)
	if derr := b.declareHistory(dctx, s); derr != nil {
		err = derr
	}
	cancel()
	return err
}

// Finish records the result of f's attempt in the history stream and waits
// for the broker's confirm. A claim-only store has no owner to fence
// against: every result is recorded, also for a run this Backend never
// claimed (the token is the evidence). Status interrupted (the daemon's
// shutdown stopped the command) is recorded without an exit code. When ctx
// ends first (the broker is unreachable), Finish returns ctx's error and
// the record stays queued: it is written once the connection is back, so a
// retried Finish may write it twice (status shows the run once).
func (b *Backend) Finish(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	if !fin.Status.Final() {
		return fmt.Errorf("finish %s: status %q is not a final status", f, fin.Status)
	}
	if f.Job == "" || f.Token == "" {
		return fmt.Errorf("finish %s: empty job or token", f)
	}
	instance := b.o.Instance
	if r := b.tokens.get(tokenKey{f.Job, f.Slot, f.Token}); r.state != tokenNone && r.instance != "" {
		instance = r.instance
	}
	attempt := f.Attempt
	if attempt <= 0 {
		attempt = 1
	}
	rec := record{
		Type: recordFinished, Job: f.Job, Slot: f.Slot, Attempt: attempt, Instance: instance,
		Token: f.Token, Status: fin.Status, StartedAt: fin.StartedAt, FinishedAt: fin.FinishedAt,
		OutputTail: fin.OutputTail,
	}
	if fin.Status != claim.StatusInterrupted {
		code := fin.ExitCode
		rec.ExitCode = &code
	}
	if _, err := b.current(); errors.Is(err, ErrClosed) {
		return fmt.Errorf("finish %s: %w", f, err)
	}
	if err := b.hist.write(ctx, rec); err != nil {
		return fmt.Errorf("finish %s: %w", f, err)
	}
	return nil
}

// ListRuns reads the history stream and returns recent runs in one of
// q.Statuses (every status when none), newest slot first (then by job), at
// most q.Limit (default 50). See the package comment for how it knows it
// has read to the end.
func (b *Backend) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	all, err := b.readHistory(ctx, q.Job)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs := all[:0]
	for _, r := range all {
		if q.Wants(r.Status) {
			runs = append(runs, r)
		}
	}
	slices.SortFunc(runs, func(x, y claim.Run) int {
		if c := cmp.Compare(y.Slot, x.Slot); c != 0 {
			return c
		}
		return cmp.Compare(x.Job, y.Job)
	})
	if len(runs) > limit {
		runs = runs[:limit]
	}
	return runs, nil
}

// readHistory writes a marker, then consumes the stream from now -
// HistoryMaxAge until the marker, joining the records of job (every job
// when empty) per run.
func (b *Backend) readHistory(ctx context.Context, job string) ([]claim.Run, error) {
	marker := string(claim.NewToken())
	if err := b.hist.write(ctx, record{Type: recordMarker, ID: marker}); err != nil {
		return nil, fmt.Errorf("write the end marker: %w", err)
	}
	deliveries, done, err := b.consumeHistory(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	j := historyJoin{job: job, runs: map[runKey]*claim.Run{}, finished: map[runKey]bool{}}
	for n := 1; ; n++ {
		var d amqp.Delivery
		var ok bool
		select {
		case d, ok = <-deliveries:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !ok {
			return nil, fmt.Errorf("consume %q: the channel closed before the end marker", b.history)
		}
		if _, ok := d.Headers["x-stream-offset"]; !ok {
			// Not a stream: never ack (that would delete), closing the
			// channel gives the message back.
			return nil, &queueConflict{msg: fmt.Sprintf(
				"queue %q is not a stream (its deliveries have no x-stream-offset): delete it or use another namespace", b.history)}
		}
		if n%(historyPrefetch/2) == 0 {
			if err := d.Ack(true); err != nil {
				return nil, fmt.Errorf("ack %q: %w", b.history, b.scrub(err))
			}
		}
		var rec record
		if err := json.Unmarshal(d.Body, &rec); err != nil {
			b.log.Debug("history: unreadable record skipped", zap.Error(err))
			continue
		}
		if rec.Type == recordMarker && rec.ID == marker {
			return j.list(), nil
		}
		j.add(rec)
	}
}

// consumeHistory starts a consumer of the history stream from now -
// HistoryMaxAge on a channel of its own; done closes the channel.
func (b *Backend) consumeHistory(ctx context.Context) (<-chan amqp.Delivery, func(), error) {
	s, err := b.current()
	if err != nil {
		return nil, nil, err
	}
	ch, err := b.openChannel(ctx, s, false)
	if err != nil {
		return nil, nil, fmt.Errorf("open a channel: %w", b.scrub(err))
	}
	done := func() { b.closeChannel(s, ch, "close the history reader's channel") }
	from := b.clock.Now().Add(-b.o.HistoryMaxAge)
	deliveries, err := call(ctx, b, s, ch, fmt.Sprintf("consume %q", b.history), func() (<-chan amqp.Delivery, error) {
		if err := ch.Qos(historyPrefetch, 0, false); err != nil {
			return nil, fmt.Errorf("set prefetch: %w", b.scrub(err))
		}
		d, err := ch.Consume(b.history, "", false, false, false, false, amqp.Table{"x-stream-offset": from})
		if err != nil {
			return nil, fmt.Errorf("consume %q: %w", b.history, b.scrub(err))
		}
		return d, nil
	}, nil)
	if err != nil {
		if !errors.Is(err, errNoAnswer) { // else call abandoned the channel
			done()
		}
		return nil, nil, err
	}
	return deliveries, done, nil
}

// runKey names a run.
type runKey struct {
	job  string
	slot int64
}

// historyJoin joins the history records of job (every job when empty)
// into one run per (job, slot).
type historyJoin struct {
	job      string
	runs     map[runKey]*claim.Run
	finished map[runKey]bool
}

// add files rec under its run. A record written twice (the writer
// publishes again what it got no confirm for; a Finish re-sent) replaces
// its first copy, and a claimed record never replaces a finished one,
// whatever their order. A run's records win over a note of its slot, and
// the first note of a slot over later ones, whatever their order.
func (j *historyJoin) add(rec record) {
	if rec.Job == "" || (j.job != "" && rec.Job != j.job) {
		return
	}
	k := runKey{rec.Job, rec.Slot}
	switch rec.Type {
	case recordClaimed:
		if !j.finished[k] {
			j.runs[k] = &claim.Run{Job: rec.Job, Slot: rec.Slot, Status: claim.StatusRunning,
				Attempt: max(rec.Attempt, 1), Instance: rec.Instance, Token: rec.Token, StartedAt: rec.StartedAt}
		}
	case recordFinished:
		j.finished[k] = true
		r := &claim.Run{Job: rec.Job, Slot: rec.Slot, Status: rec.Status, Attempt: max(rec.Attempt, 1),
			Instance: rec.Instance, Token: rec.Token, StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt,
			ExitCode: rec.ExitCode, OutputTail: rec.OutputTail}
		if c := j.runs[k]; c != nil && r.Instance == "" && c.Token == r.Token {
			r.Instance = c.Instance
		}
		j.runs[k] = r
	case recordNoted:
		if j.runs[k] == nil && rec.Status.Noted() {
			r := claim.Note{Job: rec.Job, Slot: rec.Slot, Status: rec.Status, Reason: rec.Reason,
				HeldBy: rec.HeldBy, Instance: rec.Instance, At: rec.FinishedAt}.Run()
			j.runs[k] = &r
		}
	}
}

// list returns the joined runs.
func (j *historyJoin) list() []claim.Run {
	out := make([]claim.Run, 0, len(j.runs))
	for _, r := range j.runs {
		out = append(out, *r)
	}
	return out
}
