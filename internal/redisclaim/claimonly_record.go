package redisclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
)

// Notes of the claim-only strategies (see claimonly.go, # Notes).

// Record writes n where the claims of the job are decided, unless the slot
// has a claim or a note there: stream-id and script with one script
// (lua/claimonly_record.lua), idmp with the claim's own idempotent XADD,
// so that every later claim of the slot is lost. The job goes into the
// index of jobs as with a claim (withIndex).
// The note is stamped with store time (n.At is not used). Where the
// strategy cannot tell whether the slot was claimed (stream-id, a slot
// whose entry may have been trimmed), nothing is written and Record
// reports false.
func (b *ClaimOnly) Record(ctx context.Context, n claim.Note) (bool, error) {
	// Stream IDs start above 0-0: slot 0 cannot be a stream-id entry.
	if err := checkNote(n, 1); err != nil {
		return false, fmt.Errorf("record %s@%d: %w", n.Job, n.Slot, err)
	}
	var ok bool
	var err error
	if b.strategy == StrategyIDMP {
		ok, err = b.recordIDMP(ctx, n)
	} else {
		ok, err = b.recordScript(ctx, n)
	}
	if err != nil {
		return false, fmt.Errorf("record %s@%d: %w", n.Job, n.Slot, err)
	}
	return ok, nil
}

// recordScript runs the record script of stream-id and script
// (evalScript).
func (b *ClaimOnly) recordScript(ctx context.Context, n claim.Note) (bool, error) {
	keys := []string{b.runsKey(n.Job), b.notesKey(n.Job)}
	args := []any{b.strategy, n.Slot, string(n.Status), n.Reason, n.HeldBy, n.Instance,
		b.window.Milliseconds(), b.maxLen}
	v, err := b.evalScript(ctx, n.Job, claimOnlyRecord, keys, args...)
	if err != nil {
		return false, err
	}
	switch first, _ := firstString(v); first {
	case "recorded":
		return true, nil
	case "exists":
		return false, nil
	case "forgotten":
		b.log.Debug("note not recorded: the stream of claims may have held a claim of the slot that it no longer holds",
			zap.String("strategy", b.strategy), zap.String("job", n.Job), zap.Int64("slot", n.Slot))
		return false, nil
	}
	return false, fmt.Errorf("unexpected script reply %v", v)
}

// noteFields are the fields of a note entry in :runs (as
// lua/claimonly_record.lua writes them), with nonce (idmp) when not empty.
func noteFields(n claim.Note, nonce string) []any {
	f := []any{"slot", n.Slot, "token", "", "note", string(n.Status), "reason", n.Reason,
		"held_by", n.HeldBy, "instance", n.Instance}
	if nonce != "" {
		f = append(f, "nonce", nonce)
	}
	return f
}

// recordIDMP sends the note as the claim's idempotent XADD, with the
// idempotency key (job, slot) of the claims, and a fresh nonce: Redis keeps
// the first entry for the key, a claim or a note, and answers its ID; the
// note was written iff that entry carries the nonce.
func (b *ClaimOnly) recordIDMP(ctx context.Context, n claim.Note) (bool, error) {
	nonce := string(claim.NewToken())
	args := b.idmpAdd(n.Job, n.Slot, noteFields(n, nonce))
	id, err := b.xaddIDMP(ctx, n.Job, args)
	if err != nil {
		return false, err
	}
	msgs, err := b.c.XRange(ctx, b.runsKey(n.Job), id, id).Result()
	if err != nil {
		return false, fmt.Errorf("read the entry %s of %s: %w", id, b.runsKey(n.Job), err)
	}
	return len(msgs) == 1 && msgs[0].Values["nonce"] == nonce, nil
}

// noteRecord is a note of a claim-only strategy: an entry of :runs, or a
// member of :notes (stream-id).
type noteRecord struct {
	slot     int64
	status   claim.Status
	reason   string
	heldBy   int64
	instance string
	at       time.Time
}

// run is the note as ListRuns shows it.
func (n noteRecord) run(job string) claim.Run {
	return claim.Note{Job: job, Slot: n.slot, Status: n.status, Reason: n.reason, HeldBy: n.heldBy,
		Instance: n.instance, At: n.at}.Run()
}

// parseNoteFields reads a note from its fields (str); ok is false for
// anything else. at is the store time of the note.
func parseNoteFields(str func(string) string, at time.Time) (noteRecord, bool) {
	slot, err := strconv.ParseInt(str("slot"), 10, 64)
	status := claim.Status(str("note"))
	if err != nil || !status.Noted() {
		return noteRecord{}, false
	}
	heldBy, _ := strconv.ParseInt(str("held_by"), 10, 64)
	if ms, err := strconv.ParseInt(str("at"), 10, 64); err == nil && ms > 0 {
		at = fromMs(ms)
	}
	return noteRecord{slot: slot, status: status, reason: str("reason"), heldBy: heldBy,
		instance: str("instance"), at: at}, true
}

// parseNoteMember reads a member of :notes (stream-id).
func parseNoteMember(member string) (noteRecord, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(member), &m); err != nil {
		return noteRecord{}, fmt.Errorf("decode the note %q: %w", member, err)
	}
	m["note"] = m["status"]
	n, ok := parseNoteFields(func(k string) string { return m[k] }, time.Time{})
	if !ok {
		return noteRecord{}, errors.New("not a note: " + member)
	}
	return n, nil
}
