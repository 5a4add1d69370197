package pgtest

import (
	"context"
	"fmt"
	"syscall"
)

// PauseSender freezes (SIGSTOP) the WAL sender of s that streams to the
// standby name: s's commits no longer leave it, as over a lagging link.
// With name a synchronous standby, s's commits wait. Kill ends the frozen
// sender with the rest of s; the function returned resumes it otherwise.
func (s *Server) PauseSender(ctx context.Context, name string) (resume func(), err error) {
	var pid int
	if err := s.QueryRow(ctx, fmt.Sprintf("SELECT pid FROM pg_stat_replication WHERE application_name = '%s'", name), &pid); err != nil {
		return nil, fmt.Errorf("find the WAL sender of %s to %s: %w", s.Name, name, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pause the WAL sender of %s to %s: %w", s.Name, name, err)
	}
	return func() { _ = syscall.Kill(pid, syscall.SIGCONT) }, nil
}
