//go:build anarchon_testclock

package clock

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// TestClockEnabled: this binary reads TestClockEnv.
const TestClockEnabled = true

// testClockPoll is how often the file is read again: a change of its number
// is a clock jump of the instance.
const testClockPoll = 100 * time.Millisecond

// FromEnv returns base skewed by the offset in $ANARCHON_TESTCLOCK_FILE, or
// base when the variable is unset.
func FromEnv(base Clock) Clock {
	path := os.Getenv(TestClockEnv)
	if path == "" {
		return base
	}
	s := &fileSkew{base: base, path: path}
	s.load()
	go func() {
		for range time.Tick(testClockPoll) {
			s.load()
		}
	}()
	return s
}

// fileSkew is Offset with a skew that the file may change at any time.
type fileSkew struct {
	base Clock
	path string
	ms   atomic.Int64
}

func (s *fileSkew) load() {
	b, err := os.ReadFile(s.path)
	if err != nil {
		return // keep the last offset; the harness rewrites the file atomically
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
		s.ms.Store(n)
	}
}

func (s *fileSkew) Now() time.Time {
	return s.base.Now().Add(time.Duration(s.ms.Load()) * time.Millisecond)
}

func (s *fileSkew) NewTimer(d time.Duration) Timer { return s.base.NewTimer(d) }
