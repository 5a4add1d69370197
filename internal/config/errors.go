package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a crontab, with its place.
//
// A problem in the file has File and Line (Column when known); a problem of
// the file as a whole (its permissions) has File only; a problem with an
// ANARCHON_* environment override has File and Env, and no Line.
type Error struct {
	File   string // the crontab path as given to Load or Parse
	Line   int    // 1-based; 0 when the problem has no line
	Column int    // 1-based; 0 when unknown
	Env    string // the ANARCHON_* variable the value came from, if any
	Job    string // the job's name, when the problem is inside a job
	Field  string // dotted YAML path: "jobs[2].schedule", "backend.sqlite.busyTimeoutMs"
	Msg    string
}

// Error formats the problem on one line, leaving out the parts that are empty:
//
//	crontab.yaml:12: job "sync": jobs[2].schedule: bad schedule "*/61 * * * *": ...
//	env ANARCHON_BACKEND_TYPE: backend.type: must be one of sqlite, postgres, redis, rabbitmq, nats; not "mysql"
//	crontab.yaml: file is writable by group or others (mode 0666); ...
func (e *Error) Error() string {
	parts := make([]string, 0, 4)
	switch {
	case e.Env != "":
		parts = append(parts, "env "+e.Env)
	case e.File != "" && e.Line > 0:
		parts = append(parts, fmt.Sprintf("%s:%d", e.File, e.Line))
	case e.File != "":
		parts = append(parts, e.File)
	case e.Line > 0:
		parts = append(parts, fmt.Sprintf("line %d", e.Line))
	}
	if e.Job != "" {
		parts = append(parts, fmt.Sprintf("job %q", e.Job))
	}
	if e.Field != "" {
		parts = append(parts, e.Field)
	}
	if e.Msg != "" {
		parts = append(parts, e.Msg)
	}
	return strings.Join(parts, ": ")
}

// Errors lists every problem found in one crontab, sorted by line (problems
// without a line, such as environment overrides and file permissions, come
// first). Load and Parse return an Errors as their error when the crontab is
// invalid; both errors.As(err, &errs) with errs an Errors and with errs an
// *Errors find it.
type Errors []*Error

// Error joins the problems with newlines.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, so that errors.As(err, &e) with e an *Error
// finds the first one.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// As lets errors.As fill an **Errors target as well as an *Errors one.
func (es Errors) As(target any) bool {
	if t, ok := target.(**Errors); ok {
		c := es
		*t = &c
		return true
	}
	return false
}

// sortAndDedup orders problems by line and column (stable, so problems at one
// place keep the order they were found in) and drops exact repeats, which
// happen when one anchored YAML value is merged into several places.
func (es Errors) sortAndDedup() Errors {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Line != es[j].Line {
			return es[i].Line < es[j].Line
		}
		return es[i].Column < es[j].Column
	})
	type key struct {
		line, col int
		env, msg  string
	}
	seen := make(map[key]bool, len(es))
	out := es[:0]
	for _, e := range es {
		if e.Line > 0 || e.Env != "" {
			k := key{e.Line, e.Column, e.Env, e.Msg}
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, e)
	}
	return out
}
