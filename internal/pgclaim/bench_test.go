package pgclaim

// Benchmarks of the claim: the PL/pgSQL function (one round trip) against
// the same decision as a multi-statement transaction driven from Go
// (BEGIN; upsert the job's row; SELECT ... FOR UPDATE the run; read store
// now and the overlap question; claim.Decide; write the run; append
// history; COMMIT). The multi-statement path lives here only, as the
// measured alternative.
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/pgclaim/
//
// Each reports ns/op plus the p50 and p99 latency of one claim in µs.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/sqlclaim"
)

// SQL of the multi-statement claim.
const (
	multiUpsertJobSQL = `INSERT INTO {{jobs}} AS j (job) VALUES ($1)
		ON CONFLICT (job) DO UPDATE SET job = excluded.job`
	multiSelectForUpdateSQL = `SELECT ` + runColumns + ` FROM {{runs}} AS r
		WHERE r.job = $1 AND r.slot = $2 FOR UPDATE`
	multiNowOverlapSQL = `WITH c AS (SELECT {{now}} AS now_ms)
		SELECT c.now_ms, EXISTS (SELECT 1 FROM {{runs}} AS o WHERE o.job = $1 AND o.status = 'running'
			AND o.lease_until >= c.now_ms AND o.slot <> $2) FROM c`
	multiUpsertRunSQL = `INSERT INTO {{runs}} (job, slot, status, attempt, instance, token,
		started_at, finished_at, lease_until, exit_code, output_tail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (job, slot) DO UPDATE SET
		status = excluded.status, attempt = excluded.attempt,
		instance = excluded.instance, token = excluded.token,
		started_at = excluded.started_at, finished_at = excluded.finished_at,
		lease_until = excluded.lease_until, exit_code = excluded.exit_code,
		output_tail = excluded.output_tail`
	multiInsertHistorySQL = `INSERT INTO {{history}} (job, slot, attempt, token, instance, event, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`
)

// claimMulti is Claim with the multi-statement transaction in place of the
// function: the same cheap read first.
func (b *Backend) claimMulti(ctx context.Context, req claim.Request) (claim.Result, error) {
	cur, now, err := b.readRun(ctx, req.Job, req.Slot)
	if err != nil {
		return claim.Result{}, err
	}
	if !claim.Contested(cur, now, req.Token) {
		return claim.Decide(cur, false, now, req).Result, nil
	}
	return b.claimTx(ctx, req)
}

// claimTx is the decision as a multi-statement transaction.
func (b *Backend) claimTx(ctx context.Context, req claim.Request) (claim.Result, error) {
	n := b.names
	var res claim.Result
	err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, n.expand(multiUpsertJobSQL), req.Job); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, n.expand(multiSelectForUpdateSQL), req.Job, req.Slot)
		run, err := pgx.CollectExactlyOneRow(rows, rowTo(sqlclaim.ScanRun))
		var cur *claim.Run
		switch {
		case err == nil:
			cur = &run
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		var nowMs int64
		var otherLive bool
		if err := tx.QueryRow(ctx, n.expand(multiNowOverlapSQL), req.Job, req.Slot).Scan(&nowMs, &otherLive); err != nil {
			return err
		}
		d := claim.Decide(cur, otherLive, fromMs(nowMs), req)
		res = d.Result
		if d.Write == nil {
			return nil
		}
		w := d.Write
		var finished *int64
		if !w.FinishedAt.IsZero() {
			v := w.FinishedAt.UnixMilli()
			finished = &v
		}
		if _, err := tx.Exec(ctx, n.expand(multiUpsertRunSQL), w.Job, w.Slot, string(w.Status), w.Attempt,
			w.Instance, string(w.Token), w.StartedAt.UnixMilli(), finished, w.LeaseUntil.UnixMilli(),
			w.ExitCode, w.OutputTail); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, n.expand(multiInsertHistorySQL), w.Job, w.Slot, w.Attempt,
			string(w.Token), w.Instance, string(d.Event), nowMs)
		return err
	})
	return res, err
}

// claimFunc is one way to claim, as benchmarked.
type claimFunc func(b *Backend, ctx context.Context, req claim.Request) (claim.Result, error)

var (
	viaClaim     claimFunc = (*Backend).Claim       // cheap read + function
	viaMulti     claimFunc = (*Backend).claimMulti  // cheap read + multi-statement transaction
	viaFunction  claimFunc = (*Backend).claimLocked // the function alone
	viaMultiOnly claimFunc = (*Backend).claimTx     // the transaction alone
)

