package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/anarchon/anarchon/internal/schedule"
)

// Checks choose what Load and Parse check beyond the file's own rules.
type Checks struct {
	// Host checks, on this host, what every run of a job needs (see
	// HostMode); the zero value checks nothing of the host.
	Host HostMode
	// Now is when a schedule's next FireWithinYears begin; nil: time.Now.
	Now func() time.Time
}

// HostMode says what becomes of the problems found on this host: a job's
// user or group that does not exist, a workdir that is not a directory,
// a program (args[0]) or shell that is not there or not executable. They
// depend on the host that loads the crontab, not on the file: validate
// reports them as errors; the daemon, at its start, logs them as warnings
// and runs every job, whose runs fail as they would have (docs/spec.md#s6-cli).
type HostMode int

// Host modes.
const (
	// HostSkip checks nothing of the host (next, status, a reload).
	HostSkip HostMode = iota
	// HostErrors reports each host problem as an Error (validate).
	HostErrors
	// HostWarnings reports each host problem as a warning (run).
	HostWarnings
)

// Limits of what a job can start with.
const (
	// MaxArgBytes is the most bytes one argument (a command, an element
	// of args) or one env entry (NAME=value) may have: Linux's
	// MAX_ARG_STRLEN, 131072 bytes counting the terminating NUL. execve
	// refuses a longer one, so every run would fail to start.
	MaxArgBytes = 131072 - 1
	// MaxArgvBytes bounds the argv and the env: entries of one job
	// together, each string counted with its NUL and its 8-byte pointer.
	// Linux allows argv and environment together a quarter of the stack
	// limit: 2 MiB under the usual 8 MiB. Half of that is left for the
	// environment a job inherits and the ANARCHON_* variables.
	MaxArgvBytes = 1 << 20
	// FireWithinYears: a schedule with no slot within this many years of
	// the load is refused as one that never fires.
	FireWithinYears = 5
	// RootPath and UserPath are the PATH a job starts with, as cron's:
	// root's includes the sbin directories. A job's env: or
	// inheritEnv: [PATH] replaces it.
	RootPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	UserPath = "/usr/local/bin:/usr/bin:/bin"
)

// DefaultPath is the PATH a job of a root (or another) user starts with.
func DefaultPath(root bool) string {
	if root {
		return RootPath
	}
	return UserPath
}

// jobPath is the PATH a bare program name of j is looked up in, as the
// runner builds it: the job's env:, else the inherited PATH (this
// process's, which validate shares with the daemon it checks for), else
// the default PATH of the job's user (this process's user without user:).
func jobPath(j Job) string {
	if p, ok := j.Env["PATH"]; ok {
		return p
	}
	if slices.Contains(j.InheritEnv, "PATH") {
		return os.Getenv("PATH")
	}
	root := os.Geteuid() == 0
	if j.User != "" {
		u, err := user.Lookup(j.User)
		if err != nil {
			u, err = user.LookupId(j.User)
		}
		root = err == nil && u.Uid == "0"
	}
	return DefaultPath(root)
}

// preflight checks what would make every run of a job fail: a schedule
// that never fires and arguments the kernel refuses (always), and the
// job's user, group, workdir, program and shell on this host (as
// p.opt.Checks.Host says). jobs, p.jobs and infos are in the same order.
func (p *parser) preflight(jobs []Job, infos []jobInfo) {
	shells := newShellProblems()
	for i, j := range jobs {
		vals := p.jobs[i].vals
		if in := infos[i]; in.sched != nil {
			p.checkFires(in.sched, in.schedVal)
		}
		p.checkArgSizes(j, vals)
		p.checkHookSizes(infos[i].pol)
		if p.opt.Checks.Host == HostSkip {
			continue
		}
		p.checkHostJob(j, vals)
		if len(j.Args) == 0 && j.Command != "" || hasHooks(j) {
			shells.check(p, j, infos[i].pol.shell)
		}
	}
	shells.report(p)
}

// hasHooks reports whether j has a hook, which its shell runs.
func hasHooks(j Job) bool { return j.OnFailure != "" || j.OnSuccess != "" || j.OnMissed != "" }

