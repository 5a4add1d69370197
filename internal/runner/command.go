package runner

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"

	"github.com/anarchon/anarchon/internal/supervise"
)

// launch is a prepared command: the job's argv and environment, and the
// supervisor's spec.
type launch struct {
	argv []string
	env  []string
	spec supervise.Spec
	rec  attemptRecord // what the attempt's record says of it
}

// prepare resolves e's command, environment, user and workdir.
func (r *Runner) prepare(e Execution) (launch, error) {
	job := e.Job
	name := jobName(e)
	var l launch
	switch {
	case len(job.Args) > 0:
		l.argv = slices.Clone(job.Args)
	case job.Command != "":
		shell := job.Shell
		if shell == "" {
			shell = "/bin/sh"
		}
		l.argv = []string{shell, "-c", job.Command}
	default:
		return l, fmt.Errorf("job %q: no command", name)
	}
	if r.Guard == nil && (len(r.Supervisor) == 0 || r.Supervisor[0] == "") {
		return l, errors.New("runner: no supervisor command configured")
	}
	if job.Workdir != "" {
		fi, err := os.Stat(job.Workdir)
		if err != nil {
			return l, fmt.Errorf("job %q: workdir: %w", name, err)
		}
		if !fi.IsDir() {
			return l, fmt.Errorf("job %q: workdir %q is not a directory", name, job.Workdir)
		}
	}
	l.spec = supervise.Spec{Parent: os.Getpid()}
	u, err := r.runAs(name, job.User, &l.spec)
	if err != nil {
		return l, err
	}
	if job.Group != "" {
		if err := runAsGroup(name, job.Group, u, &l.spec); err != nil {
			return l, err
		}
	}
	id := identityOf(u)
	l.spec.Dir = workdirOf(job.Workdir, id)
	l.env = r.environ(e, id)
	return l, nil
}

// runAs resolves the job's user into spec's credentials. It returns the user
// when the job runs as another user than the daemon's, nil otherwise.
func (r *Runner) runAs(job, name string, spec *supervise.Spec) (*user.User, error) {
	if name == "" {
		return nil, nil
	}
	u, err := lookupNameOrID[*user.User, user.UnknownUserError](name, user.Lookup, user.LookupId)
	if err != nil {
		return nil, fmt.Errorf("job %q: user %q: %w", job, name, err)
	}
	geteuid := r.geteuid
	if geteuid == nil {
		geteuid = os.Geteuid
	}
	if euid := geteuid(); euid != 0 {
		if u.Uid == strconv.Itoa(euid) {
			return nil, nil // the daemon's own user: nothing to change
		}
		return nil, fmt.Errorf("job %q: user %q requires the daemon to run as root", job, name)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("job %q: user %q: uid %q: %w", job, name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("job %q: user %q: gid %q: %w", job, name, u.Gid, err)
	}
	uid32 := uint32(uid)
	spec.UID, spec.GID = &uid32, uint32(gid)
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("job %q: user %q: groups: %w", job, name, err)
	}
	for _, g := range gids {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("job %q: user %q: group %q: %w", job, name, g, err)
		}
		spec.Groups = append(spec.Groups, uint32(n))
	}
	return u, nil
}

// runAsGroup makes group (a name or a gid) the primary group of a job that
// runs as another user (u, resolved by runAs; nil when the daemon runs the
// job as itself, where a group it does not have is refused).
func runAsGroup(job, name string, u *user.User, spec *supervise.Spec) error {
	g, err := lookupNameOrID[*user.Group, user.UnknownGroupError](name, user.LookupGroup, user.LookupGroupId)
	if err != nil {
		return fmt.Errorf("job %q: group %q: %w", job, name, err)
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return fmt.Errorf("job %q: group %q: gid %q: %w", job, name, g.Gid, err)
	}
	if u == nil {
		if int(gid) != os.Getgid() {
			return fmt.Errorf("job %q: group %q requires the daemon to run as root", job, name)
		}
		return nil
	}
	spec.GID = uint32(gid)
	return nil
}

// lookupNameOrID looks name (a user or a group) up by name, and, when no
// such name is known and name is a number, by id: byName and byID are the
// os/user lookups, Unknown the error byName answers for an unknown name.
func lookupNameOrID[T any, Unknown error](name string, byName, byID func(string) (T, error)) (T, error) {
	v, err := byName(name)
	var unknown Unknown
	if _, perr := strconv.ParseUint(name, 10, 32); perr == nil && errors.As(err, &unknown) {
		return byID(name)
	}
	return v, err
}
