package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/sanitize"
)

// WatchEvery is how often --watch redraws.
const WatchEvery = time.Second

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// errWatchJSON refuses --watch with --json: a redrawn screen is for people.
var errWatchJSON = errors.New("--watch and --json: give one of them (--watch redraws a table for people)")

// frameFunc writes one view of the store to w, reading it with ctx; a
// failure is shown in the frame and the next tick tries again.
type frameFunc func(ctx context.Context, w *bytes.Buffer) error

// watch redraws frame every tick (env.Ticks, else every WatchEvery) until
// ctx ends or SIGINT or SIGTERM arrives (Ctrl-C), and then exits 0. Each
// redraw clears the screen; the frame's text is sanitised by its writer.
func watch(ctx context.Context, env Env, what string, frame frameFunc) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ticks := env.Ticks
	if ticks == nil {
		t := time.NewTicker(WatchEvery)
		defer t.Stop()
		ticks = t.C
	}
	for {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "%sanarchond %s at %s; every %s, Ctrl-C to stop\n\n", clearScreen, what,
			clock.Real{}.Now().UTC().Format("2006-01-02T15:04:05Z"), WatchEvery)
		fctx, cancel := context.WithTimeout(ctx, storeTimeout)
		err := frame(fctx, &buf)
		cancel()
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(&buf, "\nerror: %s\n", sanitize.Line(err.Error()))
		}
		if _, err := env.Stdout.Write(buf.Bytes()); err != nil {
			return runtimeError(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
		}
	}
}

// openForWatch opens the crontab's store for a view that outlives
// storeTimeout: the open itself is bounded by it, the store is not. close
// closes the store.
func openForWatch(ctx context.Context, cfg *config.Config) (b claim.Backend, closeFn func(), err error) {
	octx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(storeTimeout, cancel)
	b, err = openStore(octx, cfg)
	t.Stop()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return b, func() { b.Close(); cancel() }, nil
}
