package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/anarchon/anarchon/internal/schedule"
)

// tagPattern is what a tag may be: lower-case letters, digits and _ . : -,
// 1 to 64 of them, so that a tag reads the same in YAML, in an environment
// variable (comma-separated) and in a log line.
var tagPattern = regexp.MustCompile(`^[a-z0-9_.:-]{1,64}$`)

// checkTags checks a list of tags (an instance's or a job's).
func checkTags(tags []string) string {
	seen := map[string]bool{}
	for i, t := range tags {
		switch {
		case t == "":
			return fmt.Sprintf("tag %d is empty: a tag is 1 to 64 of a-z 0-9 _ . : - (e.g. tags: [gpu, zone:eu-1])", i+1)
		case !tagPattern.MatchString(t):
			return fmt.Sprintf("bad tag %q: a tag is 1 to 64 of a-z 0-9 _ . : - (lower case; e.g. gpu, zone:eu-1)", t)
		case seen[t]:
			return fmt.Sprintf("tag %q is listed twice", t)
		}
		seen[t] = true
	}
	return ""
}

// checkJitter refuses a jitterMs longer than the period of the job's
// schedule (the shortest gap between two of its consecutive slots): a run
// could then start after the job's next slot, and its starts would no
// longer follow its slots' order. Reported at the jitterMs of the job, or
// at its schedule when the jitter comes from defaults (naming it).
func (p *parser) checkJitter(jitter setting[int64], sc schedule.Schedule, sched setting[string]) {
	if jitter.val <= 0 {
		return
	}
	now := time.Now
	if p.opt.Checks.Now != nil {
		now = p.opt.Checks.Now
	}
	period := schedule.Period(sc, now()).Milliseconds()
	if period == 0 || jitter.val <= period {
		return
	}
	at, desc := jitter.at, fmt.Sprintf("jitterMs %d", jitter.val)
	if !jitter.jobLevel() {
		at, desc = sched.at, desc+" (from "+jitter.origin()+")"
	}
	p.errorf(at, "%s is longer than the period of schedule %q (%d ms, the shortest gap between two of its slots): a run would start after the next slot; set jitterMs to at most %d",
		desc, sched.val, period, period)
}

// checkJitterMemory: a jittered run is claimed up to maxLate after its
// start, maxLate + jitterMs after its slot, so that sum, not maxLate
// alone, must be at most 1/retentionFactor of a claim-only store's memory
// (ms, described by desc). A maxLate too long on its own was reported by
// checkMaxLate.
func (p *parser) checkJitterMemory(infos []jobInfo, desc string, ms int64) {
	for _, in := range infos {
		jit, ml := in.pol.jitter, in.pol.maxLate.val
		if jit.val <= 0 || ml*retentionFactor > ms || (ml+jit.val)*retentionFactor <= ms || in.schedVal == nil {
			continue
		}
		at, what := jit.at, fmt.Sprintf("maxLateMs %d + jitterMs %d", ml, jit.val)
		if !jit.jobLevel() {
			at, what = in.schedVal, what+" (jitterMs from "+jit.origin()+")"
		}
		p.errorf(at, "%s must be at most half of %s: a jittered run is claimed up to maxLate after its start, and the store must remember its slot longer; lower jitterMs to at most %d or raise the retention",
			what, desc, ms/retentionFactor-ml)
	}
}

// RunsOn reports whether an instance with the tags have schedules the job:
// it has every one of the job's tags.
func (j Job) RunsOn(have []string) bool {
	for _, t := range j.Tags {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

// JobsHere returns the jobs this instance schedules: those whose tags its
// own tags (Config.Tags) cover.
func (c *Config) JobsHere() []Job {
	out := make([]Job, 0, len(c.Jobs))
	for _, j := range c.Jobs {
		if j.RunsOn(c.Tags) {
			out = append(out, j)
		}
	}
	return out
}

// NotHere says, one line per job, which jobs of c this instance does not
// schedule and why: the tags they need that it lacks.
func (c *Config) NotHere() []string {
	var out []string
	for _, j := range c.Jobs {
		if !j.RunsOn(c.Tags) {
			out = append(out, fmt.Sprintf("job %s does not run on this instance: it needs tags [%s]; this instance has [%s]",
				j.Name, strings.Join(j.Tags, ", "), strings.Join(c.Tags, ", ")))
		}
	}
	return out
}

// Key is the name the job's runs are claimed and recorded under by
// instance: the job's name, or for a perInstance job "<name>@<instance>"
// (a job's name never holds "@", so no other job's runs share it). The
// instance id is kept to the characters every store takes in a key, a
// subject or a queue name (letters, digits, _ -), at most 64 of them; an
// id that needed changing or shortening ends with a hash of itself, so that
// two ids do not share a key.
func (j Job) Key(instance string) string {
	if !j.PerInstance {
		return j.Name
	}
	return j.Name + KeySep + keySafe(instance)
}

// KeySep separates a perInstance job's name from the instance in its key.
const KeySep = "@"

// JobOfKey returns the job name of a key (Job.Key).
func JobOfKey(key string) string {
	name, _, _ := strings.Cut(key, KeySep)
	return name
}

// maxKeyInstance bounds the instance's part of a key: a job's name (at
// most 64) and it fit a RabbitMQ gate's queue name (255 bytes).
const maxKeyInstance = 64

// keySafe maps id to letters, digits, _ and -.
func keySafe(id string) string {
	var b strings.Builder
	changed := false
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
			changed = true
		}
	}
	out := b.String()
	if changed || len(out) > maxKeyInstance {
		out = fmt.Sprintf("%s_%08x", out[:min(len(out), maxKeyInstance-9)], fnv32(id))
	}
	return out
}

// fnv32 is FNV-1a 32 of s.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
