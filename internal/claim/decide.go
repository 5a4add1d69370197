package claim

import (
	"errors"
	"fmt"
	"time"
)

// Event names what a decision appends to a run's history.
type Event string

// History events.
const (
	EventClaimed     Event = "claimed"
	EventTakeover    Event = "takeover"
	EventInterrupted Event = "interrupted"
	EventFinished    Event = "finished"
	EventReleased    Event = "released"
)

// Decision is the lease decision table's answer (docs/spec.md#s3-1) and the
// write it asks for.
type Decision struct {
	Result Result
	// Write, when not nil, is the run's new state to store.
	Write *Run
	// Event is the history entry to append with Write.
	Event Event
}

// Decide is the decision table of docs/spec.md#s3-1 for a store that can run Go
// inside its critical section (sqlite's write transaction, the in-memory
// backend's mutex). cur is the run's state (nil: none); otherLive reports
// whether another run of the job is running with lease_until >= now (asked
// only where req.Overlap.Exclusive()); now is
// the store's time. Stores that decide in their own language (Redis Lua,
// PL/pgSQL) implement the same table and pass the same conformance suite.
func Decide(cur *Run, otherLive bool, now time.Time, req Request) Decision {
	res := Result{StoreNow: now}
	grant := func(attempt int, ev Event) Decision {
		// A run claimed ahead of its slot starts at the slot; its lease
		// runs from the claim.
		w := &Run{
			Job: req.Job, Slot: req.Slot, Status: StatusRunning, Attempt: attempt,
			Instance: req.Instance, Token: req.Token, StartedAt: StartOf(now, req.Slot), LeaseUntil: now.Add(req.Lease),
		}
		res.Outcome, res.Attempt, res.LeaseUntil = Won, attempt, w.LeaseUntil
		return Decision{Result: res, Write: w, Event: ev}
	}
	switch {
	case cur == nil:
		if now.Sub(req.SlotTime()) > req.MaxLate {
			res.Outcome = Late
			return Decision{Result: res}
		}
		if req.Overlap.Exclusive() && otherLive {
			res.Outcome = Overlap
			return Decision{Result: res}
		}
		return grant(1, EventClaimed)
	case cur.Status == StatusRunning && cur.Token == req.Token:
		res.Outcome, res.Attempt, res.LeaseUntil = Won, cur.Attempt, cur.LeaseUntil
		return Decision{Result: res}
	case cur.Status.Final():
		res.Outcome = Done
		if cur.Status != StatusInterrupted && !cur.Status.Noted() {
			res.Holder = cur.Instance
		}
		return Decision{Result: res}
	case !cur.LeaseUntil.Before(now):
		res.Outcome, res.Attempt, res.LeaseUntil, res.Holder = Running, cur.Attempt, cur.LeaseUntil, cur.Instance
		return Decision{Result: res}
	case cur.Attempt >= req.MaxAttempts || (req.Overlap.Exclusive() && otherLive):
		w := *cur
		w.Status, w.FinishedAt = StatusInterrupted, now
		res.Outcome, res.Attempt = Done, cur.Attempt
		return Decision{Result: res, Write: &w, Event: EventInterrupted}
	default:
		return grant(cur.Attempt+1, EventTakeover)
	}
}

// Contested reports whether a lease decision about run r may write: the
// run has no state, or it is running under another token whose lease ended
// (lease_until < now). Any other run is answered by Decide from a plain
// read, with no lock (the read before the transaction, docs/spec.md#s3-1).
func Contested(r *Run, now time.Time, tok Token) bool {
	return r == nil || (r.Status == StatusRunning && r.Token != tok && r.LeaseUntil.Before(now))
}

// CheckLease refuses a request the lease decision table cannot decide
// sensibly.
func (r Request) CheckLease() error {
	switch {
	case r.Job == "":
		return errors.New("empty job name")
	case r.Token == "":
		return errors.New("empty token")
	case r.Lease < time.Millisecond:
		return fmt.Errorf("lease %v is shorter than 1ms", r.Lease)
	case r.MaxLate < 0:
		return fmt.Errorf("negative maxLate %v", r.MaxLate)
	}
	return nil
}

// StartOf is when a run granted at the instant granted starts: then, or at
// its slot (ms) when it was claimed ahead of it (the scheduler's
// claimAhead). Status shows this as the run's start.
func StartOf(granted time.Time, slot int64) time.Time {
	if s := time.UnixMilli(slot).UTC(); granted.Before(s) {
		return s
	}
	return granted
}
