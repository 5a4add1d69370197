package secret_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
)

// codeError is a client's error type, classified by its code.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return fmt.Sprintf("code %d: %v", e.code, e.err) }
func (e *codeError) Unwrap() error { return e.err }

// TestScrub: every way a store's password reaches an error's message is
// hidden, and the scrubbed error is still classified as the original:
// errors.Is and errors.As see through it, claim.IsPermanent too, but it
// does not unwrap to the unscrubbed chain.
func TestScrub(t *testing.T) {
	// cause is the client's error below each message.
	cause := func(msg string) error {
		return fmt.Errorf("%s: %w", msg, &codeError{code: 7, err: context.DeadlineExceeded})
	}
	const file = "file S3cret/x@y" // a password file's, with a space and URL specials
	const nats = "nats://t0kenS3cret@h1:4222,nats://h2:4222"
	const dsn = "host=db user=app password='kv S3cret' dbname=cron"
	for _, tc := range []struct {
		name    string
		err     error
		secrets []string
		hidden  []string // none may remain
		want    string   // the scrubbed message
	}{
		{
			name:   "password in URL",
			err:    cause("dial postgres://app:urlS3cret@db:5432/cron"),
			hidden: []string{"urlS3cret"},
			want:   "dial postgres://app:xxxxx@db:5432/cron: code 7: context deadline exceeded",
		},
		{
			name:   "password in key=value DSN",
			err:    cause("connect host=db user=app password=kvS3cret dbname=cron"),
			hidden: []string{"kvS3cret"},
			want:   "connect host=db user=app password=xxxxx dbname=cron: code 7: context deadline exceeded",
		},
		{
			name:    "quoted key=value password quoted apart from its DSN",
			err:     cause("parse " + dsn + ": role app: password kv S3cret refused"),
			secrets: secret.Find(dsn),
			hidden:  []string{"S3cret"},
			want:    "parse host=db user=app password=xxxxx dbname=cron: role app: password xxxxx refused: code 7: context deadline exceeded",
		},
		{
			name:   "NATS token in URL",
			err:    cause("nats: no servers available: " + nats),
			hidden: []string{"t0kenS3cret"},
			want:   "nats: no servers available: nats://xxxxx@h1:4222,nats://h2:4222: code 7: context deadline exceeded",
		},
		{
			name:    "NATS token quoted apart from its URL",
			err:     cause("nats: authorization violation: token t0kenS3cret"),
			secrets: secret.Find(nats),
			hidden:  []string{"t0kenS3cret"},
			want:    "nats: authorization violation: token xxxxx: code 7: context deadline exceeded",
		},
		{
			name:    "password file, raw",
			err:     cause("auth failed for " + file + " at redis://cache:6379"),
			secrets: []string{file},
			hidden:  []string{"S3cret"},
			want:    "auth failed for xxxxx at redis://cache:6379: code 7: context deadline exceeded",
		},
		{
			name: "password file, percent-escaped",
			err: cause("dial amqp://u:" + url.User(file).String() + "@h/ " + url.PathEscape(file) +
				" " + url.QueryEscape(file)),
			secrets: []string{file},
			hidden:  []string{"S3cret"},
			want:    "dial amqp://u:xxxxx@h/ xxxxx xxxxx: code 7: context deadline exceeded",
		},
		{
			name:    "a secret Redact would cut at its space",
			err:     cause("set password=" + file + " failed"),
			secrets: []string{file},
			hidden:  []string{"S3cret"},
			want:    "set password=xxxxx failed: code 7: context deadline exceeded",
		},
		{
			name:    "the longest secret first",
			err:     cause("auth pass word failed"),
			secrets: []string{"pass", "pass word"},
			hidden:  []string{"word"},
			want:    "auth xxxxx failed: code 7: context deadline exceeded",
		},
		{
			name:    "password in URL decoded apart from its URL",
			err:     cause("auth p@ss failed"),
			secrets: secret.Find("redis://u:p%40ss@cache:6379"),
			hidden:  []string{"p@ss"},
			want:    "auth xxxxx failed: code 7: context deadline exceeded",
		},
		{
			name:    "a secret already redacted",
			err:     cause("dial redis://u:xxxxx@cache:6379"),
			secrets: secret.Find("redis://u:xxxxx@cache:6379"),
			want:    "dial redis://u:xxxxx@cache:6379: code 7: context deadline exceeded",
		},
		{
			name:    "claim.PermanentError inside",
			err:     claim.Permanent("postgres", cause("login with "+file), "the server refused "+file, "correct "+file),
			secrets: []string{file},
			hidden:  []string{"S3cret"},
			want:    "postgres refused: the server refused xxxxx (login with xxxxx: code 7: context deadline exceeded); fix: correct xxxxx",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := secret.Scrub(tc.err, tc.secrets...)
			if got.Error() != tc.want {
				t.Errorf("Scrub = %q\nwant    %q", got, tc.want)
			}
			for _, h := range tc.hidden {
				if strings.Contains(got.Error(), h) {
					t.Errorf("%q remains in %q", h, got)
				}
			}
			if secret.Hide(tc.err.Error(), tc.secrets...) != got.Error() {
				t.Errorf("Hide and Scrub disagree: %q, %q", secret.Hide(tc.err.Error(), tc.secrets...), got)
			}
			if got.Error() != tc.err.Error() && errors.Unwrap(got) != nil {
				t.Errorf("the scrubbed error unwraps to the unscrubbed chain: %v", errors.Unwrap(got))
			}
			if !errors.Is(got, context.DeadlineExceeded) {
				t.Error("errors.Is does not see through the scrubbed error")
			}
			var ce *codeError
			if !errors.As(got, &ce) || ce.code != 7 {
				t.Error("errors.As does not see through the scrubbed error")
			}
			if want := claim.IsPermanent(tc.err); claim.IsPermanent(got) != want {
				t.Errorf("claim.IsPermanent = %v, want %v as the original's", !want, want)
			}
			p, ok := claim.AsPermanent(got)
			if !ok {
				return
			}
			orig, _ := claim.AsPermanent(tc.err)
			if p.Store != orig.Store || p.Error() != tc.want {
				t.Errorf("the PermanentError found is %q of %q, want %q of %q", p, p.Store, tc.want, orig.Store)
			}
			if !errors.Is(p, context.DeadlineExceeded) {
				t.Error("errors.Is does not see through the PermanentError found")
			}
		})
	}
}

func TestScrubUnchanged(t *testing.T) {
	if secret.Scrub(nil, "s3cret") != nil {
		t.Error("Scrub(nil) is not nil")
	}
	plain := fmt.Errorf("claim j@1: %w", context.Canceled)
	if got := secret.Scrub(plain, "s3cret", ""); got != plain { //nolint:errorlint // the same error, not one that wraps it
		t.Errorf("an error without secrets must come back as is, got %v", got)
	}
}

func TestFind(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"postgres://app:p%40ss@db/cron", []string{"p%40ss", "p@ss"}},
		{"postgres://u:p@ss@db/x", []string{"p@ss"}},
		{"nats://tok@h1,nats://a:b@h2,nats://h3", []string{"tok", "b"}},
		{"redis://user@cache:6379", nil},
		{"redis://u:xxxxx@cache", nil},
		{"host=db password='a \\'b\\'' user=x", []string{`'a \'b\''`, "a 'b'"}},
		{"postgres://db/cron?user=app&password=a%2Bb", []string{"a%2Bb", "a+b"}},
		{"host=db user=app", nil},
	} {
		if got := secret.Find(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Find(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
