package pgclaim

import (
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/anarchon/anarchon/internal/secret"
)

// mask replaces a password in a message (what config.Redact uses).
const mask = "xxxxx"

// secrets are the passwords a message must never show: the DSN's and the
// password file's, as written and as they look percent-encoded in a URL.
type secrets []string

// secretsOf starts the list with the password of a URL DSN's userinfo,
// found without a full parse (the DSN may be the one that fails to parse).
func secretsOf(dsn string) secrets {
	var s secrets
	rest, ok := strings.CutPrefix(dsn, "postgres://")
	if !ok {
		rest, ok = strings.CutPrefix(dsn, "postgresql://")
	}
	if !ok {
		return s
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
			s.add(pw)
			if dec, err := url.PathUnescape(pw); err == nil {
				s.add(dec)
			}
		}
	}
	return s
}

// add records a password in its raw and its escaped forms.
func (s *secrets) add(pw string) {
	if pw == "" {
		return
	}
	for _, v := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw), url.UserPassword("u", pw).String()[2:]} {
		if v != "" && !slices.Contains(*s, v) {
			*s = append(*s, v)
		}
	}
}

// scrub hides the passwords in msg: the known secrets wherever they occur,
// then whatever config.Redact recognises (URL userinfo, password=...). The
// known secrets go first: Redact ends a password=value at white space, and
// would leave the rest of a password with a space in it for them to miss.
func (s secrets) scrub(msg string) string {
	// Longest first, so that an encoded form is not half-replaced by a
	// shorter raw one.
	list := slices.Clone(s)
	slices.SortFunc(list, func(a, b string) int { return len(b) - len(a) })
	for _, v := range list {
		msg = strings.ReplaceAll(msg, v, mask)
	}
	return secret.Redact(msg)
}

// wrap returns err unchanged when its message shows no password, and
// otherwise a scrubbed error. The scrubbed error does not unwrap (the chain
// below could still print the password) but answers errors.Is for its
// cause, so that context.Canceled and claim.ErrFenced stay recognisable.
func (s secrets) wrap(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := s.scrub(msg)
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, cause: err}
}

// scrubbedError is an error whose message had a password removed.
type scrubbedError struct {
	msg   string
	cause error
}

func (e *scrubbedError) Error() string { return e.msg }

// Is reports whether the hidden cause is target.
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.cause, target) }
