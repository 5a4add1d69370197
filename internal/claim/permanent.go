package claim

import (
	"errors"
	"fmt"
)

// PermanentError is a store's refusal that no re-send changes: a missing
// privilege, a wrong password, a queue or stream that exists with other
// settings, a key of another type. A transport error (no answer) heals when
// the store comes back; this one heals only when the operator acts, so the
// daemon does not retry it: it names the cause and the fix once, counts the
// slot missed (store_refused) and, at start, exits (docs/spec.md#s3-errors).
type PermanentError struct {
	// Store is the backend type: postgres, redis, nats, rabbitmq.
	Store string
	// Cause is what the store refused, in an operator's words.
	Cause string
	// Fix is what the operator does about it (a GRANT, an ACL rule, a
	// deleted queue).
	Fix string
	// Err is the store's own error.
	Err error
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("%s refused: %s (%v); fix: %s", e.Store, e.Cause, e.Err, e.Fix)
}

func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err, a refusal of store that no re-send changes, with its
// cause and fix. A nil err stays nil.
func Permanent(store string, err error, cause, fix string) error {
	if err == nil {
		return nil
	}
	if IsPermanent(err) {
		return err
	}
	return &PermanentError{Store: store, Cause: cause, Fix: fix, Err: err}
}

// IsPermanent reports whether err (or an error it wraps) is a
// PermanentError: the caller reports it and does not re-send.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// AsPermanent returns the PermanentError err wraps, if any.
func AsPermanent(err error) (*PermanentError, bool) {
	var p *PermanentError
	ok := errors.As(err, &p)
	return p, ok
}
