package store

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The checks below are Section's check functions, shared by the crontab
// loader and the stores: each returns "" for a good value, else what is
// wrong with it and what it must be. None quotes more than Short of a
// value, and the URL checks never quote the value (it may hold a
// password).

// maxMs is the largest millisecond count that fits a time.Duration.
const maxMs = math.MaxInt64 / int64(time.Millisecond)

// OneOf accepts one of choices.
func OneOf(choices ...string) func(string) string {
	return func(s string) string {
		if slices.Contains(choices, s) {
			return ""
		}
		return fmt.Sprintf("must be one of %s; not %q", strings.Join(choices, ", "), Short(s))
	}
}

// NotEmpty refuses "".
func NotEmpty(s string) string {
	if s == "" {
		return "must not be empty"
	}
	return ""
}

// Millis accepts a millisecond (or plain) count: at least lo and small
// enough to be a time.Duration.
func Millis(lo int64) func(int64) string {
	return func(x int64) string {
		switch {
		case x < lo && lo == 0:
			return fmt.Sprintf("must be 0 or more, not %d", x)
		case x < lo && lo == 1:
			return fmt.Sprintf("must be greater than 0, not %d", x)
		case x < lo:
			return fmt.Sprintf("must be at least %d, not %d", lo, x)
		case x > maxMs:
			return fmt.Sprintf("%d is too large (at most %d)", x, maxMs)
		}
		return ""
	}
}

// IntRange accepts lo..hi.
func IntRange(lo, hi int64) func(int64) string {
	return func(x int64) string {
		if x < lo || x > hi {
			return fmt.Sprintf("must be between %d and %d, not %d", lo, hi, x)
		}
		return ""
	}
}

// URL accepts a URL with one of schemes, or a comma-separated list of
// them (a cluster's seeds).
func URL(schemes ...string) func(string) string {
	return func(raw string) string {
		if raw == "" {
			return "must not be empty"
		}
		for _, one := range strings.Split(raw, ",") {
			if msg := OneURL(strings.TrimSpace(one), schemes); msg != "" {
				if strings.Contains(raw, ",") {
					return "one of the URLs " + msg
				}
				return msg
			}
		}
		return ""
	}
}

// OneURL checks one URL against schemes.
func OneURL(raw string, schemes []string) string {
	want := strings.Join(schemes, "://, ") + "://"
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's reason may quote a piece of the password (an
		// unescaped "/" in it ends the host early), so it is not shown.
		return fmt.Sprintf("is not a valid URL (expected %s...; percent-encode special characters such as @ / : %% # ? in the user name and password)", want)
	}
	if !slices.Contains(schemes, u.Scheme) {
		// The scheme is shown only when it is one ("user:password@host"
		// parses with the user name as its scheme).
		if u.Scheme == "" || len(u.Scheme) > 10 || !strings.HasPrefix(raw, u.Scheme+"://") {
			return fmt.Sprintf("must start with %s", want)
		}
		return fmt.Sprintf("must start with %s, not %s://", want, u.Scheme)
	}
	if u.Host == "" && u.Scheme != "unix" {
		return "has no host"
	}
	return ""
}

// Short is s cut to 80 bytes (at a rune boundary) with "..." after.
func Short(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// NamePattern is what a name of the crontab (a namespace, a stream) may
// be; NameLike says it in words.
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NameLike says NamePattern in words.
const NameLike = "1 to 64 letters, digits, _ or -"

// Matches accepts what re matches; what names the value ("table name") and
// like says in words what it must be.
func Matches(re *regexp.Regexp, what, like string) func(string) string {
	return func(s string) string {
		if re.MatchString(s) {
			return ""
		}
		return fmt.Sprintf("bad %s %q: must be %s", what, Short(s), like)
	}
}
