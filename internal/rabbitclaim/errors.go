package rabbitclaim

import (
	"errors"
	"fmt"
	"regexp"

	amqp "github.com/rabbitmq/amqp091-go"
)

// inequivalentRE parses the reason of RabbitMQ's 406 for a re-declare with
// other arguments:
//
//	PRECONDITION_FAILED - inequivalent arg 'x-expires' for queue 'q' in
//	vhost '/': received '120000' but current is '60000'
var inequivalentRE = regexp.MustCompile(`inequivalent arg '([^']+)' for queue '[^']*' in vhost '[^']*': (.*)$`)

// inequivalentArg reports whether err is a 406 PRECONDITION_FAILED and, when
// the broker says, the differing argument and the broker's detail.
func inequivalentArg(err error) (arg, detail string, ok bool) {
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.PreconditionFailed {
		return "", "", false
	}
	if m := inequivalentRE.FindStringSubmatch(ae.Reason); m != nil {
		return m[1], m[2], true
	}
	return "", ae.Reason, true
}

// conflictError is the error of a 406 on the declare of queue: it names the
// queue and the differing argument, and is ErrQueueConflict and a
// claim.PermanentError.
func conflictError(queue string, err error) error {
	arg, detail, _ := inequivalentArg(err)
	what := detail
	if arg != "" {
		what = arg + ": " + detail
	}
	msg := fmt.Sprintf("queue %q exists with different arguments (%s): delete it or use another namespace", queue, what)
	if arg == "x-expires" {
		msg += " (is backend.rabbitmq.slotTtlMs the same on every instance?)"
	}
	return conflictRefusal(&queueConflict{msg: msg})
}

// queueConflict is a 406 on a declare; errors.Is(err, ErrQueueConflict).
type queueConflict struct{ msg string }

func (e *queueConflict) Error() string { return e.msg }

func (e *queueConflict) Is(target error) bool { return target == ErrQueueConflict }
