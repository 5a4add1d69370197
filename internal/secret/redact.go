package secret

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// redacted replaces a secret; it is what net/url's URL.Redacted uses too.
const redacted = "xxxxx"

// kvPassword finds password settings in key=value connection strings
// ("host=db password=s3cret", "password='a b'") and in URL query strings
// ("?sslpassword=s3cret&x=y"). Group 1 is what precedes the key, group 2 the
// key and "=" (kept), group 3 the value (hidden).
var kvPassword = regexp.MustCompile(`(?i)(^|[\s?&;,])((?:ssl)?(?:password|passwd|pass|pwd|secret|token)\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&;,]*)`)

// Redact hides the passwords in s, which may be a URL, a comma-separated list
// of URLs, a key=value DSN or a message that quotes any of them:
//
//	postgres://app:s3cret@db:5432/cron   -> postgres://app:xxxxx@db:5432/cron
//	redis://:s3cret@cache:6379/0         -> redis://:xxxxx@cache:6379/0
//	host=db user=app password=s3cret     -> host=db user=app password=xxxxx
//
// It errs on the side of hiding too much: a password that contains an
// unescaped "@" or "/" hides the text up to the last "@" of the URL.
func Redact(s string) string {
	return kvPassword.ReplaceAllString(redactUserinfo(s), "${1}${2}"+redacted)
}

// natsSchemes are the URL schemes of NATS, whose userinfo without a ":" is
// an authentication token.
var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

func notSchemeRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')
}

// redactUserinfo replaces the secret of every URL in s (see eachURLSecret).
func redactUserinfo(s string) string {
	var b strings.Builder
	last := 0
	eachURLSecret(s, func(i, j int) {
		b.WriteString(s[last:i])
		b.WriteString(redacted)
		last = j
	})
	b.WriteString(s[last:])
	return b.String()
}

// eachURLSecret calls f with the byte offsets i, j of the secret s[i:j] of
// every "scheme://user:password@" in s (the password) and of every
// "nats://TOKEN@" (the token), in order. The userinfo ends at the last "@"
// before the next white space, quote, "?", "#" or the next "://"; the
// password is what follows its first ":".
func eachURLSecret(s string, f func(i, j int)) {
	off := 0
	rest := s
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			return
		}
		start := i + len("://")
		scheme := strings.ToLower(rest[strings.LastIndexFunc(rest[:i], notSchemeRune)+1 : i])
		rest, off = rest[start:], off+start
		end := strings.IndexAny(rest, " \t\r\n\"'`?#")
		if end < 0 {
			end = len(rest)
		}
		if j := strings.Index(rest[:end], "://"); j >= 0 {
			end = j
		}
		at := strings.LastIndexByte(rest[:end], '@')
		if at < 0 {
			continue
		}
		userinfo := rest[:at]
		switch c := strings.IndexByte(userinfo, ':'); {
		case c >= 0 && c+1 < len(userinfo):
			f(off+c+1, off+at)
		case c < 0 && userinfo != "" && natsSchemes[scheme]:
			f(off, off+at) // nats://TOKEN@host: the token is the secret
		}
		rest, off = rest[at:], off+at
	}
}

// Find returns the secrets that Redact hides in s, as written and decoded,
// so that Scrub and Hide can hide them where a message quotes them apart
// from their URL or DSN (a client's "password authentication failed for
// p@ss"): every URL password, every NATS token written as a URL's user,
// every password=... value, unquoted. A store calls it on its URL or DSN,
// which may be the one that fails to parse.
func Find(s string) []string {
	var out []string
	add := func(v string) {
		if v != "" && v != redacted && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	eachURLSecret(s, func(i, j int) {
		add(s[i:j])
		if dec, err := url.PathUnescape(s[i:j]); err == nil {
			add(dec)
		}
	})
	for _, m := range kvPassword.FindAllStringSubmatch(s, -1) {
		v := m[3]
		add(v)
		if strings.HasPrefix(v, "'") {
			add(unquote(v))
		} else if dec, err := url.QueryUnescape(v); err == nil {
			add(dec) // ?password=p%40ss
		}
	}
	return out
}

// unquote is the value of a quoted key=value setting (password='it\'s'): what
// stands between its quotes, its backslash escapes resolved.
func unquote(v string) string {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch {
		case v[i] == '\\' && i+1 < len(v):
			i++
		case v[i] == '\'':
			return b.String()
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
