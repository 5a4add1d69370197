package config

import (
	"strings"
	"testing"
	"time"
)

// Hooks and hookTimeoutMs come from defaults like the other policy keys; a
// job's empty hook turns the default's off.
func TestHookKeys(t *testing.T) {
	cfg := mustParse(t, `defaults:
  onFailure: mail -s "$ANARCHON_JOB failed" ops < "$ANARCHON_OUTPUT_FILE"
  hookTimeoutMs: 5000
jobs:
  - name: a
    schedule: "* * * * *"
    command: "true"
    onSuccess: echo ok
    onMissed: echo missed
  - name: b
    schedule: "* * * * *"
    command: "true"
    onFailure: ""
    hookTimeoutMs: 100
`)
	a, b := cfg.Jobs[0], cfg.Jobs[1]
	if a.OnFailure != `mail -s "$ANARCHON_JOB failed" ops < "$ANARCHON_OUTPUT_FILE"` || a.OnSuccess != "echo ok" ||
		a.OnMissed != "echo missed" || a.HookTimeout != 5*time.Second {
		t.Errorf("job a: %+v", a)
	}
	if b.OnFailure != "" || b.OnSuccess != "" || b.OnMissed != "" || b.HookTimeout != 100*time.Millisecond {
		t.Errorf("job b: %+v", b)
	}
}

func TestHookKeyErrors(t *testing.T) {
	errs := parseErrs(t, `jobs:
  - name: a
    schedule: "* * * * *"
    command: "true"
    hookTimeoutMs: 0
    onFailure: [mail]
`, nil)
	checkErrs(t, errs, []string{
		"5:jobs[0].hookTimeoutMs:must be greater than 0",
		"6:jobs[0].onFailure:",
	})
}

// validate checks the shell that runs a job's hooks, an args job's too,
// and refuses a hook the kernel would refuse on every host.
func TestPreflightHooks(t *testing.T) {
	const head = "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
	big := strings.Repeat("x", MaxArgBytes+1)
	for _, tc := range []struct {
		name string
		yaml string
		want []problem
	}{
		{"args job's hook shell missing", head + "    args: [\"true\"]\n    shell: /bin/anarchon-no-such-shell\n    onFailure: echo failed\n",
			[]problem{{5, "a", "jobs[0].shell", []string{`shell "/bin/anarchon-no-such-shell" does not exist on this host`}}}},
		{"hook too long", head + "    command: \"true\"\n    onMissed: " + big + "\n",
			[]problem{{5, "a", "jobs[0].onMissed", []string{"hook is 131072 bytes", "at most 131071 bytes", "put the script in a file"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, preflightErrs(t, tc.yaml, hostOpts(HostErrors, preflightNow)), tc.want)
		})
	}
}
