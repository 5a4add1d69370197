// Package logging builds the daemon's zap logger from the config's log
// section: console lines on a terminal, JSON lines otherwise. Both escape
// what could drive a terminal (internal/sanitize): a job's output is logged
// line by line, and reading the log must not run it.
package logging

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/anarchon/anarchon/internal/sanitize"
)

// New returns a logger writing to w at level with format "auto", "console"
// or "json". With "auto", console is chosen when w is a terminal.
func New(w io.Writer, level, format string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log.level %q: %w", level, err)
	}
	if format == "" || format == "auto" {
		format = "json"
		if IsTerminal(w) {
			format = "console"
		}
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = newCleanEncoder(zapcore.NewJSONEncoder(ec), sanitize.Text)
	case "console":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("2006-01-02T15:04:05.000Z07:00")
		enc = newCleanEncoder(zapcore.NewConsoleEncoder(ec), sanitize.Line)
	default:
		return nil, fmt.Errorf("log.format %q: want auto, console or json", format)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core, zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(os.Stderr)))), nil
}

// IsTerminal reports whether w is a file descriptor on a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