// checkHookSizes refuses a hook command longer than MaxArgBytes, where it
// is set (a job's, or defaults', reported once: errors are deduplicated).
func (p *parser) checkHookSizes(pol policy) {
	for _, h := range []setting[string]{pol.onFailure, pol.onSuccess, pol.onMissed} {
		if h.at != nil && len(h.val) > MaxArgBytes {
			p.errorf(h.at, "hook is %d bytes; the shell gets it as one argument, at most %d bytes (Linux's MAX_ARG_STRLEN): every hook would fail to start; put the script in a file and run that", len(h.val), MaxArgBytes)
		}
	}
}

// checkFires refuses a schedule with no slot within FireWithinYears.
func (p *parser) checkFires(s schedule.Schedule, at *value) {
	now := time.Now
	if p.opt.Checks.Now != nil {
		now = p.opt.Checks.Now
	}
	t := now()
	next := s.Next(t)
	if !next.IsZero() && !next.After(t.AddDate(FireWithinYears, 0, 0)) {
		return
	}
	why := schedule.NoDay(s)
	if why == "" {
		why = "no slot in the next 28 years; check the day and month fields"
		if far := farNext(s, t); !far.IsZero() {
			why = fmt.Sprintf("its next slot is %s", far.Format(time.RFC3339))
		}
	}
	p.errorf(at, "schedule %q never fires within %d years: %s", s.String(), FireWithinYears, why)
}

// farNext is the first slot of s after t within about 28 years (Next
// looks eight years ahead at a time), or the zero Time.
func farNext(s schedule.Schedule, t time.Time) time.Time {
	for range 4 {
		if n := s.Next(t); !n.IsZero() {
			return n
		}
		t = t.AddDate(8, 0, 0)
	}
	return time.Time{}
}

// checkArgSizes refuses an argument or env entry longer than MaxArgBytes,
// else an argv and env together over MaxArgvBytes.
func (p *parser) checkArgSizes(j Job, vals map[string]*value) {
	const why = "execve refuses it, so every run would fail to start"
	limit := fmt.Sprintf("at most %d bytes (Linux's MAX_ARG_STRLEN, 131072 with the terminating NUL)", MaxArgBytes)
	before := len(p.errs) // the total is not reported again after one too long
	argv, at := j.Args, vals["args"]
	switch {
	case len(j.Args) > 0:
		for i, a := range j.Args {
			if len(a) > MaxArgBytes {
				p.errNode(at.node.Content[i], j.Name, fmt.Sprintf("%s[%d]", at.field, i),
					"argument is %d bytes; one argument may be %s: %s; pass the data in a file", len(a), limit, why)
			}
		}
	case j.Command != "":
		argv, at = []string{j.Shell, "-c", j.Command}, vals["command"]
		if len(j.Command) > MaxArgBytes {
			p.errorf(at, "command is %d bytes; the shell gets it as one argument, %s: %s; put the script in a file and run that", len(j.Command), limit, why)
		}
	default:
		return
	}
	total := 0
	for _, a := range argv {
		total += len(a) + 1 + 8
	}
	for k, v := range j.Env {
		total += len(k) + 1 + len(v) + 1 + 8
		if n := len(k) + 1 + len(v); n > MaxArgBytes {
			line, col := envKeyAt(vals["env"], k)
			p.errAt(&Error{Line: line, Column: col, Job: j.Name, Field: vals["env"].field + "." + fieldKey(k),
				Msg: fmt.Sprintf("%s=... is %d bytes; one variable may be %s: %s; pass the value in a file", k, n, limit, why)})
		}
	}
	if total > MaxArgvBytes && len(p.errs) == before {
		p.errorf(at, "the job's arguments and env take %d bytes; anarchon allows at most %d (with each string's NUL and pointer), half of what Linux gives argv and environment together under the usual 8 MiB stack: pass the data in a file", total, MaxArgvBytes)
	}
}

