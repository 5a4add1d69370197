package config

import (
	"fmt"
	"strings"

	"github.com/anarchon/anarchon/internal/store"
)

// daemonOnlyEnv are variables of the daemon's environment that inheritEnv
// refuses besides ANARCHON_*: systemd's channel to the daemon, which a job
// must not use in the daemon's name.
var daemonOnlyEnv = map[string]bool{"NOTIFY_SOCKET": true, "WATCHDOG_USEC": true, "WATCHDOG_PID": true}

// asEnvNames reads inheritEnv: a list of names of the daemon's environment
// variables that the job gets (docs/spec.md#s6-jobs). Each must be a valid
// variable name and none may be the daemon's own: ANARCHON_* are its
// settings (a store's URL or DSN with its password) or set per run.
func (p *parser) asEnvNames(v *value) ([]string, bool) {
	names, ok := p.asStrings(v)
	if !ok {
		return nil, false
	}
	for i, name := range names {
		n := resolve(v.node.Content[i])
		field := fmt.Sprintf("%s[%d]", v.field, i)
		switch {
		case !envNameRE.MatchString(name):
			p.errNode(n, v.job, field, "bad variable name %q: use letters, digits and _, not starting with a digit", store.Short(name))
			ok = false
		case strings.HasPrefix(name, envPrefix+"_"):
			p.errNode(n, v.job, field, "%s is the daemon's own (its settings, which may hold a store's password, or set for every run): "+
				"it is never passed to a job; give the job what it needs in env", name)
			ok = false
		case daemonOnlyEnv[name]:
			p.errNode(n, v.job, field, "%s is systemd's channel to the daemon and is never passed to a job", name)
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	return names, true
}
