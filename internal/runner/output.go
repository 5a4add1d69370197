package runner

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// output reads the command's stdout and stderr pipes, logs them line by line
// (stdout at info, stderr at warn) and keeps the last bytes of both, in the
// order the lines arrived, for the result's output tail.
type output struct {
	log   *zap.Logger
	files []*os.File
	done  chan struct{} // closed when every pipe reached EOF or was closed

	mu   sync.Mutex
	tail []byte
	max  int
}

// newOutput starts reading stdout and stderr; it keeps the last tailBytes.
func newOutput(log *zap.Logger, stdout, stderr *os.File, tailBytes int) *output {
	o := &output{log: log, files: []*os.File{stdout, stderr}, done: make(chan struct{}), max: max(tailBytes, 0)}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); o.read(stdout, "stdout", zap.InfoLevel) }()
	go func() { defer wg.Done(); o.read(stderr, "stderr", zap.WarnLevel) }()
	go func() {
		wg.Wait()
		close(o.done)
	}()
	return o
}

// read logs f's lines until EOF; lines longer than maxLineBytes are logged in
// pieces marked partial.
func (o *output) read(f *os.File, stream string, level zapcore.Level) {
	defer f.Close()
	br := bufio.NewReaderSize(f, maxLineBytes)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			o.keep(line)
			if ce := o.log.Check(level, string(bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")))); ce != nil {
				fields := []zap.Field{zap.String("stream", stream)}
				if errors.Is(err, bufio.ErrBufferFull) {
					fields = append(fields, zap.Bool("partial", true))
				}
				ce.Write(fields...)
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// keep appends p to the tail, dropping what is older than the last max bytes.
func (o *output) keep(p []byte) {
	if o.max == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(p) >= o.max {
		o.tail = append(o.tail[:0], p[len(p)-o.max:]...)
		return
	}
	if over := len(o.tail) + len(p) - o.max; over > 0 {
		o.tail = o.tail[:copy(o.tail, o.tail[over:])]
	}
	o.tail = append(o.tail, p...)
}

// close closes the pipes, ending the readers of output that processes
// outside the job's process group still hold open.
func (o *output) close() {
	for _, f := range o.files {
		_ = f.Close()
	}
}

// tailString is the kept output as valid UTF-8, for the store.
func (o *output) tailString() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return validTail(o.tail)
}

// truncateTail keeps the last n bytes of s, as valid UTF-8.
func truncateTail(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return validTail([]byte(s))
}

// validTail drops a rune cut at the start of b and replaces other invalid
// UTF-8 with "?" (never longer than what it replaces).
func validTail(b []byte) string {
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return strings.ToValidUTF8(string(b), "?")
}
