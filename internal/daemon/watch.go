package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/clock"
)

// watchDebounce gathers the burst of events an editor's save makes.
const watchDebounce = 300 * time.Millisecond

// watchFile calls changed when file is written, created, renamed over or
// removed. It watches the file's directory, so that an editor that replaces
// the file (write a temporary, rename it over) is seen too.
func watchFile(ctx context.Context, wg *sync.WaitGroup, file string, clk clock.Clock, log *zap.Logger, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", file, err)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		w.Close()
		return fmt.Errorf("watch %s: %w", file, err)
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return fmt.Errorf("watch %s: %w", file, err)
	}
	log.Info("watching the crontab for changes", zap.String("file", abs))
	wg.Go(func() {
		defer w.Close()
		var due clock.Timer
		var dueC <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Clean(ev.Name) != abs || ev.Op == fsnotify.Chmod {
					continue
				}
				if due == nil {
					due = clk.NewTimer(watchDebounce)
				} else {
					due.Reset(watchDebounce)
				}
				dueC = due.C()
			case <-dueC:
				dueC = nil
				changed()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("watching the crontab", zap.Error(err))
			}
		}
	})
	return nil
}
