package config

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/viper"

	"github.com/anarchon/anarchon/internal/clock"
)

// envPrefix starts every environment override.
const envPrefix = "ANARCHON"

// reservedEnv are ANARCHON_* variables that are not settings: the ones the
// daemon gives every job (docs/spec.md#s6-jobs) and the command line's
// ANARCHON_CONFIG. They, and the test suites' ANARCHON_TEST_*, are never
// reported as unknown.
var reservedEnv = map[string]bool{
	"ANARCHON_CONFIG":   true,
	"ANARCHON_JOB":      true,
	"ANARCHON_SLOT":     true,
	"ANARCHON_SLOT_MS":  true,
	"ANARCHON_ATTEMPT":  true,
	"ANARCHON_TOKEN":    true,
	"ANARCHON_INSTANCE": true,
	// A hook's besides (docs/spec.md#s6-hooks).
	"ANARCHON_HOOK":        true,
	"ANARCHON_STATUS":      true,
	"ANARCHON_EXIT_CODE":   true,
	"ANARCHON_DURATION_MS": true,
	"ANARCHON_OUTPUT_FILE": true,
	"ANARCHON_REASON":      true,
}

// envName is the variable that overrides the setting at path:
// "backend.sqlite.busyTimeoutMs" -> ANARCHON_BACKEND_SQLITE_BUSYTIMEOUTMS.
// It is viper's rule for SetEnvPrefix("ANARCHON") with a "." -> "_" key
// replacer (TestEnvNamesMatchViper checks that they agree).
func envName(path string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// envLayer reads the ANARCHON_* overrides.
//
// Viper binds every overridable setting to its variable and reads the process
// environment. viper can only read the process environment, so when the
// caller passes its own environment (LoadOptions.Environ) the same names are
// looked up in that list instead; the names are the same in both cases.
type envLayer struct {
	v       *viper.Viper
	environ map[string]string // nil: the process environment, through viper
	all     []string          // the NAME=value list, for unknown-variable warnings
}

func newEnvLayer(environ []string, paths []pathSpec) *envLayer {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	for _, ps := range paths {
		// BindEnv with only a key cannot fail.
		_ = v.BindEnv(ps.path)
	}
	e := &envLayer{v: v}
	if environ == nil {
		e.all = os.Environ()
		return e
	}
	e.all = environ
	e.environ = make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix+"_") {
			e.environ[k] = val // the last one wins, as in os/exec
		}
	}
	return e
}

// lookup returns the override of the setting at path. Like viper (without
// AllowEmptyEnv), it ignores a variable that is set but empty.
func (e *envLayer) lookup(path string) (name, val string, ok bool) {
	name = envName(path)
	if e.environ != nil {
		val = e.environ[name]
		return name, val, val != ""
	}
	if !e.v.IsSet(path) {
		return name, "", false
	}
	val = fmt.Sprint(e.v.Get(path))
	return name, val, val != ""
}

// unknown returns warnings for ANARCHON_* variables that match no setting.
func (e *envLayer) unknown(paths []pathSpec) []string {
	known := make(map[string]string, len(paths))
	for _, ps := range paths {
		known[envName(ps.path)] = ps.path
	}
	var out []string
	seen := map[string]bool{}
	for _, kv := range e.all {
		k, val, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, envPrefix+"_") || strings.HasPrefix(k, envPrefix+"_TEST_") ||
			val == "" || known[k] != "" || reservedEnv[k] || seen[k] ||
			(k == clock.TestClockEnv && clock.TestClockEnabled) {
			continue
		}
		seen[k] = true
		msg := fmt.Sprintf("environment variable %s matches no setting and is ignored", k)
		if s := closestEnv(k, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		out = append(out, msg)
	}
	sort.Strings(out)
	return out
}

func closestEnv(name string, known map[string]string) string {
	n := normKey(name)
	best, bestD := "", 3
	for k := range known {
		if d := levenshtein(n, normKey(k)); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	return best
}
