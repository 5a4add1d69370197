package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestJitterTagsPerInstanceParsed(t *testing.T) {
	cfg := mustParse(t, `
tags: [gpu, "zone:eu-1"]
defaults:
  jitterMs: 30000
jobs:
  - name: a
    schedule: "* * * * *"
    command: "true"
  - name: b
    schedule: "* * * * *"
    command: "true"
    jitterMs: 0
    tags: [gpu]
    perInstance: true
  - name: c
    schedule: "* * * * *"
    command: "true"
    tags: [gpu, ssd]
`)
	if !slices.Equal(cfg.Tags, []string{"gpu", "zone:eu-1"}) {
		t.Errorf("instance tags %v", cfg.Tags)
	}
	a, b := cfg.Jobs[0], cfg.Jobs[1]
	if a.Jitter != 30*time.Second || b.Jitter != 0 {
		t.Errorf("jitter a %v (want 30s from defaults), b %v (want 0)", a.Jitter, b.Jitter)
	}
	if a.PerInstance || !b.PerInstance || !slices.Equal(b.Tags, []string{"gpu"}) {
		t.Errorf("a perInstance %v, b perInstance %v tags %v", a.PerInstance, b.PerInstance, b.Tags)
	}
	here := cfg.JobsHere()
	if len(here) != 2 || here[0].Name != "a" || here[1].Name != "b" {
		t.Errorf("JobsHere = %v, want a and b (c needs ssd)", here)
	}
	notHere := cfg.NotHere()
	if len(notHere) != 1 || notHere[0] != "job c does not run on this instance: it needs tags [gpu, ssd]; this instance has [gpu, zone:eu-1]" {
		t.Errorf("NotHere = %q", notHere)
	}
}

func TestTagsFromEnvironment(t *testing.T) {
	cfg := mustParse(t, "jobs:\n"+job("a"), "ANARCHON_TAGS=gpu, zone:eu-1")
	if !slices.Equal(cfg.Tags, []string{"gpu", "zone:eu-1"}) {
		t.Fatalf("ANARCHON_TAGS gave tags %q", cfg.Tags)
	}
	errs := parseErrs(t, "jobs:\n"+job("a"), []string{"ANARCHON_TAGS=gpu,,GPU"})
	checkErrs(t, errs, []string{"ANARCHON_TAGS:tags:tag 2 is empty"})
}

func TestJitterAndTagErrors(t *testing.T) {
	yml := `defaults:
  jitterMs: 90000
jobs:
  - name: minutely
    schedule: "* * * * *"
    command: "true"
  - name: own
    schedule: "*/5 * * * * *"
    command: "true"
    jitterMs: 6000
  - name: neg
    schedule: "@hourly"
    command: "true"
    jitterMs: -1
  - name: tagged
    schedule: "@hourly"
    command: "true"
    tags: [GPU, "a b", ok, ok]
  - name: per
    schedule: "@hourly"
    command: "true"
    perInstance: "yes"
`
	errs := parseErrs(t, yml, nil)
	checkErrs(t, errs, []string{
		"5:jobs[0].schedule:jitterMs 90000 (from defaults.jitterMs, line 2) is longer than the period of schedule \"* * * * *\" (60000 ms",
		"10:jobs[1].jitterMs:set jitterMs to at most 5000",
		"14:jobs[2].jitterMs:",
		"18:jobs[3].tags:bad tag \"GPU\"",
		"22:jobs[4].perInstance:must be true or false",
	})
	for _, e := range errs {
		if e.Job == "" {
			t.Errorf("problem without its job: %v", e)
		}
	}
}

func TestPerInstanceKey(t *testing.T) {
	j := Job{Name: "clean"}
	if k := j.Key("web-1"); k != "clean" {
		t.Errorf("key of a job run once per slot = %q, want its name", k)
	}
	j.PerInstance = true
	if k := j.Key("web-1"); k != "clean@web-1" {
		t.Errorf("key = %q, want clean@web-1", k)
	}
	dotted, under := j.Key("web.example.com-ab12"), j.Key("web_example_com-ab12")
	if dotted == under || !strings.HasPrefix(dotted, "clean@web_example_com-ab12_") || strings.ContainsAny(dotted, ". ") {
		t.Errorf("keys of web.example.com-ab12 %q and web_example_com-ab12 %q: want distinct, with no dot", dotted, under)
	}
	long := j.Key(strings.Repeat("x", 255))
	if len(long) > len("clean@")+64 {
		t.Errorf("key of a 255-byte id is %d bytes, want at most %d", len(long), len("clean@")+64)
	}
	if JobOfKey(dotted) != "clean" || JobOfKey("clean") != "clean" {
		t.Errorf("JobOfKey(%q) = %q", dotted, JobOfKey(dotted))
	}
}

// On a claim-only store, maxLate + jitterMs must fit half its memory.
func TestJitterWithinClaimOnlyMemory(t *testing.T) {
	yml := `backend:
  type: nats
  nats: {duplicateWindowMs: 3600000}
jobs:
  - name: hourly
    schedule: "@hourly"
    command: "true"
    jitterMs: 1800000
  - name: fits
    schedule: "@hourly"
    command: "true"
    jitterMs: 1740000
`
	errs := parseErrs(t, yml, nil)
	checkErrs(t, errs, []string{
		"8:jobs[0].jitterMs:maxLateMs 60000 + jitterMs 1800000 must be at most half of backend.nats.duplicateWindowMs (3600000): a jittered run is claimed up to maxLate after its start, and the store must remember its slot longer; lower jitterMs to at most 1740000",
	})
}
