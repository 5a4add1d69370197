package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// Records keeps one file per running attempt in the daemon's state
// directory: the attempt's process group, its leader's start time, and the
// daemon that started it. It is the last line of defence against orphans:
// the job guard kills a dead daemon's groups, but when the daemon and the
// guard die together (the OOM killer, `pkill -9`), a job's children live
// on. The next daemon started on the host reads the records left by dead
// daemons (Reap) before it claims anything and kills what is left of their
// groups.
//
// A record names its daemon by pid and start time, so a daemon reaps only
// the records of daemons that are gone, never those of a live sibling
// sharing the directory; and the boot it was written in, so records from
// before a reboot (whose processes are gone, and whose start times count
// from another boot) are dropped unread.
type Records struct {
	dir  string
	self procID
	boot string
	log  *zap.Logger
}

// procID names a process for as long as the host runs: its pid and its
// start time (clock ticks since boot, /proc/PID/stat field 22), which a
// reused pid does not share.
type procID struct {
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// attemptRecord is one record: what the runner knows of the attempt when it
// forks it.
type attemptRecord struct {
	Boot     string `json:"boot"`
	Daemon   procID `json:"daemon"`
	Pgid     int    `json:"pgid"`
	Leader   uint64 `json:"leaderStart"` // the group leader's start time
	Job      string `json:"job"`
	Slot     string `json:"slot"`
	Attempt  int    `json:"attempt"`
	Instance string `json:"instance"`
}

// recordsSubdir is the directory of the records under the state directory.
const recordsSubdir = "attempts"

// OpenRecords opens the records in stateDir, creating it (and its
// attempts directory) with mode 0700 when missing.
func OpenRecords(stateDir string, log *zap.Logger) (*Records, error) {
	if err := platformCheck(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	dir := filepath.Join(stateDir, recordsSubdir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory %s: %w", stateDir, err)
	}
	self, err := procOf(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("reading this daemon's start time: %w", err)
	}
	boot, err := bootID()
	if err != nil {
		return nil, fmt.Errorf("reading the boot id: %w", err)
	}
	return &Records{dir: dir, self: self, boot: boot, log: log}, nil
}

// Dir is the directory the records are kept in.
func (rs *Records) Dir() string { return rs.dir }

// add records the process group pgid, whose leader the runner has just
// forked, for the attempt a; it returns the record's path for remove.
func (rs *Records) add(pgid int, a attemptRecord) (string, error) {
	start, err := startTime(pgid)
	if err != nil {
		return "", fmt.Errorf("reading the job's start time: %w", err)
	}
	a.Boot, a.Daemon, a.Pgid, a.Leader = rs.boot, rs.self, pgid, start
	b, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%d-%d-%d.json", rs.self.Pid, rs.self.Start, pgid)
	path := filepath.Join(rs.dir, name)
	tmp := filepath.Join(rs.dir, "."+name)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return "", fmt.Errorf("writing the attempt's record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("writing the attempt's record: %w", err)
	}
	return path, nil
}

// remove deletes an attempt's record once its group is gone.
func (rs *Records) remove(path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		rs.log.Warn("removing the attempt's record", zap.String("path", path), zap.Error(err))
	}
}

// Reap kills what is left of the process groups recorded by daemons that
// are gone, logs one warning per attempt it reaped processes of, and
// removes those records. It returns how many attempts it reaped processes
// of. The records of live daemons are left alone.
func (rs *Records) Reap() (int, error) {
	entries, err := os.ReadDir(rs.dir)
	if err != nil {
		return 0, fmt.Errorf("reading the attempts' records: %w", err)
	}
	reaped := 0
	for _, ent := range entries {
		name := ent.Name()
		path := filepath.Join(rs.dir, name)
		if strings.HasPrefix(name, ".") {
			// A record being written: its writer's, if alive, or a
			// dead daemon's leftover (its group went unrecorded).
			if owner, ok := ownerOfName(strings.TrimPrefix(name, ".")); ok && !rs.alive(owner) {
				os.Remove(path)
			}
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		n, err := rs.reapOne(path)
		if err != nil {
			rs.log.Warn("a leftover attempt record could not be reaped", zap.String("path", path), zap.Error(err))
		}
		reaped += n
	}
	return reaped, nil
}

// reapOne handles the record at path; it returns 1 if it killed processes.
func (rs *Records) reapOne(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var a attemptRecord
	if err := json.Unmarshal(b, &a); err != nil || a.Pgid <= 1 {
		os.Remove(path)
		return 0, fmt.Errorf("unreadable record, removed: %v", err) //nolint:errorlint // err is nil when only the pgid is bad
	}
	if a.Boot != rs.boot {
		os.Remove(path) // from before a reboot: its processes are gone
		return 0, nil
	}
	if a.Daemon == rs.self || rs.alive(a.Daemon) {
		return 0, nil
	}
	pids, err := killGroupLeftovers(a.Pgid, a.Leader)
	if err != nil {
		return 0, err // kept: the next start tries again
	}
	os.Remove(path)
	if len(pids) == 0 {
		return 0, nil
	}
	rs.log.Warn("killed the processes of an attempt whose daemon and job guard died together",
		zap.String("job", a.Job), zap.String("slot", a.Slot), zap.Int("attempt", a.Attempt),
		zap.String("instance", a.Instance), zap.Int("pgid", a.Pgid), zap.Ints("pids", pids),
		zap.Int("daemon_pid", a.Daemon.Pid))
	return 1, nil
}

// alive reports whether the process p still runs (and is p, not a process
// that reused its pid).
func (rs *Records) alive(p procID) bool {
	cur, err := procOf(p.Pid)
	return err == nil && cur == p
}

// ownerOfName reads the daemon of a record's file name PID-START-PGID.json.
func ownerOfName(name string) (procID, bool) {
	f := strings.SplitN(strings.TrimSuffix(name, ".json"), "-", 3)
	if len(f) != 3 {
		return procID{}, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return procID{}, false
	}
	return procID{Pid: pid, Start: start}, true
}

// procOf is pid's procID.
func procOf(pid int) (procID, error) {
	start, err := startTime(pid)
	return procID{Pid: pid, Start: start}, err
}
