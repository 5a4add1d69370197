package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/status"
)

// listRuns lists q's runs, a perInstance job's under every instance's key
// (status.ListRuns).
func listRuns(ctx context.Context, b claim.Backend, cfg *config.Config, q claim.ListQuery) ([]claim.Run, error) {
	return status.ListRuns(ctx, b, cfg.Jobs, q)
}

// printNotHere prints, for validate, each job this instance does not
// schedule for want of its tags.
func printNotHere(w io.Writer, cfg *config.Config) {
	for _, line := range cfg.NotHere() {
		fmt.Fprintf(w, "%s: info: %s\n", cfg.File, line)
	}
}
