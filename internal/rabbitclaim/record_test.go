package rabbitclaim_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/faultproxy"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
)

// flushing is a second instance of the Record cases' races. A won claim's
// "claimed" record is written in the background by the instance that won
// (no latency on the claim); status on another instance lists the run once
// that write lands, a few milliseconds later. The races list the runs the
// moment their claims are answered, so this instance waits for its own
// history writes after a win. The decision itself is untouched.
type flushing struct{ *rabbitclaim.Backend }

func (f flushing) Claim(ctx context.Context, r claim.Request) (claim.Result, error) {
	res, err := f.Backend.Claim(ctx, r)
	if err == nil && res.Outcome == claim.Won {
		if ferr := f.FlushHistory(ctx); ferr != nil {
			return res, ferr
		}
	}
	return res, err
}

// noteOf is a note of r's slot by another instance.
func noteOf(r claim.Request, st claim.Status, reason string) claim.Note {
	return claim.Note{Job: r.Job, Slot: r.Slot, Status: st, Reason: reason,
		Instance: "note-" + claim.NewToken().Short(), At: time.Now()}
}

func mustRecord(t *testing.T, b *rabbitclaim.Backend, n claim.Note, want bool, what string) {
	t.Helper()
	got, err := b.Record(t.Context(), n)
	if err != nil || got != want {
		t.Fatalf("%s: Record = %v, %v; want %v", what, got, err, want)
	}
}

func mustList(t *testing.T, b *rabbitclaim.Backend, q claim.ListQuery) []claim.Run {
	t.Helper()
	runs, err := b.ListRuns(t.Context(), q)
	if err != nil {
		t.Fatalf("ListRuns(%+v): %v", q, err)
	}
	return runs
}

// TestNoteHoldsTheGate: a note is the one message of its run's gate, a
// claim on another instance then loses, and status lists the note finished
// at the recording instance's time.
func TestNoteHoldsTheGate(t *testing.T) {
	u := brokerURL(t)
	n := newNS(t, u)
	a, b := n.open(t), n.open(t)
	r := request("noted", time.Now().Add(-time.Second))
	note := noteOf(r, claim.StatusSkipped, "overlap")
	note.HeldBy = r.Slot - 60_000
	mustRecord(t, a, note, true, "a note of a slot nobody claimed")
	q, err := inspect(t, u, rabbitclaim.GateQueue(n.name, r.Job, r.Slot))
	if err != nil || q.Messages != 1 || q.Consumers != 0 {
		t.Fatalf("the gate holds the note alone: %+v, %v", q, err)
	}
	wantOutcome(t, mustClaim(t, b, r), claim.Lost, "a claim of a noted slot on another instance")
	runs := mustList(t, b, claim.ListQuery{Job: r.Job})
	if len(runs) != 1 {
		t.Fatalf("status lists the note alone: %+v", runs)
	}
	g := runs[0]
	if g.Status != claim.StatusSkipped || g.Reason != "overlap" || g.HeldBy != note.HeldBy || g.Instance != note.Instance ||
		!g.FinishedAt.Equal(note.At) || g.Attempt != 0 || g.Token != "" || !g.StartedAt.IsZero() {
		t.Fatalf("the listed note: want %+v, got %+v", note.Run(), g)
	}
}

// TestRunWinsOverNote: a note recorded after the gate of a claimed slot
// expired (here: deleted) takes the new gate, but status lists the run;
// and of two notes of a slot, the first.
func TestRunWinsOverNote(t *testing.T) {
	u := brokerURL(t)
	n := newNS(t, u)
	a, b := n.open(t), n.open(t)
	ch := adminChannel(t, u)
	drop := func(r claim.Request) {
		t.Helper()
		if _, err := ch.QueueDelete(rabbitclaim.GateQueue(n.name, r.Job, r.Slot), false, false, false); err != nil {
			t.Fatal(err)
		}
	}
	ran := request("both", time.Now().Add(-time.Minute))
	wantOutcome(t, mustClaim(t, a, ran), claim.Won, "the claim")
	fin := claim.Finish{Status: claim.StatusSucceeded, StartedAt: ran.SlotTime(), FinishedAt: ran.SlotTime().Add(time.Second)}
	if err := a.Finish(t.Context(), ran.Fence(1), fin); err != nil {
		t.Fatal(err)
	}
	drop(ran)
	mustRecord(t, b, noteOf(ran, claim.StatusMissed, "all_down"), true, "a note after the gate of a run expired")
	noted := ran
	noted.Slot -= 1000
	first := noteOf(noted, claim.StatusMissed, "catch_up")
	mustRecord(t, b, first, true, "the first note")
	drop(noted)
	mustRecord(t, a, noteOf(noted, claim.StatusUnknown, "no_decision"), true, "a note after the gate of a note expired")

	runs := mustList(t, a, claim.ListQuery{Job: ran.Job})
	if len(runs) != 2 || runs[0].Slot != ran.Slot || runs[0].Status != claim.StatusSucceeded || runs[0].Token != ran.Token ||
		runs[1].Slot != noted.Slot || runs[1].Reason != "catch_up" || runs[1].Instance != first.Instance {
		t.Fatalf("the run, then the first note: got %+v", runs)
	}
	runs = mustList(t, a, claim.ListQuery{Job: ran.Job, Statuses: claim.NoteStatuses})
	if len(runs) != 1 || runs[0].Slot != noted.Slot {
		t.Fatalf("notes only: the slot that ran has none: got %+v", runs)
	}
}

// TestNoteOfAnUnansweredClaim: a claim whose confirm was lost answers
// unknown, and its copy holds the gate. The instance's note of the slot is
// refused by the gate, but its history record is written: status shows
// the slot unknown, since nobody runs it.
func TestNoteOfAnUnansweredClaim(t *testing.T) {
	u := brokerURL(t)
	pu, _ := url.Parse(u)
	p, err := faultproxy.Start("127.0.0.1:0", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() }) // after the Backends' Close
	n := newNS(t, u)
	b := n.open(t, func(o *rabbitclaim.Options) { o.URL = withHost(t, u, p.Addr()) })
	r := request("unanswered", time.Now())
	queue := rabbitclaim.GateQueue(n.name, r.Job, r.Slot)
	var once atomic.Bool
	rabbitclaim.SetHooks(b, n.declared, func(q string) {
		if q == queue && once.CompareAndSwap(false, true) {
			p.SetMode(faultproxy.Blackhole)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	res, err := b.Claim(ctx, r)
	cancel()
	if err != nil || res.Outcome != claim.Unknown {
		t.Fatalf("a claim whose confirm was lost: want unknown, got %+v %v", res, err)
	}
	endBlackhole(p)
	note := noteOf(r, claim.StatusUnknown, "no_decision")
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := b.Record(t.Context(), note)
		if err == nil {
			if ok {
				t.Fatal("the gate holds the claim: the note must not take it")
			}
			break
		}
		if !rabbitclaim.IsTransient(err) || time.Now().After(deadline) {
			t.Fatalf("note after the reconnection: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	runs := mustList(t, n.open(t), claim.ListQuery{Job: r.Job})
	if len(runs) != 1 || runs[0].Status != claim.StatusUnknown || runs[0].Instance != note.Instance {
		t.Fatalf("status shows the slot unknown: got %+v", runs)
	}
}
