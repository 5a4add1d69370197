package claim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Triggers (docs/spec.md#s6-trigger): a run of a job asked for outside its
// schedule, kept in the job's control record so that every instance reads
// it with the pauses, within a second, and one of them claims it as the
// run (job, Slot) through the ordinary claim.

// The kinds of trigger.
const (
	// TriggerManual is a run asked for by anarchond trigger.
	TriggerManual = "manual"
	// TriggerRetry is a run that retries a failed or timed-out one.
	TriggerRetry = "retry"
)

// MaxTriggers bounds the triggers a control record keeps: the oldest are
// dropped first.
const MaxTriggers = 64

// Trigger is one run asked for outside the job's schedule.
type Trigger struct {
	// ID is random, fresh for every trigger.
	ID string `json:"id"`
	// Kind is TriggerManual or TriggerRetry.
	Kind string `json:"kind"`
	// Slot is the run's slot, ms since the Unix epoch: unique among the
	// job's triggers and never a slot of its schedule.
	Slot int64 `json:"slot"`
	// Of is, for a retry, the slot of the run it retries (the first
	// run's: a scheduled slot or a manual trigger's); 0 otherwise.
	Of int64 `json:"of,omitempty"`
	// Attempt is 1 for a manual run, 2, 3, ... for the retries of Of.
	Attempt int `json:"attempt"`
	// Due is when the run may be claimed, ms: its Slot.
	Due int64 `json:"due"`
	// By is who asked (user@host for a manual run, the instance for a
	// retry); At when, ms, by the writer's clock.
	By string `json:"by,omitempty"`
	At int64  `json:"at"`
}

// Check refuses a trigger a store should not write.
func (t Trigger) Check() error {
	switch {
	case t.ID == "":
		return errors.New("trigger: empty id")
	case t.Kind != TriggerManual && t.Kind != TriggerRetry:
		return fmt.Errorf("trigger %s: kind %q is not manual or retry", t.ID, t.Kind)
	case t.Slot <= 0 || t.Due <= 0:
		return fmt.Errorf("trigger %s: slot %d and due %d must be positive", t.ID, t.Slot, t.Due)
	case t.Attempt < 1:
		return fmt.Errorf("trigger %s: attempt %d, want at least 1", t.ID, t.Attempt)
	case len(t.By) > MaxControlText:
		return fmt.Errorf("trigger %s: by of %d bytes (at most %d)", t.ID, len(t.By), MaxControlText)
	}
	return nil
}

// checkTriggers refuses a list a store should not write.
func checkTriggers(ts []Trigger) error {
	if len(ts) > MaxTriggers {
		return fmt.Errorf("%d triggers (at most %d)", len(ts), MaxTriggers)
	}
	seen := make(map[int64]bool, len(ts))
	for _, t := range ts {
		if err := t.Check(); err != nil {
			return err
		}
		if seen[t.Slot] {
			return fmt.Errorf("two triggers of slot %d", t.Slot)
		}
		seen[t.Slot] = true
	}
	return nil
}

// EncodeTriggers is the text a store keeps for ts: "" for none, else JSON.
func EncodeTriggers(ts []Trigger) (string, error) {
	if len(ts) == 0 {
		return "", nil
	}
	b, err := json.Marshal(ts)
	if err != nil {
		return "", fmt.Errorf("encode triggers: %w", err)
	}
	return string(b), nil
}

// DecodeTriggers reads EncodeTriggers's text; "" is none (nil).
func DecodeTriggers(s string) ([]Trigger, error) {
	if s == "" {
		return nil, nil
	}
	var ts []Trigger
	if err := json.Unmarshal([]byte(s), &ts); err != nil {
		return nil, fmt.Errorf("decode triggers: %w", err)
	}
	if len(ts) == 0 {
		return nil, nil
	}
	return ts, nil
}

// TriggerOf returns the trigger of the run at slot, if the record has one.
func (c Control) TriggerOf(slot int64) (Trigger, bool) {
	for _, t := range c.Triggers {
		if t.Slot == slot {
			return t, true
		}
	}
	return Trigger{}, false
}

// WithTrigger returns c with t added, the triggers due before keepAfter
// (ms; 0: none) dropped, and at most MaxTriggers kept, the newest. The
// record's other fields and c's own list are left as they are.
func (c Control) WithTrigger(t Trigger, keepAfter int64) Control {
	ts := make([]Trigger, 0, len(c.Triggers)+1)
	for _, o := range c.Triggers {
		if o.Due >= keepAfter {
			ts = append(ts, o)
		}
	}
	ts = append(ts, t)
	slices.SortStableFunc(ts, func(a, b Trigger) int { return cmp.Compare(a.Due, b.Due) })
	if len(ts) > MaxTriggers {
		ts = ts[len(ts)-MaxTriggers:]
	}
	c.Triggers = ts
	return c
}

// Same reports whether c and o hold the same record, the version too.
func (c Control) Same(o Control) bool {
	return c.Job == o.Job && c.Version == o.Version && c.Paused == o.Paused && c.Until == o.Until &&
		c.Reason == o.Reason && c.By == o.By && c.At == o.At && slices.Equal(c.Triggers, o.Triggers)
}
