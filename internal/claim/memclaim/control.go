package memclaim

import (
	"context"
	"fmt"
	"slices"

	"github.com/anarchon/anarchon/internal/claim"
)

// Controls returns a copy of every control record.
func (b *Backend) Controls(ctx context.Context) ([]claim.Control, error) {
	if err := b.lock(ctx, nil); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if b.controlErr != nil {
		return nil, b.controlErr
	}
	out := make([]claim.Control, 0, len(b.controls))
	for _, c := range b.controls {
		c.Triggers = slices.Clone(c.Triggers)
		out = append(out, c)
	}
	return out, nil
}

// SetControl writes c if the job's record is at prevVersion; the new
// version is the old one plus 1.
func (b *Backend) SetControl(ctx context.Context, c claim.Control, prevVersion int64) (claim.Control, error) {
	if err := b.lock(ctx, c.Check()); err != nil {
		return claim.Control{}, err
	}
	defer b.mu.Unlock()
	if b.controlErr != nil {
		return claim.Control{}, b.controlErr
	}
	if cur := b.controls[c.Job].Version; cur != prevVersion {
		return claim.Control{}, fmt.Errorf("set control of %s at version %d (stored %d): %w", c.Job, prevVersion, cur, claim.ErrConflict)
	}
	if b.controls == nil {
		b.controls = map[string]claim.Control{}
	}
	c.Version = prevVersion + 1
	if len(c.Triggers) == 0 {
		c.Triggers = nil
	}
	c.Triggers = slices.Clone(c.Triggers)
	b.controls[c.Job] = c
	return c, nil
}

// FailControls makes Controls and SetControl fail with err until it is
// called with nil: a store that does not answer, for tests.
func (b *Backend) FailControls(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.controlErr = err
}
