package runner

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/logging"
)

// hostileJob prints what would set a terminal's title, clear the screen,
// move the cursor and reverse the text, on stdout and on stderr.
const hostileJob = `printf '\033]0;TITLE\007\033[2J\033[1;1Hcleared \342\200\256reversed\n'; printf '\033[31mred\r\n' >&2`

// syncBuffer is a bytes.Buffer that the test may read while the logger
// writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A job's output reaches the console log as visible escapes: no byte of it
// can drive the terminal the daemon logs to.
func TestOutputCannotDriveTheConsole(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	log, err := logging.New(&buf, "info", "console")
	if err != nil {
		t.Fatal(err)
	}
	s := &store{}
	r, _ := newRunner(t, s, clock.Real{})
	r.Log = log
	rep := run(t, r, context.Background(), execution(shellJob("hostile", hostileJob)), 30*time.Second)
	if rep.Status != claim.StatusSucceeded {
		t.Fatalf("report = %+v", rep)
	}
	out := buf.String()
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("console log holds %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{`\x1b]0;TITLE\x07\x1b[2J\x1b[1;1Hcleared \u202ereversed` + "\t", `\x1b[31mred` + "\t"} {
		if !strings.Contains(out, want) {
			t.Errorf("console log lacks %q:\n%s", want, out)
		}
	}
}

// On a real terminal, log.format auto picks the console and the terminal
// receives no escape byte from the job (as under make run).
func TestOutputCannotDriveATerminal(t *testing.T) {
	t.Parallel()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	var got bytes.Buffer
	read := make(chan struct{})
	go func() { defer close(read); _, _ = io.Copy(&got, ptmx) }() // ends with EIO once tty is closed
	log, err := logging.New(tty, "info", "auto")
	if err != nil {
		t.Fatal(err)
	}
	s := &store{}
	r, _ := newRunner(t, s, clock.Real{})
	r.Log = log
	rep := run(t, r, context.Background(), execution(shellJob("hostile", hostileJob)), 30*time.Second)
	tty.Close()
	select {
	case <-read:
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal's output did not end")
	}
	if rep.Status != claim.StatusSucceeded {
		t.Fatalf("report = %+v", rep)
	}
	out := got.String()
	if !strings.Contains(out, "\tINFO\t"+`\x1b]0;TITLE`) {
		t.Errorf("no console line with the escaped title:\n%q", out)
	}
	if i := strings.IndexAny(out, "\x1b\x07"); i >= 0 {
		t.Errorf("the terminal received %q at %d:\n%q", out[i], i, out)
	}
}
