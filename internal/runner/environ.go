package runner

import (
	"bufio"
	"maps"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/supervise"
)

// defaultShell is SHELL when the user's passwd entry names none.
const defaultShell = "/bin/sh"

// passwdFile is where a user's login shell is looked up (os/user does not
// tell it).
var passwdFile = "/etc/passwd"

// identity is who a job runs as, from the passwd entry of the job's user
// (or the daemon's own user, without user:).
type identity struct {
	uid   string
	name  string
	home  string
	shell string
}

// identityOf returns the identity of u, the job's user as runAs resolved
// it, or, when u is nil, of the daemon's own user. A daemon user without a
// passwd entry gets its uid as name and / as home.
func identityOf(u *user.User) identity {
	if u == nil {
		cur, err := user.Current()
		if err != nil {
			uid := strconv.Itoa(os.Getuid())
			return identity{uid: uid, name: uid, home: "/", shell: defaultShell}
		}
		u = cur
	}
	return identity{uid: u.Uid, name: u.Username, home: u.HomeDir, shell: shells.of(u.Username, u.Uid)}
}

// shells caches loginShell by user for as long as passwdFile is the same
// file, unchanged: a job's start then costs a stat of the file, not a read
// of it.
var shells shellCache

// shellCache is loginShell's answers, valid while the file stat describes
// is unchanged.
type shellCache struct {
	mu   sync.Mutex
	path string
	stat os.FileInfo
	by   map[string]string // user name and uid -> login shell
}

// of is loginShell(name, uid), from the cache when passwdFile has not
// changed since it was read.
func (c *shellCache) of(name, uid string) string {
	fi, err := os.Stat(passwdFile)
	if err != nil {
		return loginShell(name, uid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stat == nil || c.path != passwdFile || !os.SameFile(c.stat, fi) ||
		!c.stat.ModTime().Equal(fi.ModTime()) || c.stat.Size() != fi.Size() {
		c.path, c.stat, c.by = passwdFile, fi, map[string]string{}
	}
	key := name + ":" + uid
	shell, ok := c.by[key]
	if !ok {
		shell = loginShell(name, uid)
		c.by[key] = shell
	}
	return shell
}

// loginShell is the shell of name's entry (with uid) in passwdFile, or
// defaultShell when there is no such entry (a user from another source,
// such as LDAP) or it names no shell.
func loginShell(name, uid string) string {
	f, err := os.Open(passwdFile)
	if err != nil {
		return defaultShell
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// name:password:uid:gid:gecos:home:shell
		fields := strings.Split(sc.Text(), ":")
		if len(fields) == 7 && fields[0] == name && fields[2] == uid && fields[6] != "" {
			return fields[6]
		}
	}
	return defaultShell
}

// workdirOf is the job's working directory: its workdir, else its user's
// home, else (no such directory) /.
func workdirOf(workdir string, id identity) string {
	if workdir != "" {
		return workdir
	}
	if fi, err := os.Stat(id.home); err == nil && fi.IsDir() && id.home != "" {
		return id.home
	}
	return "/"
}

// environ builds the job's environment, a clean one as cron's
// (docs/spec.md#s6-jobs): HOME, LOGNAME, USER and SHELL of id, the default
// PATH; then the variables of BaseEnv (the daemon's) that the job's
// inheritEnv names; then the job's env: map; then the ANARCHON_* variables
// of the run. Later entries replace earlier ones. Nothing else of the
// daemon's environment reaches the job.
func (r *Runner) environ(e Execution, id identity) []string {
	path := config.DefaultPath(id.uid == "0")
	env := []string{"HOME=" + id.home, "LOGNAME=" + id.name, "USER=" + id.name, "SHELL=" + id.shell, "PATH=" + path}
	for _, k := range e.Job.InheritEnv {
		if v, ok := inherited(r.BaseEnv, k); ok {
			env = setenv(env, k, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Job.Env)) {
		env = setenv(env, k, e.Job.Env[k])
	}
	slot, ms := slotOf(e)
	kind, attempt := "scheduled", e.Fence.Attempt
	if t := e.Trigger; t != nil {
		// docs/spec.md#s6-trigger: a retry carries the slot it retries,
		// and counts its attempts on from that run's.
		kind, attempt = t.Kind, attempt+t.Attempt-1
		if t.Kind == claim.TriggerRetry && t.Of != 0 {
			slot, ms = time.UnixMilli(t.Of).UTC(), t.Of
		}
	}
	env = setenv(env, "ANARCHON_JOB", jobName(e))
	env = setenv(env, "ANARCHON_SLOT", slotString(slot))
	env = setenv(env, "ANARCHON_SLOT_MS", strconv.FormatInt(ms, 10))
	env = setenv(env, "ANARCHON_ATTEMPT", strconv.Itoa(attempt))
	env = setenv(env, "ANARCHON_KIND", kind)
	env = setenv(env, "ANARCHON_TOKEN", string(e.Fence.Token))
	env = setenv(env, "ANARCHON_INSTANCE", r.Instance)
	return env
}

// inherited returns the value of k in the daemon's environment base (the
// last entry wins, as in os/exec). The daemon's own variables, ANARCHON_*
// (its settings may hold a store's password) and the supervisor's, are
// never inherited, whatever the crontab says.
func inherited(base []string, k string) (string, bool) {
	if strings.HasPrefix(k, "ANARCHON_") || k == supervise.Env {
		return "", false
	}
	prefix := k + "="
	for i := len(base) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(base[i], prefix); ok {
			return v, true
		}
	}
	return "", false
}

// setenv sets k=v in env, removing earlier entries of k.
func setenv(env []string, k, v string) []string {
	prefix := k + "="
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, prefix) })
	return append(env, prefix+v)
}
