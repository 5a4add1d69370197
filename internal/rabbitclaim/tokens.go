package rabbitclaim

import (
	"sync"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
)

// tokenState is what this process knows of one of its claim tokens.
type tokenState uint8

const (
	tokenNone  tokenState = iota
	tokenWon              // acked: the token is in the gate
	tokenMaybe            // published, no answer: it may be in the gate
	tokenGone             // returned: the gate vanished during the claim
)

// tokenKey names one claim attempt.
type tokenKey struct {
	job   string
	slot  int64
	token claim.Token
}

// tokenRec is the book's entry of a token.
type tokenRec struct {
	state    tokenState
	instance string
	at       time.Time // when the first claim with the token started
}

// maxTokens bounds the book whatever the TTL: the oldest entries go first.
const maxTokens = 100_000

// tokenBook is the bounded in-process record of the tokens this Backend
// claimed with (see the package comment, "Re-sent claims"). An entry lives
// for ttl (slotTtlMs) from its first claim: the claim's declare made the
// gate live at least that long, so while an entry exists, so does its gate.
type tokenBook struct {
	mu    sync.Mutex
	clock clock.Clock
	ttl   time.Duration
	m     map[tokenKey]tokenRec
	fifo  []fifoEntry // in order of first claim
}

type fifoEntry struct {
	key tokenKey
	at  time.Time
}

func newTokenBook(c clock.Clock, ttl time.Duration) *tokenBook {
	return &tokenBook{clock: c, ttl: ttl, m: map[tokenKey]tokenRec{}}
}

// get returns the entry of k (state tokenNone when there is none).
func (t *tokenBook) get(k tokenKey) tokenRec {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked()
	return t.m[k]
}

// set records state for k. at is when the claim started; an existing
// entry keeps its first time.
func (t *tokenBook) set(k tokenKey, state tokenState, instance string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.m[k]; ok {
		r.state = state
		t.m[k] = r
		return
	}
	t.m[k] = tokenRec{state: state, instance: instance, at: at}
	t.fifo = append(t.fifo, fifoEntry{key: k, at: at})
	t.pruneLocked()
}

// pruneLocked drops entries older than ttl, and the oldest beyond
// maxTokens.
func (t *tokenBook) pruneLocked() {
	now := t.clock.Now()
	n := 0
	for n < len(t.fifo) && (len(t.fifo)-n > maxTokens || now.Sub(t.fifo[n].at) > t.ttl) {
		delete(t.m, t.fifo[n].key)
		n++
	}
	if n > 0 {
		t.fifo = t.fifo[n:]
	}
}

// maybeHeld reports whether a claim of (job, slot) by this Backend was
// published and never answered (tokenMaybe): the gate may hold it.
func (t *tokenBook) maybeHeld(job string, slot int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked()
	for k, r := range t.m {
		if k.job == job && k.slot == slot && r.state == tokenMaybe {
			return true
		}
	}
	return false
}
