package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// poll calls cond every 20 ms until it reports done, fails, or ctx (60 s
// at most) ends; the last cond error says why.
func poll(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last error
	for {
		done, err := cond(ctx)
		if done {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: gave up (%w); last: %w", what, ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// AwaitStandby waits until the standby name streams from s, and when sync
// is set, until s counts it as a synchronous standby.
func (s *Server) AwaitStandby(ctx context.Context, name string, sync bool) error {
	return poll(ctx, fmt.Sprintf("standby %s streaming from %s", name, s.Name), func(ctx context.Context) (bool, error) {
		var state, syncState string
		err := s.QueryRow(ctx, fmt.Sprintf(
			"SELECT coalesce(state, ''), coalesce(sync_state, '') FROM pg_stat_replication WHERE application_name = '%s'", name),
			&state, &syncState)
		if err != nil {
			return false, err
		}
		return state == "streaming" && (!sync || syncState == "sync" || syncState == "quorum"), nil
	})
}

// Synchronous makes s wait for the standby name to flush every commit
// (synchronous_standby_names 'ANY 1 (name)', synchronous_commit on) and
// waits until it does. Only s has the setting: a standby promoted later
// does not wait for standbys it does not have.
func (s *Server) Synchronous(ctx context.Context, name string) error {
	if err := s.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (%s)'", name)); err != nil {
		return err
	}
	if err := s.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	return s.AwaitStandby(ctx, name, true)
}

// pid is s's postmaster's process id.
func (s *Server) pid() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// Kill ends s as a host crash would: its postmaster and every process of
// it frozen at once (SIGSTOP), then killed (SIGKILL), so that none of them
// sends anything more.
func (s *Server) Kill() error {
	pid, err := s.pid()
	if err != nil {
		return fmt.Errorf("kill %s: %w", s.Name, err)
	}
	procs := append([]int{pid}, children(pid)...)
	for _, p := range procs {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	for _, p := range procs {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return nil
}

// children are the processes whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// Promote promotes the standby s (pg_ctl promote, waiting for the end of
// recovery).
func (s *Server) Promote() error {
	return s.c.run("pg_ctl", "promote", "-D", s.data, "-w", "-t", "60")
}

// AwaitWritable waits until s commits a write, and returns when it first
// did: the instant a promoted standby accepts writes.
func (s *Server) AwaitWritable(ctx context.Context) (time.Time, error) {
	var at time.Time
	err := poll(ctx, s.Name+" accepting writes", func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, s.DSN())
		if err != nil {
			return false, err
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(cctx, "CREATE TABLE IF NOT EXISTS pgtest_writable (at timestamptz); INSERT INTO pgtest_writable VALUES (now())"); err != nil {
			return false, err
		}
		at = time.Now()
		return true, nil
	})
	return at, err
}
