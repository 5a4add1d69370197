package rabbitclaim

import (
	"errors"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/anarchon/anarchon/internal/claim"
)

// refusal returns shown (err as the backend words it, passwords scrubbed)
// as a claim.PermanentError when err is the broker's refusal that no
// re-send changes: a login or a vhost refused (403 ACCESS_REFUSED, 530
// NOT_ALLOWED), or an operation on the backend's queues refused to its user
// (403). Anything else is returned as shown.
func refusal(shown, err error) error {
	var ae *amqp.Error
	if err == nil || !errors.As(err, &ae) {
		return shown
	}
	switch {
	case ae.Code == amqp.AccessRefused && !ae.Server:
		// The handshake's: the client's sentinels ErrCredentials,
		// ErrVhost and ErrSASL.
		return claim.Permanent("rabbitmq", shown, "the broker refused the login or the vhost (403 ACCESS_REFUSED)",
			"correct the user and password of backend.rabbitmq.url (or passwordFile), and give the user the vhost: rabbitmqctl set_permissions -p <vhost> <user> '^anarchon' '^anarchon' '^anarchon'")
	case ae.Code == amqp.AccessRefused:
		return claim.Permanent("rabbitmq", shown, "the broker refused the user an operation on anarchond's queues (403 ACCESS_REFUSED)",
			"give the user configure, write and read permissions on the namespace's queues: rabbitmqctl set_permissions -p <vhost> <user> '^anarchon' '^anarchon' '^anarchon' (the regexps match the namespace)")
	case ae.Code == amqp.NotAllowed:
		return claim.Permanent("rabbitmq", shown, "the broker does not allow the vhost (530 NOT_ALLOWED)",
			"create the vhost of backend.rabbitmq.url (rabbitmqctl add_vhost) or name an existing one, and give the user permissions on it")
	}
	return shown
}

// conflictRefusal is the error c of a queue that exists with other
// arguments (ErrQueueConflict): a refusal no re-send changes. Its cause and
// fix leave the queue's name to c, so that the gates of many slots refused
// alike are reported once.
func conflictRefusal(c error) error {
	return claim.Permanent("rabbitmq", c, "a queue exists with other arguments than this anarchond declares",
		"give every instance the same backend.rabbitmq settings, or delete the queue (rabbitmqctl delete_queue <name>) or use another namespace")
}