// envKeyAt is the place of variable k in env's mapping: its key's, when
// written there, else the mapping's (k came through a merge key).
func envKeyAt(env *value, k string) (line, col int) {
	if n := resolve(env.node); n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if key := resolve(n.Content[i]); key != nil && key.Value == k {
				return key.Line, key.Column
			}
		}
	}
	return env.line, env.col
}

// checkListen accepts an empty address (metrics disabled) or host:port
// whose port net.Listen takes: a number 0-65535 or a service name.
func checkListen(s string) string {
	const want = "write host:port such as 127.0.0.1:9464 or :9464, or an empty string to disable the endpoints"
	if s == "" {
		return ""
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil || port == "" {
		return fmt.Sprintf("must be host:port such as 127.0.0.1:9464 or :9464, or empty to disable; not %q", s)
	}
	num := strings.TrimLeft(port, "+-")
	if num != "" && strings.Trim(num, "0123456789") == "" {
		n, err := strconv.ParseUint(num, 10, 16)
		if err != nil || strings.HasPrefix(port, "-") && n != 0 {
			return fmt.Sprintf("port %s of %q is out of range 0-65535: %s", port, s, want)
		}
		return ""
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Sprintf("port %q of %q is neither a number 0-65535 nor a known service name: %s", port, s, want)
	}
	return ""
}

// hostf reports a problem found on this host at a setting.
func (p *parser) hostf(at *value, format string, args ...any) {
	p.hostErr(&Error{Line: at.line, Column: at.col, Env: at.env, Job: at.job, Field: at.field, Msg: fmt.Sprintf(format, args...)})
}

// hostErr reports a problem found on this host: an error or a warning, as
// p.opt.Checks.Host says.
func (p *parser) hostErr(e *Error) {
	e.File = p.file
	if p.opt.Checks.Host == HostWarnings {
		p.warns = append(p.warns, e.Error())
		return
	}
	p.errs = append(p.errs, e)
}

// checkHostJob checks a job's user, group, workdir and program (args[0]).
func (p *parser) checkHostJob(j Job, vals map[string]*value) {
	if v := vals["user"]; v != nil && j.User != "" {
		if msg := lookupUser(j.User); msg != "" {
			p.hostf(v, "%s", msg)
		}
	}
	if v := vals["group"]; v != nil && j.Group != "" {
		if msg := lookupGroup(j.Group); msg != "" {
			p.hostf(v, "%s", msg)
		}
	}
	dir := ""
	if v := vals["workdir"]; v != nil && filepath.IsAbs(j.Workdir) {
		if msg := checkDir(j.Workdir); msg != "" {
			p.hostf(v, "%s", msg)
		} else {
			dir = j.Workdir
		}
	}
	if v := vals["args"]; v != nil && len(j.Args) > 0 {
		if msg := findProgram(j.Args[0], jobPath(j), dir, "program"); msg != "" {
			n := v.node.Content[0]
			p.hostErr(&Error{Line: n.Line, Column: n.Column, Job: j.Name, Field: v.field + "[0]", Msg: msg})
		}
	}
}

// lookupUser looks a user up by name, or by uid when the name is a number
// no user has, as the runner does; it returns the problem or "".
func lookupUser(name string) string {
	return lookupAccount[user.UnknownUserError, user.UnknownUserIdError]("user", name,
		func(n string) error { _, err := user.Lookup(n); return err },
		func(id string) error { _, err := user.LookupId(id); return err })
}

// lookupGroup is lookupUser for a group.
func lookupGroup(name string) string {
	return lookupAccount[user.UnknownGroupError, user.UnknownGroupIdError]("group", name,
		func(n string) error { _, err := user.LookupGroup(n); return err },
		func(id string) error { _, err := user.LookupGroupId(id); return err })
}

// lookupAccount is lookupUser and lookupGroup: what is "user" or "group",
// byName and byID its look-ups, whose errors for one that does not exist
// are an Unknown and an UnknownID.
func lookupAccount[Unknown, UnknownID error](what, name string, byName, byID func(string) error) string {
	err := byName(name)
	var unknown Unknown
	if _, perr := strconv.ParseUint(name, 10, 32); err != nil && perr == nil && errors.As(err, &unknown) {
		err = byID(name)
	}
	switch {
	case err == nil:
		return ""
	case errors.As(err, &unknown) || errors.As(err, new(UnknownID)):
		return fmt.Sprintf("unknown %s %q on this host: every run would fail; create the %s, or name one that exists", what, name, what)
	}
	return fmt.Sprintf("cannot look up %s %q: %v", what, name, err)
}

// checkDir returns the problem with a job's workdir, or "".
func checkDir(dir string) string {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("directory %q does not exist on this host: every run would fail; create it, or fix the path", dir)
	case err != nil:
		return fmt.Sprintf("cannot use directory %q: %v", dir, err)
	case !fi.IsDir():
		return fmt.Sprintf("%q is not a directory: every run would fail; name a directory", dir)
	}
	return ""
}

