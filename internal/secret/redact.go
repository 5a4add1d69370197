package secret

import (
	"regexp"
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

// redactUserinfo replaces the password of every "scheme://user:password@"
// in s. The userinfo ends at the last "@" before the next white space, quote,
// "?", "#" or the next "://"; the password is what follows its first ":".
func redactUserinfo(s string) string {
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		start := i + len("://")
		scheme := strings.ToLower(rest[strings.LastIndexFunc(rest[:i], notSchemeRune)+1 : i])
		b.WriteString(rest[:start])
		rest = rest[start:]
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
			b.WriteString(userinfo[:c+1])
			b.WriteString(redacted)
		case c < 0 && userinfo != "" && natsSchemes[scheme]:
			b.WriteString(redacted) // nats://TOKEN@host: the token is the secret
		default:
			b.WriteString(userinfo)
		}
		rest = rest[at:]
	}
}
