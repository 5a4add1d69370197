package config

import (
	"slices"
	"testing"
)

// inheritEnv is set in defaults or per job; a job's own list replaces the
// defaults' one.
func TestInheritEnv(t *testing.T) {
	cfg := mustParse(t, "defaults:\n  inheritEnv: [PATH, LANG]\njobs:\n"+job("a")+job("b")+"    inheritEnv: [TZ]\n"+
		job("c")+"    inheritEnv: []\n")
	for i, want := range [][]string{{"PATH", "LANG"}, {"TZ"}, {}} {
		if got := cfg.Jobs[i].InheritEnv; !slices.Equal(got, want) {
			t.Errorf("job %s: inheritEnv %q, want %q", cfg.Jobs[i].Name, got, want)
		}
	}
	if cfg := mustParse(t, "jobs:\n"+job("a")); cfg.Jobs[0].InheritEnv != nil {
		t.Errorf("without inheritEnv: %q, want none", cfg.Jobs[0].InheritEnv)
	}
}

func TestInheritEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string
	}{
		{name: "bad names in a job", yaml: "jobs:\n" + job("a") + "    inheritEnv: [OK, 1BAD, \"A-B\", \"\"]\n",
			want: []string{
				`5:jobs[0].inheritEnv[1]:bad variable name "1BAD"`,
				`5:jobs[0].inheritEnv[2]:bad variable name "A-B"`,
				`5:jobs[0].inheritEnv[3]:bad variable name ""`,
			}},
		{name: "the daemon's own variables", yaml: "jobs:\n" + job("a") + "    inheritEnv:\n      - ANARCHON_BACKEND_REDIS_URL\n      - ANARCHON_TOKEN\n      - NOTIFY_SOCKET\n",
			want: []string{
				`6:jobs[0].inheritEnv[0]:ANARCHON_BACKEND_REDIS_URL is the daemon's own`,
				`7:jobs[0].inheritEnv[1]:ANARCHON_TOKEN is the daemon's own`,
				`8:jobs[0].inheritEnv[2]:NOTIFY_SOCKET is systemd's channel to the daemon`,
			}},
		{name: "in defaults", yaml: "defaults:\n  inheritEnv: [ANARCHON_CONFIG]\njobs:\n" + job("a") + job("b"),
			want: []string{`2:defaults.inheritEnv[0]:ANARCHON_CONFIG is the daemon's own`}},
		{name: "not a list", yaml: "jobs:\n" + job("a") + "    inheritEnv: PATH\n",
			want: []string{`5:jobs[0].inheritEnv:must be a list of strings, not a string`}},
		{name: "not strings", yaml: "jobs:\n" + job("a") + "    inheritEnv: [[PATH]]\n",
			want: []string{`5:jobs[0].inheritEnv[0]:must be a string, not a list`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := parseErrs(t, tc.yaml, nil)
			checkErrs(t, errs, tc.want)
			for _, e := range errs {
				if e.Field != "" && e.Field[0] == 'j' && e.Job != "a" {
					t.Errorf("%v does not name the job", e)
				}
			}
		})
	}
}
