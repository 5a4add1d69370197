package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// noEnv is an empty environment: tests do not see the process's ANARCHON_*.
var noEnv = []string{}

func fixedHost() (string, error) { return "testhost", nil }

func opts(env []string) LoadOptions {
	if env == nil {
		env = noEnv
	}
	return LoadOptions{Environ: env, Hostname: fixedHost}
}

// mustParse parses a valid crontab.
func mustParse(t *testing.T, yml string, env ...string) *Config {
	t.Helper()
	cfg, err := Parse("crontab.yaml", []byte(yml), opts(env))
	if err != nil {
		t.Fatalf("Parse: unexpected error:\n%v\n--- yaml:\n%s", err, yml)
	}
	return cfg
}

// parseErrs parses an invalid crontab and returns its problems.
func parseErrs(t *testing.T, yml string, env []string) Errors {
	t.Helper()
	cfg, err := Parse("crontab.yaml", []byte(yml), opts(env))
	if err == nil {
		t.Fatalf("Parse: no error, want some; config: %+v\n--- yaml:\n%s", cfg, yml)
	}
	if cfg != nil {
		t.Errorf("Parse returned a config along with an error")
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error %T is not an Errors: %v", err, err)
	}
	return errs
}

// wantErr is "place:field:substring": place is a line number (0: no line)
// or an ANARCHON_* variable; field is the dotted path exactly; substring must
// occur in Msg.
type wantErr struct {
	line  int
	env   string
	field string
	sub   string
}

func parseWant(t *testing.T, s string) wantErr {
	t.Helper()
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		t.Fatalf("bad want %q: need place:field:substring", s)
	}
	w := wantErr{field: parts[1], sub: parts[2]}
	if n, err := strconv.Atoi(parts[0]); err == nil {
		w.line = n
	} else {
		w.env = parts[0]
	}
	return w
}

func (w wantErr) match(e *Error) bool {
	return e.Line == w.line && e.Env == w.env && e.Field == w.field && strings.Contains(e.Msg, w.sub)
}

// checkErrs asserts that errs are exactly the wanted problems (in any order),
// and that every one names the file.
func checkErrs(t *testing.T, errs Errors, wants []string) {
	t.Helper()
	used := make([]bool, len(errs))
	ok := true
	for _, ws := range wants {
		w := parseWant(t, ws)
		found := false
		for i, e := range errs {
			if !used[i] && w.match(e) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			ok = false
			t.Errorf("missing problem %q", ws)
		}
	}
	for i, e := range errs {
		if e.File == "" {
			t.Errorf("problem without a file: %v", e)
		}
		if !used[i] {
			ok = false
			t.Errorf("unexpected problem: line %d env %q field %q: %s", e.Line, e.Env, e.Field, e.Msg)
		}
	}
	if !ok {
		t.Logf("all problems:\n%v", errs)
	}
	for i := 1; i < len(errs); i++ {
		if errs[i].Line < errs[i-1].Line {
			t.Errorf("problems not sorted by line:\n%v", errs)
			break
		}
	}
}

// job is a valid job entry, for crontabs whose problem is elsewhere.
func job(name string) string {
	return fmt.Sprintf("  - name: %s\n    schedule: \"* * * * *\"\n    command: \"true\"\n", name)
}
