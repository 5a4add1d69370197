package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/anarchon/anarchon/internal/store"
)

// kind is the YAML shape a key accepts.
type kind uint8

const (
	kindString    kind = iota // a YAML string (quote numbers: user: "1000")
	kindInt                   // a YAML integer
	kindDuration              // a Go duration string: "90s", "1h30m"
	kindBool                  // true or false
	kindStrings               // a list of scalars (args); numbers are taken as written
	kindStringMap             // a mapping of names to scalars (env); numbers are taken as written
	kindMap                   // a nested mapping of known keys
	kindJobs                  // the list of jobs
)

// spec describes one key of the crontab.
type spec struct {
	key      string
	kind     kind
	secret   bool    // never quote the value in a message (URLs, DSNs)
	env      bool    // a list outside jobs that an ANARCHON_* variable may set (comma-separated)
	children []*spec // kindMap: its keys; kindJobs: a job's keys
}

// defaultsSpecs are the keys of "defaults", which every job may also set.
var defaultsSpecs = []*spec{
	{key: "timezone", kind: kindString},
	{key: "maxLateMs", kind: kindInt},
	{key: "claimSpreadMs", kind: kindInt},
	{key: "claimAheadMs", kind: kindInt},
	{key: "leaseMs", kind: kindInt},
	{key: "heartbeatMs", kind: kindInt},
	{key: "maxAttempts", kind: kindInt},
	{key: "overlap", kind: kindString},
	{key: "catchUp", kind: kindString},
	{key: "timeout", kind: kindDuration},
	{key: "killGraceMs", kind: kindInt},
	{key: "shell", kind: kindString},
	{key: "outputTailBytes", kind: kindInt},
	{key: "inheritEnv", kind: kindStrings},
	{key: "onFailure", kind: kindString},
	{key: "onSuccess", kind: kindString},
	{key: "onMissed", kind: kindString},
	{key: "hookTimeoutMs", kind: kindInt},
	{key: "jitterMs", kind: kindInt},
	{key: "retry", kind: kindMap, children: []*spec{
		{key: "attempts", kind: kindInt},
		{key: "backoffMs", kind: kindInt},
		{key: "maxBackoffMs", kind: kindInt},
	}},
	{key: "keepRuns", kind: kindInt},
	{key: "onDrift", kind: kindString},
}

// jobSpecs are the keys of one entry of "jobs".
var jobSpecs = append([]*spec{
	{key: "name", kind: kindString},
	{key: "schedule", kind: kindString},
	{key: "command", kind: kindString},
	{key: "args", kind: kindStrings},
	{key: "env", kind: kindStringMap},
	{key: "workdir", kind: kindString},
	{key: "user", kind: kindString},
	{key: "group", kind: kindString},
	{key: "tags", kind: kindStrings},
	{key: "perInstance", kind: kindBool},
}, defaultsSpecs...)

// rootSpecs is the whole crontab (docs/spec.md#s6), with the section of
// every registered store under backend.
func rootSpecs() []*spec {
	backend := []*spec{
		{key: "type", kind: kindString},
		{key: "retention", kind: kindDuration},
	}
	for _, d := range store.Drivers() {
		backend = append(backend, &spec{key: d.Name, kind: kindMap, children: specsOf(d.Keys)})
	}
	return []*spec{
		{key: "instance", kind: kindString},
		{key: "namespace", kind: kindString},
		{key: "shutdownGraceMs", kind: kindInt},
		{key: "watch", kind: kindBool},
		{key: "stateDir", kind: kindString},
		{key: "tags", kind: kindStrings, env: true},
		{key: "metrics", kind: kindMap, children: []*spec{
			{key: "listen", kind: kindString},
		}},
		{key: "dashboard", kind: kindMap, children: []*spec{
			{key: "enabled", kind: kindBool},
			{key: "tokenFile", kind: kindString},
			{key: "refreshMs", kind: kindInt},
		}},
		{key: "log", kind: kindMap, children: []*spec{
			{key: "level", kind: kindString},
			{key: "format", kind: kindString},
		}},
		{key: "backend", kind: kindMap, children: backend},
		{key: "defaults", kind: kindMap, children: defaultsSpecs},
		{key: "jobs", kind: kindJobs, children: jobSpecs},
	}
}

// storeKinds maps a store's key kinds to the schema's.
var storeKinds = map[store.Kind]kind{
	store.String: kindString, store.Int: kindInt, store.Bool: kindBool,
	store.Duration: kindDuration, store.Map: kindMap, store.Strings: kindStrings,
}

// specsOf is the schema of a store's keys.
func specsOf(keys []store.Key) []*spec {
	out := make([]*spec, len(keys))
	for i, k := range keys {
		out[i] = &spec{key: k.Name, kind: storeKinds[k.Kind], secret: k.Secret, children: specsOf(k.Children)}
	}
	return out
}

// extensionPrefix marks top-level keys that anarchon ignores, so that YAML
// anchors can be defined there ("x-common: &common {...}"), as in
// docker-compose files.
const extensionPrefix = "x-"

