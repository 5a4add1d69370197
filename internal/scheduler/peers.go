package scheduler

import (
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
)

// peerTTL is how long an instance counts a peer it has not seen since: one
// that stopped is ranked for that long, and on the slots where it ranks
// first the others claim one step late.
const peerTTL = 10 * time.Minute

// maxPeers bounds the peers remembered (a fleet larger than this spreads
// with the uniform delay of the instances it does not know).
const maxPeers = 256

// peers are the other instances this one has seen holding runs of the
// store: the holder that a claim's answer names (claim.Result.Holder:
// lease backends and NATS). Stores that name no winner (RabbitMQ, Redis's
// claim-only strategies) leave their instances without peers.
type peers struct {
	log  *zap.Logger // nil: silent
	mu   sync.Mutex
	seen map[string]time.Time
}

// saw records that instance held a run at now.
func (p *peers) saw(instance string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]time.Time{}
	}
	if _, ok := p.seen[instance]; !ok && len(p.seen) >= maxPeers {
		p.forget(now)
		if len(p.seen) >= maxPeers {
			return
		}
	}
	last, known := p.seen[instance]
	if !known && p.log != nil {
		p.log.Info("work spread: peer seen", zap.String("peer", instance), zap.Int("peers", len(p.seen)+1))
	}
	if now.After(last) {
		p.seen[instance] = now
	}
}

// live returns the peers seen within peerTTL of now, sorted.
func (p *peers) live(now time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forget(now)
	out := make([]string, 0, len(p.seen))
	for in := range p.seen {
		out = append(out, in)
	}
	sort.Strings(out)
	return out
}

// forget drops the peers not seen within peerTTL of now (p.mu held).
func (p *peers) forget(now time.Time) {
	for in, at := range p.seen {
		if now.Sub(at) > peerTTL {
			delete(p.seen, in)
			if p.log != nil {
				p.log.Info("work spread: peer forgotten", zap.String("peer", in),
					zap.Duration("unseen_for", now.Sub(at)), zap.Int("peers", len(p.seen)))
			}
		}
	}
}

// RankedDelay is the work-spread delay of self's first claim of (job, slot)
// among the instances it knows, others (self not among them). The n
// instances are ranked by SpreadDelay (ties by name); rank r waits
// r × step plus its own SpreadDelay scaled into [0, step/2], with
// step = spread/(n - 1/2), so that the last waits at most spread. The
// first in rank, the instance with the shortest SpreadDelay (the one that
// claims first without peers: whichever delay an instance uses, the same
// instance tends to win), claims within half a step of the slot, and each
// of the others at least half a step after the one before it. The half
// step keeps views that differ apart: an instance that does not know the
// first in rank, and so takes itself for the first, still waits longer
// than it (its own delay is longer), loses to it and learns it. With no
// peers known the delay is SpreadDelay itself.
func RankedDelay(self string, others []string, job string, slotMs int64, spread time.Duration) time.Duration {
	own := SpreadDelay(self, job, slotMs, spread)
	if len(others) == 0 || spread <= 0 {
		return own
	}
	rank := 0
	for _, o := range others {
		if d := SpreadDelay(o, job, slotMs, spread); d < own || (d == own && o < self) {
			rank++
		}
	}
	step := 2 * spread / time.Duration(2*len(others)+1)
	return time.Duration(rank)*step + time.Duration(float64(step/2)*float64(own)/float64(spread))
}
