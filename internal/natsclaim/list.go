package natsclaim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// ListRuns tuning: the first read covers the last limit*listSpanPerRun
// messages; each further read covers listSpanGrowth times more, older ones.
const (
	listSpanPerRun = 4 // a run is one claim and one result, with room for other jobs
	listSpanGrowth = 4
	listBatch      = 256 // messages per fetch
	// listConsumerIdle is how long the server keeps a status consumer that
	// its reader abandoned (the reader deletes it when done).
	listConsumerIdle = 30 * time.Second
	// consumerTries and consumerWait bound the creation of a status
	// consumer. On a cluster the server places it on one of the stream's
	// servers, and after a server is killed it still places about one in
	// three there for minutes (NATS 2.9): that creation is never answered,
	// and another is placed afresh.
	consumerTries = 8
	consumerWait  = 2 * time.Second
)

// runKey names a run.
type runKey struct {
	job  string
	slot int64
}

// joined is what the stream holds of one run: its claim and results, or
// the note of its slot.
type joined struct {
	claim   *claimRecord
	claimed time.Time // when the stream stored the claim
	results []resultRecord
	note    *claimRecord
	noted   time.Time // when the stream stored the note
}

// ListRuns returns recent runs in one of q.Statuses (every status when
// none), newest slot first (then by job), at most q.Limit (default 50). It
// reads the stream backwards in growing spans of sequences, each read with
// a short-lived consumer filtered to the namespace (or to q.Job's
// subjects), until it has q.Limit selected runs or has read the whole
// stream: status sees as far back as the stream keeps messages. A claim
// without a result is a running run. A note is listed as a finished run
// with no attempt, finished when the stream stored it; a claim or result
// of the same slot wins over it.
func (b *Backend) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	runs, err := b.listRuns(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list runs of stream %s: %w", b.name, err)
	}
	return runs, nil
}

