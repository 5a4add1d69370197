package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// settleMeasure ends a daemon measurement (lag, scale) that began at t0:
// took is the time since, and errText the measurement's errors joined on
// one line (left as is when there are none). Deferred with pointers to
// the measurement's own fields, so that it sees the errors of the end.
func settleMeasure(t0 time.Time, errs *[]error, took *time.Duration, errText *string) {
	*took = time.Since(t0)
	if err := errors.Join(*errs...); err != nil {
		*errText = oneLineErr(err)
	}
}

// measureScratch makes what a daemon measurement works in: a scratch
// directory (anarchon-bench-KIND-*, the caller removes it) and a fresh
// namespace on backend. On error, nothing is left behind.
func measureScratch(ctx context.Context, kind, backend string) (string, *daemonStore, error) {
	dir, err := os.MkdirTemp("", "anarchon-bench-"+kind+"-")
	if err != nil {
		return "", nil, err
	}
	st, err := newDaemonStore(ctx, backend)
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("setup: %w", err), os.RemoveAll(dir))
	}
	return dir, st, nil
}
