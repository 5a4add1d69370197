package natsclaim

import (
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
)

// redact hides the credentials of a NATS URL (or a list of them, or a
// message quoting them): passwords, and a token written as the user part
// alone (nats://TOKEN@host).
func redact(s string) string { return secret.Redact(s) }

// urlSecrets returns the user names that stand alone before "@" in the
// URLs of s (NATS tokens), and every URL password, as written and decoded.
func urlSecrets(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		u, err := url.Parse(part)
		if err != nil || u.User == nil {
			// Unparsable: fall back to the text between "://" and "@".
			if i := strings.Index(part, "://"); i >= 0 {
				rest := part[i+3:]
				if at := strings.LastIndexByte(rest, '@'); at > 0 {
					info := rest[:at]
					if c := strings.IndexByte(info, ':'); c >= 0 {
						info = info[c+1:]
					}
					if info != "" && info != "xxxxx" {
						out = append(out, info)
					}
				}
			}
			continue
		}
		if pw, ok := u.User.Password(); ok {
			if pw != "" && pw != "xxxxx" {
				out = append(out, pw, url.QueryEscape(pw), url.PathEscape(pw))
			}
			continue
		}
		if name := u.User.Username(); name != "" {
			out = append(out, u.User.String(), name)
		}
	}
	// Longest first, so that a secret's escaped form is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// scrubbedError is an error whose message had the URL's secrets removed.
// It does not unwrap (the original's message may hold them); errors.Is
// still sees through it.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }

func (e *scrubbedError) Is(target error) bool { return errors.Is(e.err, target) }

// As lets errors.As find a claim.PermanentError in the original, for its
// classification; its message is this one's.
func (e *scrubbedError) As(target any) bool {
	if _, ok := target.(**claim.PermanentError); ok {
		return errors.As(e.err, target)
	}
	return false
}

// withSecret returns secrets with s (as written and escaped) added,
// longest first.
func withSecret(secrets []string, s string) []string {
	if s == "" {
		return secrets
	}
	out := append(slices.Clone(secrets), s, url.QueryEscape(s), url.PathEscape(s),
		strings.TrimPrefix(url.UserPassword("", s).String(), ":"))
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// hide returns msg with secrets and every URL password hidden.
func hide(msg string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			msg = strings.ReplaceAll(msg, sec, "xxxxx")
		}
	}
	return redact(msg)
}

// scrub returns err with secrets (see urlSecrets and withSecret) and every
// URL password in its message hidden.
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := hide(err.Error(), secrets)
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}