// latencies collects the durations of single claims.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d ...time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// report adds the p50 and p99 latencies, in µs, to b's results.
func (l *latencies) report(b *testing.B) { claimtest.ReportLatency(b, l.d) }

// benchRequest is a claim of job@slot that wins when nobody holds it.
func benchRequest(job string, slot int64, tok claim.Token, inst string) claim.Request {
	return claim.Request{Job: job, Slot: slot, Token: tok, Instance: inst, MaxLate: time.Hour,
		Lease: time.Minute, MaxAttempts: 3, Overlap: claim.OverlapAllow}
}

// benchUncontended claims b.N fresh slots of one job, one at a time; every
// claim must be won(1).
func benchUncontended(b *testing.B, claimOf claimFunc) {
	be := open(b, newSchema(b)+".runs")
	ctx := context.Background()
	base := time.Now().Add(-time.Minute).UnixMilli()
	// Warm the connection's statement cache: measure round trips, not the
	// first Parse of each statement.
	if _, err := claimOf(be, ctx, benchRequest("warm", base, claim.NewToken(), "w")); err != nil {
		b.Fatal(err)
	}
	var l latencies
	l.d = make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		r := benchRequest("bench", base+int64(i), claim.NewToken(), "i")
		t0 := time.Now()
		res, err := claimOf(be, ctx, r)
		l.d = append(l.d, time.Since(t0))
		if err != nil || res.Outcome != claim.Won {
			b.Fatalf("claim %d: want won, got %+v %v", i, res, err)
		}
	}
	b.StopTimer()
	l.report(b)
}

// benchContended has 8 goroutines, each with its own token and its own
// pool (8 instances), claim the same b.N slots of one job in the same
// order; every slot must have exactly one winner. ns/op is per slot; the
// percentiles are per claim.
func benchContended(b *testing.B, claimOf claimFunc) {
	const racers = 8
	table := newSchema(b) + ".runs"
	ctx := context.Background()
	base := time.Now().Add(-time.Minute).UnixMilli()
	bes := make([]*Backend, racers)
	for g := range bes {
		bes[g] = open(b, table)
		if _, err := claimOf(bes[g], ctx, benchRequest(fmt.Sprint("warm", g), base, claim.NewToken(), "w")); err != nil {
			b.Fatal(err)
		}
	}
	var l latencies
	wins := make([][]bool, racers)
	errs := make([]error, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range racers {
		wins[g] = make([]bool, b.N)
		wg.Go(func() {
			tok, inst := claim.NewToken(), fmt.Sprint("racer-", g)
			own := make([]time.Duration, 0, b.N)
			<-start
			for i := range b.N {
				t0 := time.Now()
				res, err := claimOf(bes[g], ctx, benchRequest("bench", base+int64(i), tok, inst))
				own = append(own, time.Since(t0))
				if err != nil {
					errs[g] = err
					return
				}
				wins[g][i] = res.Outcome == claim.Won
			}
			l.add(own...)
		})
	}
	b.ResetTimer()
	close(start)
	wg.Wait()
	b.StopTimer()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		n := 0
		for g := range racers {
			if wins[g][i] {
				n++
			}
		}
		if n != 1 {
			b.Fatalf("slot %d: %d winners, want 1", i, n)
		}
	}
	l.report(b)
}

// BenchmarkClaimUncontended: Claim (the cheap read, then the function) of
// a fresh slot.
func BenchmarkClaimUncontended(b *testing.B) { benchUncontended(b, viaClaim) }

// BenchmarkClaimMultiStatement: the same with a multi-statement transaction
// in place of the function.
func BenchmarkClaimMultiStatement(b *testing.B) { benchUncontended(b, viaMulti) }

// BenchmarkClaimFunctionOnly: the function alone, no cheap read.
func BenchmarkClaimFunctionOnly(b *testing.B) { benchUncontended(b, viaFunction) }

// BenchmarkClaimMultiStatementOnly: the multi-statement transaction alone.
func BenchmarkClaimMultiStatementOnly(b *testing.B) { benchUncontended(b, viaMultiOnly) }

// BenchmarkClaimContended8: 8 instances race Claim on the same slots.
func BenchmarkClaimContended8(b *testing.B) { benchContended(b, viaClaim) }

// BenchmarkClaimContended8MultiStatement: the same race with the
// multi-statement transaction in place of the function.
func BenchmarkClaimContended8MultiStatement(b *testing.B) { benchContended(b, viaMulti) }
