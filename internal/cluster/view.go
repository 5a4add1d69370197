package cluster

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// Member is one instance's record as the view judges it.
type Member struct {
	claim.Instance
	// Alive: the record was renewed within its ttl, at the view's time.
	Alive bool
	// Outdated: alive, and running an older version than another live
	// instance.
	Outdated bool
	// Drift are the jobs this live instance defines differently from
	// another live one (or lacks), sorted.
	Drift []string
}

// Variant is one definition of a job and the live instances that hold it.
type Variant struct {
	Hash      string
	Instances []string // sorted
}

// JobDrift is a job the live instances define differently.
type JobDrift struct {
	Job string
	// Fields are the groups of fields (Groups' names) in which the
	// definitions differ, sorted in Groups' order; "defined" when some
	// live instances lack the job.
	Fields   []string
	Variants []Variant // by their first instance
	// Missing are the live instances whose crontab lacks the job.
	Missing []string
}

// FieldDefined names the difference of a job that some instances lack.
const FieldDefined = "defined"

// Instances lists the instances by name: live ones and those gone within
// their retention.
func (d JobDrift) Instances() []string {
	var out []string
	for _, v := range d.Variants {
		out = append(out, v.Instances...)
	}
	out = append(out, d.Missing...)
	sort.Strings(out)
	return out
}

// View is the analysis of the instance records at one instant.
type View struct {
	Now     time.Time
	Members []Member   // by name
	Drift   []JobDrift // by job
	// Newest is the newest version among the live instances.
	Newest string
}

// Analyze judges recs at now (the store's time, or the reader's where the
// store has none): alive or gone, which jobs the live instances define
// differently, which live instances run an older version.
func Analyze(recs []claim.Instance, now time.Time) View {
	v := View{Now: now}
	for _, r := range recs {
		if r.Gone(now) {
			continue
		}
		v.Members = append(v.Members, Member{Instance: r, Alive: r.Alive(now)})
	}
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].Name < v.Members[j].Name })
	v.markVersions()
	v.Drift = driftOf(v.live())
	byName := map[string]*Member{}
	for i := range v.Members {
		byName[v.Members[i].Name] = &v.Members[i]
	}
	for _, d := range v.Drift {
		for _, n := range d.Instances() {
			if m := byName[n]; m != nil {
				m.Drift = append(m.Drift, d.Job)
			}
		}
	}
	return v
}

// live are the live members.
func (v View) live() []Member {
	var out []Member
	for _, m := range v.Members {
		if m.Alive {
			out = append(out, m)
		}
	}
	return out
}

// Member returns the member named name.
func (v View) Member(name string) (Member, bool) {
	for _, m := range v.Members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// JobDrift returns job's drift, when the live instances disagree on it.
func (v View) JobDrift(job string) (JobDrift, bool) {
	for _, d := range v.Drift {
		if d.Job == job {
			return d, true
		}
	}
	return JobDrift{}, false
}

// markVersions sets Newest and each live member's Outdated
// (compareVersions).
func (v *View) markVersions() {
	for _, m := range v.Members {
		if m.Alive && (v.Newest == "" || compareVersions(m.Version, v.Newest) > 0) {
			v.Newest = m.Version
		}
	}
	for i := range v.Members {
		m := &v.Members[i]
		m.Outdated = m.Alive && compareVersions(m.Version, v.Newest) < 0
	}
}

// compareVersions compares "v1.2.3" (v optional) numerically; a
// pre-release ("-rc1", "-3-gabcdef") sorts below its release, and a version
// that is not one sorts below every one that is.
func compareVersions(a, b string) int {
	na, pa, oka := parseVersion(a)
	nb, pb, okb := parseVersion(b)
	switch {
	case !oka || !okb:
		return cmpBool(oka, okb)
	case na != nb:
		for i := range na {
			if na[i] != nb[i] {
				return cmp.Compare(na[i], nb[i])
			}
		}
	case (pa == "") != (pb == ""):
		return cmpBool(pa == "", pb == "")
	}
	return strings.Compare(pa, pb)
}

func parseVersion(v string) (n [3]int, pre string, ok bool) {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v, pre = v[:i], v[i:]
	}
	parts := strings.Split(v, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return n, "", false
	}
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return n, "", false
		}
		n[i] = x
	}
	return n, pre, true
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// driftOf finds the jobs the live members define differently.
func driftOf(live []Member) []JobDrift {
	if len(live) < 2 {
		return nil
	}
	jobs := map[string]bool{}
	for _, m := range live {
		for j := range m.Jobs {
			jobs[j] = true
		}
	}
	var out []JobDrift
	for job := range jobs {
		if d, ok := jobDrift(job, live); ok {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Job < out[j].Job })
	return out
}

// jobDrift compares the live members' definitions of job.
func jobDrift(job string, live []Member) (JobDrift, bool) {
	d := JobDrift{Job: job}
	idx := map[string]int{}
	for _, m := range live { // by name: Members is sorted
		h, ok := m.Jobs[job]
		if !ok {
			d.Missing = append(d.Missing, m.Name)
			continue
		}
		i, seen := idx[h]
		if !seen {
			i = len(d.Variants)
			idx[h] = i
			d.Variants = append(d.Variants, Variant{Hash: h})
		}
		d.Variants[i].Instances = append(d.Variants[i].Instances, m.Name)
	}
	if len(d.Variants) < 2 && len(d.Missing) == 0 {
		return JobDrift{}, false
	}
	fields := map[string]bool{}
	for _, a := range d.Variants[1:] {
		for _, f := range Compare(d.Variants[0].Hash, a.Hash) {
			fields[f] = true
		}
	}
	for _, g := range Groups {
		if fields[g.Name] {
			d.Fields = append(d.Fields, g.Name)
			delete(fields, g.Name)
		}
	}
	rest := make([]string, 0, len(fields))
	for f := range fields {
		rest = append(rest, f)
	}
	sort.Strings(rest)
	d.Fields = append(d.Fields, rest...)
	if len(d.Missing) > 0 {
		d.Fields = append(d.Fields, FieldDefined)
	}
	d.Fields = slices.Compact(d.Fields)
	return d, true
}
