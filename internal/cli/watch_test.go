package cli

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
)

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// frames splits a --watch output into its frames.
func frames(out string) []string {
	parts := strings.Split(out, clearScreen)
	return parts[1:]
}

// awaitFrames waits until out holds n frames (within 10s).
func awaitFrames(t *testing.T, out *lockedBuffer, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if f := frames(out.String()); len(f) >= n {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d frames within 10s:\n%q", n, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// status --watch and jobs --watch draw a frame at once and one per tick,
// each after clearing the screen, with what the store holds at that tick,
// its text escaped; they end with exit 0 when interrupted.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+goodJobs, 0o644)
	b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: dir + "/s.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	slot := time.Now().Truncate(time.Minute).Add(-time.Hour)
	for _, cmd := range []string{"status", "jobs"} {
		t.Run(cmd, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ticks := make(chan time.Time)
			var out, errb lockedBuffer
			done := make(chan int)
			t.Chdir(dir)
			go func() {
				done <- Main(ctx, []string{cmd, "--config", "c.yaml", "--watch"},
					Env{Stdout: &out, Stderr: &errb, Environ: []string{}, Ticks: ticks})
			}()
			first := awaitFrames(t, &out, 1)[0]
			slot = slot.Add(time.Minute)
			req := claim.Request{Job: "a", Slot: slot.UnixMilli(), Token: claim.NewToken(), Instance: "evil\x1b[2J\u202e",
				MaxLate: 24 * time.Hour, Lease: time.Minute, MaxAttempts: 1, Overlap: claim.OverlapAllow, Now: slot}
			if res, err := b.Claim(t.Context(), req); err != nil || res.Outcome != claim.Won {
				t.Fatalf("claim: %v %v", res, err)
			}
			ticks <- time.Now()
			second := awaitFrames(t, &out, 2)[1]
			stamp := slot.UTC().Format(time.RFC3339)
			if strings.Contains(first, stamp) || !strings.Contains(second, stamp) {
				t.Errorf("the run of %s is in the second frame only; first:\n%s\nsecond:\n%s", stamp, first, second)
			}
			if cmd == "status" && !strings.Contains(second, `evil\x1b[2J\u202e`) {
				t.Errorf("instance not escaped:\n%s", second)
			}
			if strings.ContainsAny(strings.Join(frames(out.String()), ""), "\x1b\u202e") {
				t.Errorf("a frame holds raw control characters: %q", out.String())
			}
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Errorf("exit %d: %s", code, errb.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("--watch did not end when interrupted")
			}
		})
	}
	if code, _, stderr := run(t, dir, "jobs", "--config", "c.yaml", "--watch", "--json"); code != ExitUsage || !strings.Contains(stderr, "--watch and --json") {
		t.Errorf("--watch --json: exit %d, %s", code, stderr)
	}
}
