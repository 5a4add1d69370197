package claim

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrConflict is SetControl's answer when the job's control record is no
// longer at the version the caller read: another writer changed it first.
// Nothing was written; the caller reads again and decides anew.
var ErrConflict = errors.New("conflict: the control record changed since it was read")

// MaxControlText bounds a control record's Reason and By, in bytes.
const MaxControlText = 1024

// Control is a job's control record (docs/spec.md#s6-control): whether an
// operator paused it, until when, why and who. There is at most one per job
// and namespace; a job with none runs. Every change writes the whole record
// at once, compared and set on its version.
type Control struct {
	Job string
	// Version is the store's version of the record: 0 means there is none;
	// each write gives it a new, larger one (the store chooses the value:
	// a counter, or NATS's revision).
	Version int64
	// Paused: no slot of the job before Until (every slot, when Until is
	// 0) is claimed; each is recorded skipped (paused).
	Paused bool
	// Until is the end of the pause, ms since the Unix epoch: a slot at or
	// after it runs. 0: until resumed.
	Until int64
	// Reason is the operator's text; By is who wrote the record
	// (user@host); At is when, ms since the Unix epoch, by the writer's
	// clock.
	Reason string
	By     string
	At     int64
	// Triggers are the runs asked for outside the schedule (trigger.go),
	// oldest first; written with the rest, under the same version.
	Triggers []Trigger
}

// PausedAt reports whether c holds the slot at t: paused, and t before
// Until (when set).
func (c Control) PausedAt(t time.Time) bool {
	return c.Paused && (c.Until == 0 || t.UnixMilli() < c.Until)
}

// UntilTime is Until as a time, or the zero time when the pause has no end.
func (c Control) UntilTime() time.Time {
	if c.Until == 0 {
		return time.Time{}
	}
	return time.UnixMilli(c.Until).UTC()
}

// Check refuses a record a store should not write.
func (c Control) Check() error {
	switch {
	case c.Job == "":
		return errors.New("control record: empty job name")
	case c.Until < 0:
		return fmt.Errorf("control record of %s: negative until %d", c.Job, c.Until)
	case !c.Paused && c.Until != 0:
		return fmt.Errorf("control record of %s: until set on a job that is not paused", c.Job)
	case len(c.Reason) > MaxControlText:
		return fmt.Errorf("control record of %s: reason of %d bytes (at most %d)", c.Job, len(c.Reason), MaxControlText)
	case len(c.By) > MaxControlText:
		return fmt.Errorf("control record of %s: by of %d bytes (at most %d)", c.Job, len(c.By), MaxControlText)
	}
	if err := checkTriggers(c.Triggers); err != nil {
		return fmt.Errorf("control record of %s: %w", c.Job, err)
	}
	return nil
}

// Controller is a backend that keeps the jobs' control records, so that a
// pause written once reaches every instance (docs/spec.md#s6-control).
type Controller interface {
	Backend
	// Controls returns every control record of the namespace, in no
	// particular order. It is one read of the store, however many jobs.
	Controls(ctx context.Context) ([]Control, error)
	// SetControl writes c as the job's record if the stored one is still
	// at prevVersion (0: the job has none yet), in one atomic write, and
	// returns the record as stored, with its new Version. When the stored
	// version differs it writes nothing and returns an error wrapping
	// ErrConflict. c.Version is ignored.
	SetControl(ctx context.Context, c Control, prevVersion int64) (Control, error)
}

// NoController is a backend that cannot keep control records and says
// why, for the message that refuses a pause on it.
type NoController interface {
	// WhyNoControl says, in a few words, why the store cannot keep a
	// control record.
	WhyNoControl() string
}

// ErrNoControl is the error of a pause or resume on a backend that is not
// a Controller.
var ErrNoControl = errors.New("pause is not supported")

// ControllerOf returns b as a Controller, or an error wrapping ErrNoControl
// that names the backend type typ and, where the backend says, why.
func ControllerOf(b Backend, typ string) (Controller, error) {
	return capability[Controller](b, NoController.WhyNoControl, "the store keeps no control records", func(why string) error {
		return fmt.Errorf("%w on backend %s: %s", ErrNoControl, typ, why)
	})
}

// capability returns b as a C (a Controller, a Registry), or refuse's
// error of why b is not one: what it says through its N, else why.
func capability[C, N any](b Backend, say func(N) string, why string, refuse func(why string) error) (C, error) {
	if c, ok := b.(C); ok {
		return c, nil
	}
	if n, ok := b.(N); ok {
		why = say(n)
	}
	var none C
	return none, refuse(why)
}

// ControlOf returns job's record among cs (Version 0: the job has none).
func ControlOf(cs []Control, job string) Control {
	for _, c := range cs {
		if c.Job == job {
			return c
		}
	}
	return Control{Job: job}
}

// ReadControl reads job's record (Version 0: the job has none).
func ReadControl(ctx context.Context, ctl Controller, job string) (Control, error) {
	all, err := ctl.Controls(ctx)
	if err != nil {
		return Control{}, err
	}
	return ControlOf(all, job), nil
}

// UpdateControl reads job's record, asks change for the next one and
// writes it, compared and set on the version read, as every writer of a
// control record does (pause, resume, trigger; the CLI, the dashboard and
// the daemons' retries). On a conflict it reads and asks again, tries times
// in all; the last conflict is returned wrapping ErrConflict. change gets
// the record read and the try (0 first) and returns the next record, or
// false to write nothing (UpdateControl then returns the record read and
// false). A read that fails is returned as is.
func UpdateControl(ctx context.Context, ctl Controller, job string, tries int,
	change func(cur Control, try int) (Control, bool)) (Control, bool, error) {
	for try := 0; ; try++ {
		cur, err := ReadControl(ctx, ctl, job)
		if err != nil {
			return Control{}, false, err
		}
		next, write := change(cur, try)
		if !write {
			return cur, false, nil
		}
		got, err := ctl.SetControl(ctx, next, cur.Version)
		if errors.Is(err, ErrConflict) && try+1 < tries {
			continue
		}
		if err != nil {
			return Control{}, false, err
		}
		return got, true, nil
	}
}