// scalarPaths returns the dotted paths of every scalar setting outside jobs,
// with their specs: the settings ANARCHON_* variables may override.
func scalarPaths() []pathSpec {
	var out []pathSpec
	var walk func(prefix string, specs []*spec)
	walk = func(prefix string, specs []*spec) {
		for _, s := range specs {
			p := prefix + s.key
			switch s.kind {
			case kindMap:
				walk(p+".", s.children)
			case kindString, kindInt, kindDuration, kindBool:
				out = append(out, pathSpec{p, s})
			case kindStrings:
				if s.env {
					out = append(out, pathSpec{p, s})
				}
			}
		}
	}
	walk("", rootSpecs())
	return out
}

type pathSpec struct {
	path string
	spec *spec
}

// allKeyPaths lists every key of the schema as a display path ("jobs[].leaseMs"),
// for did-you-mean suggestions of keys written at the wrong level.
func allKeyPaths() []string {
	var out []string
	var walk func(prefix string, specs []*spec)
	walk = func(prefix string, specs []*spec) {
		for _, s := range specs {
			p := prefix + s.key
			out = append(out, p)
			switch s.kind {
			case kindMap:
				walk(p+".", s.children)
			case kindJobs:
				walk(p+"[].", s.children)
			}
		}
	}
	walk("", rootSpecs())
	return out
}

// value is one setting as written, before it is typed: a YAML node from the
// file or a string from the environment.
type value struct {
	field    string // dotted YAML path for messages: "backend.type", "jobs[2].leaseMs"
	job      string // the job's name, for values inside a job
	jobLevel bool   // set on the job itself (not inherited from defaults)
	line     int
	col      int
	env      string     // the ANARCHON_* variable, for environment values
	node     *yaml.Node // file values: the (alias-resolved) node
	text     string     // environment values
	secret   bool
}

// rawJob is one entry of "jobs" as written.
type rawJob struct {
	index int
	line  int
	col   int
	name  string            // the name as written, if it is a string
	vals  map[string]*value // by job key: "schedule"
}

// pair is one key and its value in a mapping.
type pair struct{ k, v *yaml.Node }

const (
	// maxPairs bounds the work of expanding merge keys ("<<: *a"), whose
	// nesting could otherwise blow up exponentially.
	maxPairs = 200000
	// maxMergeDepth bounds merge keys inside merged mappings.
	maxMergeDepth = 16
)

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names the YAML type of n for messages: "a list", "an integer".
func describe(n *yaml.Node) string {
	n = resolve(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "a string"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		case "!!timestamp":
			return "a timestamp"
		case "!!binary":
			return "binary data"
		default:
			return "a value tagged " + fieldKey(n.Tag)
		}
	}
	return "an alias"
}

