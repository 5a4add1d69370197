package runner

import (
	"errors"

	"github.com/anarchon/anarchon/internal/claim"
)

// fencedMsg is the log message of a fenced store answer err: taken when
// another attempt owns the run (claim.ErrFenced), or the message of a
// claim the store lost (claim.ErrRunLost: no backup took it over; the
// store forgot it, as after a failover to a replica that had not
// received it), which starts with prefix.
func fencedMsg(err error, prefix, taken string) string {
	if errors.Is(err, claim.ErrRunLost) {
		return prefix + "the store has lost this attempt's claim (its record is gone, or the slot was claimed anew: a failover to a replica that had not received it, or a restore), so another instance may run the slot again"
	}
	return prefix + taken
}
