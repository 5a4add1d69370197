package store

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

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

// Forget bounds a store's memory of the claims it won, m: when m holds
// limit entries or more, the older half of them, by slot, is dropped, to
// make room for one more.
func Forget[K comparable, V any](m map[K]V, limit int, slot func(K) int64) {
	if len(m) < limit {
		return
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(x, y K) int { return cmp.Compare(slot(x), slot(y)) })
	for _, k := range keys[:len(keys)/2] {
		delete(m, k)
	}
}
