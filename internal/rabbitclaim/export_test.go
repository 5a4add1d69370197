package rabbitclaim

import (
	"context"

	"github.com/anarchon/anarchon/internal/claim"
)

// SetHooks installs test hooks on b; call it before b's first claim.
// declared sees every gate a claim or a preparation declared; beforePublish runs between a
// gate's declare and the publish of the claim.
func SetHooks(b *Backend, declared, beforePublish func(queue string)) {
	b.hooks = hooks{declared: declared, beforePublish: beforePublish}
}

// FlushHistory waits until every history record b queued before it is
// confirmed (the writer writes in order).
func (b *Backend) FlushHistory(ctx context.Context) error {
	return b.hist.write(ctx, record{Type: recordMarker, ID: string(claim.NewToken())})
}

// Check is what validate prints about the broker at url.
func Check(ctx context.Context, url string) (string, error) {
	return check(ctx, Settings{URL: url})
}
