package secret

import (
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/anarchon/anarchon/internal/claim"
)

// Hide returns msg with every secret hidden, as written and in the forms a
// URL carries it (percent-encoded as a URL's user info, path or query), and
// then every password Redact recognises (URL user info, password=...).
//
// The secrets go first, longest first. First, because Redact ends a
// password=value at white space and a URL's user info at a quote: run
// before them it would hide a password with a space in it only in part,
// leaving the rest for no secret to match. Longest first, because a secret
// may contain another (a password file's "pass word" and the URL's "pass",
// a password and its encoded form), and hiding the shorter one first would
// leave the rest of the longer one in the message.
func Hide(msg string, secrets ...string) string {
	for _, form := range forms(secrets) {
		msg = strings.ReplaceAll(msg, form, redacted)
	}
	return Redact(msg)
}

// forms returns the secrets as written and percent-encoded, without
// repeats, longest first. Empty secrets, and the mask itself (the password
// of a URL that was redacted already), are left out.
func forms(secrets []string) []string {
	var out []string
	for _, s := range secrets {
		if s == "" || s == redacted {
			continue
		}
		for _, form := range []string{s, url.User(s).String(), url.PathEscape(s), url.QueryEscape(s)} {
			if !slices.Contains(out, form) {
				out = append(out, form)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// Scrub returns err with its message hidden as Hide does: err itself when
// its message shows no secret, otherwise an error whose message is the
// hidden one. A store passes every password it knows (its URL's, see
// Find, its password file's); the passwords of URLs and DSNs quoted in the
// message are hidden anyway.
//
// The scrubbed error does not unwrap, since the errors below it may print
// the secrets, but errors.Is and errors.As see through it to err's chain
// (context.Canceled, claim.ErrFenced, a client's error type and code), so
// that callers classify it as they would err. What errors.As finds there is
// the original, its message unscrubbed: classify with it, print the
// scrubbed error. A claim.PermanentError is the exception, as callers print
// it: errors.As finds a copy whose Err, Cause and Fix are scrubbed, so that
// claim.IsPermanent and claim.AsPermanent classify err as before.
func Scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := Hide(msg, secrets...)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err, secrets: slices.Clone(secrets)}
}

// scrubbed is an error whose message had its secrets hidden (Scrub).
type scrubbed struct {
	msg     string
	err     error
	secrets []string
}

func (e *scrubbed) Error() string { return e.msg }

// Is reports whether err's chain holds target.
func (e *scrubbed) Is(target error) bool { return errors.Is(e.err, target) }

// As finds target in err's chain; a claim.PermanentError comes scrubbed.
func (e *scrubbed) As(target any) bool {
	p, ok := target.(**claim.PermanentError)
	if !ok {
		return errors.As(e.err, target)
	}
	var orig *claim.PermanentError
	if !errors.As(e.err, &orig) {
		return false
	}
	*p = &claim.PermanentError{
		Store: orig.Store,
		Cause: Hide(orig.Cause, e.secrets...),
		Fix:   Hide(orig.Fix, e.secrets...),
		Err:   Scrub(orig.Err, e.secrets...),
	}
	return true
}