// findProgram returns the problem with running name (what: "program" or
// "shell") as the runner would, or "": a name with a slash is a path,
// relative to dir (not checked when dir is "": the daemon's own working
// directory); a bare name is looked up in path. The file must be a regular
// file with an execute bit.
func findProgram(name, path, dir, what string) string {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			if dir == "" {
				return ""
			}
			p = filepath.Join(dir, p)
		}
		return checkExecutable(p, what)
	}
	var found string
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) {
			if dir == "" {
				continue
			}
			p = filepath.Join(dir, p)
		}
		if checkExecutable(p, what) == "" {
			return ""
		}
		if fi, err := os.Stat(p); err == nil && found == "" && !fi.IsDir() {
			found = p
		}
	}
	msg := fmt.Sprintf("%s %q is not found in the job's PATH (%s) on this host: every run would fail; install it, write its full path, or set env: PATH", what, name, path)
	if found != "" {
		msg += fmt.Sprintf(" (%s exists but is not an executable file)", found)
	}
	return msg
}

// checkExecutable returns the problem with executing the file at p, or "".
func checkExecutable(p, what string) string {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("%s %q does not exist on this host: every run would fail; install it, or fix the path", what, p)
	case err != nil:
		return fmt.Sprintf("cannot use %s %q: %v", what, p, err)
	case fi.IsDir():
		return fmt.Sprintf("%s %q is a directory: every run would fail; name the executable file", what, p)
	case !fi.Mode().IsRegular():
		return fmt.Sprintf("%s %q is not a regular file: every run would fail; name the executable file", what, p)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf("%s %q is not executable (mode %04o): every run would fail; chmod +x it", what, p, fi.Mode().Perm())
	}
	return ""
}

// shellProblems collects the problems with the shells of command jobs. A
// job's own shell is reported at it; a shell inherited from defaults (or
// built in) once, with the jobs that use it.
type shellProblems struct {
	byKey map[string]*shellProblem
	order []*shellProblem
}

type shellProblem struct {
	at   *value
	msg  string
	jobs []string
}

func newShellProblems() *shellProblems {
	return &shellProblems{byKey: map[string]*shellProblem{}}
}

func (s *shellProblems) check(p *parser, j Job, shell setting[string]) {
	msg := findProgram(shell.val, jobPath(j), "", "shell")
	if msg == "" {
		return
	}
	if shell.jobLevel() {
		p.hostf(shell.at, "%s", msg)
		return
	}
	key := fmt.Sprintf("%p\x00%s", shell.at, msg)
	sp := s.byKey[key]
	if sp == nil {
		sp = &shellProblem{at: shell.at, msg: msg}
		s.byKey[key] = sp
		s.order = append(s.order, sp)
	}
	sp.jobs = append(sp.jobs, j.Name)
}

func (s *shellProblems) report(p *parser) {
	for _, sp := range s.order {
		if sp.at != nil {
			p.hostf(sp.at, "%s (%s)", sp.msg, jobList(sp.jobs))
			continue
		}
		p.hostf(&value{field: "defaults.shell"}, "the built-in %s; set defaults.shell (%s)", sp.msg, jobList(sp.jobs))
	}
}
