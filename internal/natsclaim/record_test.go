package natsclaim_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/anarchon/anarchon/internal/claim"
)

// noteOf is a note of r's slot by another instance.
func noteOf(r claim.Request, st claim.Status, reason string) claim.Note {
	return claim.Note{Job: r.Job, Slot: r.Slot, Status: st, Reason: reason,
		Instance: "n-" + claim.NewToken().Short(), At: time.Now()}
}

// TestNoteIsTheSlotsClaimMessage: a note is stored as the run's claim
// would be (its subject and de-duplication id, no token), a claim after it
// on another backend is lost naming nobody, and status lists it finished
// at the time the stream stored it. A claim's body carries no note field.
func TestNoteIsTheSlotsClaimMessage(t *testing.T) {
	p := newPlace(t)
	b1, b2 := open(t, p.options()), open(t, p.options())
	ctx := t.Context()
	r := req("noted")
	n := noteOf(r, claim.StatusSkipped, "overlap")
	n.HeldBy = r.Slot - 60_000
	if ok, err := b1.Record(ctx, n); err != nil || !ok {
		t.Fatalf("Record of a slot nobody claimed: %v %v, want true", ok, err)
	}
	res, err := b2.Claim(ctx, r)
	if err != nil || res.Outcome != claim.Lost || res.Holder != "" {
		t.Fatalf("a claim after the note: %+v %v, want lost naming nobody", res, err)
	}
	s, err := rawJS(t, p.url).Stream(ctx, p.stream)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := s.CachedInfo().State.Msgs; msgs != 1 {
		t.Fatalf("the note alone is stored: want 1 message, got %d", msgs)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	id := p.ns + ":" + r.Job + ":" + strconv.FormatInt(r.Slot, 10)
	if m.Subject != p.ns+"."+r.Job+".claims" || m.Header.Get(jetstream.MsgIDHeader) != id {
		t.Fatalf("the note: subject %s id %s; want %s.%s.claims id %s", m.Subject, m.Header.Get(jetstream.MsgIDHeader), p.ns, r.Job, id)
	}
	var body map[string]any
	if err := json.Unmarshal(m.Data, &body); err != nil || body["token"] != "" || body["status"] != "skipped" || body["reason"] != "overlap" {
		t.Fatalf("the note's body: %s (%v)", m.Data, err)
	}
	runs, err := b2.ListRuns(ctx, claim.ListQuery{Job: r.Job})
	if err != nil {
		t.Fatal(err)
	}
	want := n.Run()
	want.FinishedAt = m.Time.UTC()
	if len(runs) != 1 || !runs[0].FinishedAt.Equal(want.FinishedAt) || runs[0].HeldBy != n.HeldBy ||
		runs[0].Instance != n.Instance || runs[0].Attempt != 0 || runs[0].Token != "" {
		t.Fatalf("status: want %+v, got %+v", want, runs)
	}

	c := req("claimed")
	mustClaim(t, b1, c, claim.Won, "a claim")
	last, err := s.GetLastMsgForSubject(ctx, p.ns+"."+c.Job+".claims")
	if err != nil {
		t.Fatal(err)
	}
	body = nil
	if err := json.Unmarshal(last.Data, &body); err != nil || len(body) != 4 {
		t.Fatalf("a claim's body has its four fields only: %s (%v)", last.Data, err)
	}
}

// TestRunWinsOverNote: a note stored beside a claim of its slot (recorded
// after the duplicate window forgot the claim) is not listed: the run is.
func TestRunWinsOverNote(t *testing.T) {
	p := newPlace(t)
	b := open(t, p.options())
	ctx := t.Context()
	r := req("both")
	mustClaim(t, b, r, claim.Won, "the claim")
	if err := b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded, StartedAt: r.SlotTime(), FinishedAt: r.SlotTime()}); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"token": "", "instance": "late", "job": r.Job, "slot": r.Slot,
		"status": "missed", "reason": "all_down"})
	msg := &nats.Msg{Subject: p.ns + "." + r.Job + ".claims", Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, "forgotten-window-"+claim.NewToken().Short())
	if _, err := rawJS(t, p.url).PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	runs, err := b.ListRuns(ctx, claim.ListQuery{Job: r.Job})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != claim.StatusSucceeded || runs[0].Token != r.Token {
		t.Fatalf("the run wins over a note of its slot: got %+v", runs)
	}
	runs, err = b.ListRuns(ctx, claim.ListQuery{Job: r.Job, Statuses: claim.NoteStatuses})
	if err != nil || len(runs) != 0 {
		t.Fatalf("no note is listed for a slot that ran: %+v %v", runs, err)
	}
}

// TestListSelectsNotesBehindRuns: status of the notes only widens its read
// past many newer runs until it has its limit of notes.
func TestListSelectsNotesBehindRuns(t *testing.T) {
	p := newPlace(t)
	b := open(t, p.options())
	ctx := t.Context()
	base := time.Now().Truncate(time.Second).Add(-30 * time.Minute)
	at := func(i int) claim.Request {
		r := req("mixed")
		r.Slot, r.Now, r.MaxLate = base.Add(time.Duration(i)*time.Second).UnixMilli(), time.Now(), time.Hour
		return r
	}
	for i := range 3 {
		if ok, err := b.Record(ctx, noteOf(at(i), claim.StatusMissed, "late")); err != nil || !ok {
			t.Fatalf("note %d: %v %v", i, ok, err)
		}
	}
	for i := 10; i < 310; i++ {
		r := at(i)
		mustClaim(t, b, r, claim.Won, "claim")
		if err := b.Finish(ctx, r.Fence(1), claim.Finish{Status: claim.StatusSucceeded, StartedAt: r.SlotTime(), FinishedAt: r.SlotTime()}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := b.ListRuns(ctx, claim.ListQuery{Limit: 2, Statuses: []claim.Status{claim.StatusMissed}})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Slot != at(2).Slot || runs[1].Slot != at(1).Slot {
		t.Fatalf("status of missed slots, limit 2: want the 2 newest notes behind 600 messages, got %+v", runs)
	}
	runs, err = b.ListRuns(ctx, claim.ListQuery{Limit: 5, Statuses: claim.RunStatuses})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 5 || runs[0].Slot != at(309).Slot || runs[4].Slot != at(305).Slot {
		t.Fatalf("status of runs, limit 5: want the 5 newest runs, got %+v", runs)
	}
}