func (b *Backend) listRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	filter := b.ns + ".>"
	if q.Job != "" {
		if !validToken(q.Job) {
			return nil, fmt.Errorf("job name %q is not a valid subject token", q.Job)
		}
		filter = b.ns + "." + q.Job + ".*"
	}
	info, err := b.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	st := info.State
	if st.Msgs == 0 || st.LastSeq < st.FirstSeq {
		return nil, nil
	}
	found := map[runKey]*joined{}
	end := st.LastSeq + 1 // exclusive
	span := satMul(uint64(limit), listSpanPerRun)
	for {
		start := st.FirstSeq
		if end-st.FirstSeq > span {
			start = end - span
		}
		if err := b.scan(ctx, filter, start, end, found); err != nil {
			return nil, err
		}
		if selected(found, q) >= limit || start <= st.FirstSeq {
			break
		}
		end = start
		span = satMul(span, listSpanGrowth)
	}
	out := make([]claim.Run, 0, len(found))
	for k, j := range found {
		if r := j.run(k); q.Wants(r.Status) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b claim.Run) int {
		return cmp.Or(cmp.Compare(b.Slot, a.Slot), cmp.Compare(a.Job, b.Job))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// selected counts the runs of found that q selects by status.
func selected(found map[runKey]*joined, q claim.ListQuery) int {
	if len(q.Statuses) == 0 {
		return len(found)
	}
	n := 0
	for k, j := range found {
		if q.Wants(j.run(k).Status) {
			n++
		}
	}
	return n
}

// scan reads the messages of sequences [start, end) on filter into found.
func (b *Backend) scan(ctx context.Context, filter string, start, end uint64, found map[runKey]*joined) error {
	cons, name, err := b.readingConsumer(ctx, filter, start)
	if err != nil {
		return fmt.Errorf("create a reading consumer: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
		defer cancel()
		if err := b.stream.DeleteConsumer(dctx, name); err != nil {
			b.log.Debug("deleting the status consumer failed; the server drops it when idle",
				zap.String("consumer", name), zap.Error(err))
		}
	}()
	pending := cons.CachedInfo().NumPending
	for pending > 0 {
		n, done, err := b.fetch(ctx, cons, int(min(pending, listBatch)), end, found, &pending)
		if err != nil {
			return err
		}
		if done || n == 0 {
			break
		}
	}
	return nil
}

// readingConsumer creates a short-lived consumer of filter from sequence
// start, creating another when one is not answered within consumerWait
// (see consumerTries).
func (b *Backend) readingConsumer(ctx context.Context, filter string, start uint64) (jetstream.Consumer, string, error) {
	for try := 1; ; try++ {
		name := "anarchon-status-" + string(claim.NewToken())[:16]
		cctx, cancel := context.WithTimeout(ctx, min(b.timeout, consumerWait))
		cons, err := b.stream.CreateConsumer(cctx, jetstream.ConsumerConfig{
			Name:              name,
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       start,
			AckPolicy:         jetstream.AckNonePolicy,
			FilterSubject:     filter,
			MemoryStorage:     true,
			Replicas:          1,
			InactiveThreshold: listConsumerIdle,
		})
		cancel()
		if err == nil || try == consumerTries || ctx.Err() != nil || !isTimeout(err) {
			return cons, name, err
		}
		b.log.Info("a status consumer was not created in time (placed on a server that is down?); creating another",
			zap.String("consumer", name), zap.Int("try", try))
	}
}

// fetch reads one batch; it reports how many messages came and whether
// one at or after end did (the span is read).
func (b *Backend) fetch(ctx context.Context, cons jetstream.Consumer, batch int, end uint64,
	found map[runKey]*joined, pending *uint64) (n int, done bool, err error) {
	fctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	mb, err := cons.Fetch(batch, jetstream.FetchContext(fctx))
	if err != nil {
		return 0, false, fmt.Errorf("fetch: %w", err)
	}
	for m := range mb.Messages() {
		n++
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		*pending = md.NumPending
		if md.Sequence.Stream >= end {
			done = true
			continue
		}
		add(found, m.Subject(), m.Data(), md.Timestamp)
	}
	if err := mb.Error(); err != nil {
		return n, done, fmt.Errorf("fetch: %w", err)
	}
	return n, done, nil
}

// add files one message under its run; anything that is not a claim, a
// note or a result of this backend is skipped.
func add(found map[runKey]*joined, subject string, data []byte, stored time.Time) {
	get := func(job string, slot int64) *joined {
		k := runKey{job, slot}
		j := found[k]
		if j == nil {
			j = &joined{}
			found[k] = j
		}
		return j
	}
	switch {
	case strings.HasSuffix(subject, ".claims"):
		var rec claimRecord
		if json.Unmarshal(data, &rec) != nil {
			return
		}
		if rec.isNote() {
			if j := get(rec.Job, rec.Slot); j.note == nil {
				j.note, j.noted = &rec, stored.UTC()
			}
			return
		}
		if rec.Job == "" || rec.Token == "" {
			return
		}
		if j := get(rec.Job, rec.Slot); j.claim == nil {
			j.claim, j.claimed = &rec, stored.UTC()
		}
	case strings.HasSuffix(subject, ".results"):
		var rec resultRecord
		if json.Unmarshal(data, &rec) != nil || rec.Job == "" || !rec.Status.Final() {
			return
		}
		j := get(rec.Job, rec.Slot)
		j.results = append(j.results, rec)
	}
}

// run joins what the stream holds of one run: the claim names the owner;
// the owner's result (or, without a claim, the first result) its end. A
// note is the run only when the stream holds no claim or result of it.
func (j *joined) run(k runKey) claim.Run {
	if j.note != nil && j.claim == nil && len(j.results) == 0 {
		n := j.note
		return claim.Note{Job: k.job, Slot: k.slot, Status: n.Status, Reason: n.Reason,
			HeldBy: n.HeldBy, Instance: n.Instance, At: j.noted}.Run()
	}
	r := claim.Run{Job: k.job, Slot: k.slot, Status: claim.StatusRunning, Attempt: 1}
	if j.claim != nil {
		r.Instance, r.Token, r.StartedAt = j.claim.Instance, j.claim.Token, claim.StartOf(j.claimed, k.slot)
	}
	var res *resultRecord
	for i := range j.results {
		if j.claim == nil || j.results[i].Token == j.claim.Token {
			res = &j.results[i]
			break
		}
	}
	if res == nil && len(j.results) > 0 {
		res = &j.results[0] // a result whose claim the stream no longer holds under that token
	}
	if res == nil {
		return r
	}
	if res.Instance != "" || r.Token != res.Token {
		r.Instance = res.Instance
	}
	r.Token, r.Status, r.Attempt = res.Token, res.Status, max(res.Attempt, 1)
	if !res.StartedAt.IsZero() {
		r.StartedAt = res.StartedAt
	}
	r.FinishedAt, r.ExitCode, r.OutputTail = res.FinishedAt, res.ExitCode, res.OutputTail
	return r
}

// satMul is a*b, or the largest uint64 where that overflows.
func satMul(a, b uint64) uint64 {
	if b != 0 && a > math.MaxUint64/b {
		return math.MaxUint64
	}
	return a * b
}
