package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
)

// storeTimeout bounds the commands that read or write the store.
const storeTimeout = 30 * time.Second

// openStore opens the crontab's store; its failure names the store.
func openStore(ctx context.Context, cfg *config.Config) (claim.Backend, error) {
	b, err := cfg.OpenStore(ctx, zap.NewNop(), nil)
	if err != nil {
		return nil, runtimeError(fmt.Errorf("store %s: %w; nothing written", cfg.Backend.Describe(), err))
	}
	return b, nil
}

// openToRead opens the crontab's store; its failure is the store's own.
func openToRead(ctx context.Context, cfg *config.Config) (claim.Backend, error) {
	b, err := cfg.OpenStore(ctx, zap.NewNop(), nil)
	if err != nil {
		return nil, runtimeError(err)
	}
	return b, nil
}

// storePrint is a command that reads the store once and prints what it
// read: T as JSON lines or as a table.
type storePrint[T any] struct {
	open        func(context.Context, *config.Config) (claim.Backend, error)
	read        func(context.Context, claim.Backend) (T, error) // its errors are the command's
	json, table func(io.Writer, T) error
}

// run opens the store within storeTimeout, reads and writes to env.Stdout.
func (p storePrint[T]) run(ctx context.Context, env Env, cfg *config.Config, asJSON bool) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	b, err := p.open(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	v, err := p.read(ctx, b)
	if err != nil {
		return err
	}
	write := p.table
	if asJSON {
		write = p.json
	}
	if err := write(env.Stdout, v); err != nil {
		return runtimeError(err)
	}
	return nil
}
