package store

import (
	"errors"
	"fmt"

	"github.com/anarchon/anarchon/internal/claim"
)

// CheckClaimOnly refuses a claim no claim-only store can decide: one
// without a token, with a negative maxLate, or without the instance's
// clock reading (a claim-only store checks late with Request.Now). A
// store checks what it requires of the job and the slot first.
func CheckClaimOnly(req claim.Request) error {
	switch {
	case req.Token == "":
		return errors.New("empty token")
	case req.MaxLate < 0:
		return fmt.Errorf("negative maxLate %v", req.MaxLate)
	case req.Now.IsZero():
		return errors.New("request has no instance clock reading (Request.Now): a claim-only backend checks late with it")
	}
	return nil
}
