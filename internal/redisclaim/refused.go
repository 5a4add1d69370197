package redisclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/anarchon/anarchon/internal/claim"
)

// refusals is a client hook that classifies the server's refusals that no
// re-send changes (docs/write-a-backend.md#classify): every command's
// error, in a pipeline too, and the connection's AUTH at its start, so
// that each caller sees a claim.PermanentError that still wraps the
// redis.Error.
type refusals struct{ ns string }

func (r refusals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r refusals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if p := r.classify(err); p != err { //nolint:errorlint // identity: did classify replace err?
			cmd.SetErr(p)
			return p
		}
		return err
	}
}

func (r refusals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				if p := r.classify(e); p != e { //nolint:errorlint // identity: did classify replace e?
					cmd.SetErr(p)
				}
			}
		}
		return r.classify(err)
	}
}

// classify returns err as a claim.PermanentError when it is the server's
// NOPERM (an ACL user without a command or a key of the namespace),
// WRONGPASS or NOAUTH (the login), or WRONGTYPE (a key of the namespace
// that something else wrote); otherwise err itself.
func (r refusals) classify(err error) error {
	var reply redis.Error
	if err == nil || !errors.As(err, &reply) || claim.IsPermanent(err) {
		return err
	}
	msg := strings.TrimPrefix(reply.Error(), "ERR ")
	switch {
	case strings.HasPrefix(msg, "NOPERM"):
		return claim.Permanent("redis", err, "the ACL user may not run a command, or use a key, that anarchond needs",
			fmt.Sprintf("give the URL's user the namespace's keys and the commands: ACL SETUSER <user> ~%s:* ~{%s:* +@read +@write +@scripting +@stream +@connection +info +time (and ACL SAVE or the users file)", r.ns, r.ns))
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "invalid password"):
		return claim.Permanent("redis", err, "the server refused the login",
			"correct the user and password of backend.redis.url (or passwordFile), or the server's ACL user")
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return claim.Permanent("redis", err, fmt.Sprintf("a key of namespace %q holds another type than anarchond writes: something else uses the namespace", r.ns),
			"give anarchond a namespace of its own (namespace:), or delete the keys others wrote under it")
	}
	return err
}
