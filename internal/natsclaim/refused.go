package natsclaim

import (
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/anarchon/anarchon/internal/claim"
)

// refusal returns err as a claim.PermanentError when it is the server's
// refusal that no re-send changes (docs/write-a-backend.md#classify): the
// login refused, expired or revoked, or JetStream off for the account.
// Anything else is returned as it is.
func refusal(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return claim.Permanent("nats", err, "the server refused the login",
			"correct the user and password, token or credentials of backend.nats.url (or passwordFile), or the server's authorization block")
	case errors.Is(err, nats.ErrPermissionViolation):
		return claim.Permanent("nats", err, "the server refused the user a subject anarchond needs",
			"allow the user to publish and subscribe to the namespace's subjects (<namespace>.>), $JS.API.> and _INBOX.>")
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return claim.Permanent("nats", err, "JetStream is not enabled for the account",
			"enable JetStream on the server (jetstream {}) and for the user's account")
	}
	return err
}

// streamRefusal is the error of a stream anarchond cannot use as it
// exists (its subjects, limits or mode; see checkStream), or whose
// subjects another stream takes: a refusal no re-send changes. err names
// the stream and its fix.
func streamRefusal(err error) error {
	return claim.Permanent("nats", err, "the stream exists with settings anarchond cannot use, or another stream takes its subjects",
		"change the stream or the setting as the message says (nats stream edit), or name another stream or namespace")
}
