package supervise

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

// Guard is the daemon's job guard: one process per daemon, started at the
// daemon's start, that takes down the process groups of the daemon's jobs
// when the daemon dies. The daemon then starts each job itself, as the
// leader of a new process group, with no supervising process of its own: a
// job's start costs the fork of the job alone.
//
// The daemon writes one line per change to the guard's stdin: "+PGID" when
// it has started a job's group, "-PGID" when the group is gone (the daemon
// has killed what was left of it and is about to reap its leader). The
// write end of that pipe is the daemon's alone (close-on-exec), so the
// guard reads EOF exactly when the daemon has exited, whatever killed it,
// SIGKILL included, and only after every line the daemon wrote: it then
// SIGKILLs every group still listed and exits. A daemon that stops cleanly
// has stopped its jobs first and leaves an empty list.
//
// SIGTERM, SIGINT and SIGHUP (a terminal's ^C, a signal sent to the
// daemon's group) are caught and ignored: the guard ends on EOF only.
func Guard(in io.Reader) int {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 || (line[0] != '+' && line[0] != '-') {
			fmt.Fprintf(os.Stderr, prefix+"guard: unexpected line %q\n", line)
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			fmt.Fprintf(os.Stderr, prefix+"guard: unexpected line %q\n", line)
			continue
		}
		if line[0] == '+' {
			groups[pgid] = true
		} else {
			delete(groups, pgid)
		}
	}
	// EOF, or a read error: the daemon is gone either way.
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}
