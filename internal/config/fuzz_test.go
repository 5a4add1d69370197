package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and returns either a config or an Errors
// whose every entry names the file and none is an internal error.
func FuzzParse(f *testing.F) {
	for _, tc := range errorCases {
		f.Add([]byte(tc.yaml))
	}
	for _, s := range []string{
		"", "jobs: []\n", "jobs:\n" + job("a"),
		"x-c: &c {timezone: UTC}\njobs:\n  - <<: *c\n    name: a\n    schedule: \"@every 1s\"\n    args: [a, 1]\n    env: {A: 1}\n",
		"backend: {type: redis, redis: {strategy: idmp, strategyOptions: {durationSec: 5}}}\njobs:\n" + job("a"),
	} {
		f.Add([]byte(s))
	}
	if data, err := os.ReadFile(filepath.Join("..", "..", "configs", "example.yaml")); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data, LoadOptions{Environ: noEnv, Hostname: fixedHost})
		if err == nil {
			if cfg == nil {
				t.Fatal("nil config and nil error")
			}
			for _, j := range cfg.Jobs {
				if j.Location == nil || j.Heartbeat <= 0 || j.Heartbeat >= j.Lease || (j.Command == "") == (len(j.Args) == 0) {
					t.Fatalf("valid config with a bad job: %+v", j)
				}
			}
			return
		}
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Fatalf("error is not a non-empty Errors: %T %v", err, err)
		}
		for _, e := range errs {
			if e.File != "fuzz.yaml" {
				t.Fatalf("problem without the file: %#v", e)
			}
			if strings.Contains(e.Msg, "internal error") {
				t.Fatalf("internal error: %v", e)
			}
			if strings.Contains(e.Error(), "\n") {
				t.Fatalf("problem on more than one line: %q", e.Error())
			}
		}
	})
}