// pairs returns the keys and values of mapping m, with merge keys ("<<")
// expanded: keys written in m win over merged ones, and earlier merged
// mappings over later ones. Keys that are not strings and repeated keys are
// reported and left out.
func (p *parser) pairs(m *yaml.Node, field, job string, depth int) []pair {
	var out []pair
	seen := make(map[string]*yaml.Node, len(m.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if p.budget++; p.budget > maxPairs {
			p.tooComplex(k)
			return out
		}
		rk := resolve(k)
		if rk != nil && rk.Kind == yaml.ScalarNode && rk.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if rk == nil || rk.Kind != yaml.ScalarNode || rk.ShortTag() != "!!str" {
			p.errNode(k, job, field, "a key must be a string, not %s", describe(k))
			continue
		}
		if first, ok := seen[rk.Value]; ok {
			p.errNode(k, job, joinField(field, fieldKey(rk.Value)), "duplicate key %q (first at line %d)", store.Short(rk.Value), first.Line)
			continue
		}
		seen[rk.Value] = k
		out = append(out, pair{k, v})
	}
	for _, mv := range merges {
		rv := resolve(mv)
		var srcs []*yaml.Node
		switch {
		case rv != nil && rv.Kind == yaml.MappingNode:
			srcs = []*yaml.Node{rv}
		case rv != nil && rv.Kind == yaml.SequenceNode:
			for _, it := range rv.Content {
				ri := resolve(it)
				if ri == nil || ri.Kind != yaml.MappingNode {
					p.errNode(it, job, field, "a merge key (<<) takes a mapping or a list of mappings, not a list of %s", describe(it))
					continue
				}
				srcs = append(srcs, ri)
			}
		default:
			p.errNode(mv, job, field, "a merge key (<<) takes a mapping or a list of mappings, not %s", describe(mv))
		}
		if len(srcs) > 0 && depth >= maxMergeDepth {
			p.errNode(mv, job, field, "merge keys (<<) nested more than %d deep", maxMergeDepth)
			continue
		}
		for _, s := range srcs {
			for _, pr := range p.pairs(s, field, job, depth+1) {
				name := resolve(pr.k).Value
				if _, ok := seen[name]; ok {
					continue
				}
				seen[name] = pr.k
				out = append(out, pr)
			}
		}
	}
	return out
}

func (p *parser) tooComplex(n *yaml.Node) {
	if !p.complexReported {
		p.complexReported = true
		p.errNode(n, "", "", "the document is too complex: more than %d keys after expanding merge keys (<<)", maxPairs)
	}
}

func joinField(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func findSpec(specs []*spec, key string) *spec {
	for _, s := range specs {
		if s.key == key {
			return s
		}
	}
	return nil
}

// walkMap checks mapping m against specs and records its scalar settings in
// dst under prefix+key (root settings) or key (job settings, job != nil).
func (p *parser) walkMap(m *yaml.Node, prefix, field string, specs []*spec, dst map[string]*value, job *rawJob) {
	jobName := ""
	if job != nil {
		jobName = job.name
	}
	for _, pr := range p.pairs(m, field, jobName, 0) {
		if p.complexReported {
			return
		}
		key := resolve(pr.k).Value
		path := prefix + key
		disp := joinField(field, fieldKey(key))
		s := findSpec(specs, key)
		if s == nil {
			if prefix == "" && job == nil && strings.HasPrefix(key, extensionPrefix) {
				continue
			}
			p.errNode(pr.k, jobName, disp, "%s", unknownKeyMsg(key, field, specs, job != nil))
			continue
		}
		rv := resolve(pr.v)
		switch s.kind {
		case kindMap:
			if isNull(rv) {
				continue
			}
			if rv.Kind != yaml.MappingNode {
				p.errNode(pr.v, jobName, disp, "must be a mapping of settings, not %s", describe(pr.v))
				continue
			}
			p.walkMap(rv, path+".", disp, s.children, dst, job)
		case kindJobs:
			if isNull(rv) {
				continue
			}
			if rv.Kind != yaml.SequenceNode {
				p.errNode(pr.v, "", disp, "must be a list of jobs, not %s", describe(pr.v))
				continue
			}
			for i, it := range rv.Content {
				p.walkJob(it, i, s.children)
			}
		default:
			if isNull(rv) {
				continue // "key:" with no value: the default applies
			}
			dst[path] = &value{
				field: disp, job: jobName, jobLevel: job != nil,
				line: pr.v.Line, col: pr.v.Column,
				node: rv, secret: s.secret,
			}
		}
	}
}

// walkJob records one entry of jobs.
func (p *parser) walkJob(n *yaml.Node, index int, specs []*spec) {
	field := fmt.Sprintf("jobs[%d]", index)
	rn := resolve(n)
	if rn == nil || rn.Kind != yaml.MappingNode {
		p.errNode(n, "", field, "a job must be a mapping (name, schedule, command, ...), not %s", describe(n))
		return
	}
	j := &rawJob{index: index, line: n.Line, col: n.Column, vals: map[string]*value{}}
	// The name first, so that every problem of the job can name it.
	for i := 0; i+1 < len(rn.Content); i += 2 {
		k, v := resolve(rn.Content[i]), resolve(rn.Content[i+1])
		if k != nil && k.Kind == yaml.ScalarNode && k.Value == "name" && v != nil &&
			v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" {
			j.name = v.Value
			break
		}
	}
	p.walkMap(rn, "", field, specs, j.vals, j)
	p.jobs = append(p.jobs, j)
}

// unknownKeyMsg explains an unknown key, suggesting the key it most likely
// means: a close one at the same level, or the same key at another level.
func unknownKeyMsg(key, field string, specs []*spec, inJob bool) string {
	msg := fmt.Sprintf("unknown key %q", store.Short(key))
	if best := closest(key, specs); best != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", best)
	}
	nk := normKey(key)
	var elsewhere []string
	for _, path := range allKeyPaths() {
		last := path[strings.LastIndexAny(path, ".]")+1:]
		if normKey(last) == nk {
			elsewhere = append(elsewhere, path)
		}
	}
	if len(elsewhere) > 0 {
		sort.Strings(elsewhere)
		where := "the top level"
		if field != "" {
			where = field
		}
		if inJob {
			where = "a job"
		}
		return msg + fmt.Sprintf(" (%s has no such key; did you mean %s?)", where, strings.Join(elsewhere, " or "))
	}
	keys := make([]string, len(specs))
	for i, s := range specs {
		keys[i] = s.key
	}
	return msg + "; known keys: " + strings.Join(keys, ", ")
}

// normKey folds case and drops "_" and "-", so that max_late_ms and
// MaxLateMS both match maxLateMs.
func normKey(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("_", "", "-", "").Replace(s)
}

// closest returns the key of specs that key most likely misspells, or "".
func closest(key string, specs []*spec) string {
	nk := normKey(key)
	best, bestD := "", 1<<30
	for _, s := range specs {
		ns := normKey(s.key)
		if ns == nk {
			return s.key
		}
		d := levenshtein(nk, ns)
		limit := 2
		if len(ns) <= 4 {
			limit = 1
		}
		if d <= limit && d < bestD {
			best, bestD = s.key, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// short cuts s for a message.

// fieldKey is key as a part of a field path: quoted when it holds white
// space or control characters, so that a problem stays on one line.
func fieldKey(key string) string {
	key = store.Short(key)
	if strings.IndexFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f || !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(key)
	}
	return key
}
