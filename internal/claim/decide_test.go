package claim_test

import (
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// TestDecide is the decision table of docs/spec.md#s3-1, row by row, for
// every overlap policy: skip, replace and queue are decided alike (the
// store answers overlap where another run of the job is live), allow
// never looks at the other runs.
func TestDecide(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	slot := now.Add(-time.Second).UnixMilli()
	base := claim.Request{Job: "j", Slot: slot, Token: "me", Instance: "i1",
		MaxLate: time.Minute, Lease: 30 * time.Second, MaxAttempts: 2}
	running := func(tok claim.Token, attempt int, leaseUntil time.Time) *claim.Run {
		return &claim.Run{Job: "j", Slot: slot, Status: claim.StatusRunning, Attempt: attempt,
			Instance: "i2", Token: tok, StartedAt: now.Add(-time.Minute), LeaseUntil: leaseUntil}
	}
	finished := func(s claim.Status) *claim.Run {
		r := running("other", 1, now.Add(-time.Minute))
		r.Status, r.FinishedAt = s, now.Add(-time.Second)
		return r
	}
	// want is a decision: the outcome, the attempt and the status written
	// ("" for no write).
	type want struct {
		out     claim.Outcome
		attempt int
		write   claim.Status
	}
	type row struct {
		name      string
		cur       *claim.Run
		otherLive bool
		late      bool
		exclusive want // skip, replace, queue
		allow     want
	}
	won1 := want{claim.Won, 1, claim.StatusRunning}
	rows := []row{
		{name: "fresh", exclusive: won1, allow: won1},
		{name: "fresh, another live", otherLive: true, exclusive: want{out: claim.Overlap}, allow: won1},
		{name: "fresh, late", late: true, exclusive: want{out: claim.Late}, allow: want{out: claim.Late}},
		{name: "fresh, late, another live", late: true, otherLive: true, exclusive: want{out: claim.Late}, allow: want{out: claim.Late}},
		{name: "my own, re-sent", cur: running("me", 1, now.Add(time.Second)),
			exclusive: want{claim.Won, 1, ""}, allow: want{claim.Won, 1, ""}},
		{name: "held", cur: running("other", 1, now), exclusive: want{claim.Running, 1, ""}, allow: want{claim.Running, 1, ""}},
		{name: "finished", cur: finished(claim.StatusSucceeded), exclusive: want{out: claim.Done}, allow: want{out: claim.Done}},
		{name: "replaced", cur: finished(claim.StatusReplaced), exclusive: want{out: claim.Done}, allow: want{out: claim.Done}},
		{name: "expired: takeover", cur: running("other", 1, now.Add(-time.Millisecond)),
			exclusive: want{claim.Won, 2, claim.StatusRunning}, allow: want{claim.Won, 2, claim.StatusRunning}},
		{name: "expired, another live", cur: running("other", 1, now.Add(-time.Millisecond)), otherLive: true,
			exclusive: want{claim.Done, 1, claim.StatusInterrupted}, allow: want{claim.Won, 2, claim.StatusRunning}},
		{name: "expired, attempts spent", cur: running("other", 2, now.Add(-time.Millisecond)),
			exclusive: want{claim.Done, 2, claim.StatusInterrupted}, allow: want{claim.Done, 2, claim.StatusInterrupted}},
	}
	for _, pol := range []claim.OverlapPolicy{claim.OverlapSkip, claim.OverlapReplace, claim.OverlapQueue, claim.OverlapAllow} {
		for _, r := range rows {
			t.Run(string(pol)+"/"+r.name, func(t *testing.T) {
				req := base
				req.Overlap = pol
				if r.late {
					req.Slot = now.Add(-req.MaxLate - time.Millisecond).UnixMilli()
				}
				w := r.allow
				if pol.Exclusive() {
					w = r.exclusive
				}
				d := claim.Decide(r.cur, r.otherLive, now, req)
				got := want{out: d.Result.Outcome, attempt: d.Result.Attempt}
				if d.Write != nil {
					got.write = d.Write.Status
				}
				if got != w {
					t.Fatalf("decided %+v, want %+v", got, w)
				}
			})
		}
	}
}

// TestOverlapExclusive: which policies keep two runs of a job apart.
func TestOverlapExclusive(t *testing.T) {
	for p, want := range map[claim.OverlapPolicy]bool{
		claim.OverlapSkip: true, claim.OverlapReplace: true, claim.OverlapQueue: true,
		claim.OverlapAllow: false, "": false,
	} {
		if got := p.Exclusive(); got != want {
			t.Errorf("%q.Exclusive() = %v, want %v", p, got, want)
		}
	}
}
