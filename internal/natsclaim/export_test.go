package natsclaim

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaderGetMsg is leaderGetMsg.
func (b *Backend) LeaderGetMsg(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	return b.leaderGetMsg(ctx, seq)
}

// IsInProcess is isInProcess.
var IsInProcess = isInProcess
