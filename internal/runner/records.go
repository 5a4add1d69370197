package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"
)

// Records keeps a record of each running attempt of the daemon in its
// state directory: the attempt's process group, its leader's start time,
// and the daemon that started it. It is the last line of defence against
// orphans: the job guard kills a dead daemon's groups, but when the daemon
// and the guard die together (the OOM killer, `pkill -9`), a job's children
// live on. The next daemon started on the host reads the records left by
// dead daemons (Reap) before it claims anything and kills what is left of
// their groups.
//
// A daemon's records are one file, attempts/DAEMONPID-DAEMONSTART.records,
// created when it starts: a slot of recordSize bytes per record, a line of
// JSON followed by zeros; a free slot is all zeros. An attempt's record is
// written into a free slot with one write, and cleared with another when
// its group is gone: no file is created, renamed or removed per attempt
// (each of those allocates or frees an inode, which cost more than the rest
// of a job's start on the daemon's side when many jobs were due at once).
//
// A record names its daemon by pid and start time (and so does the file),
// so a daemon reaps only the records of daemons that are gone, never those
// of a live sibling sharing the directory; and the boot it was written in,
// so records from before a reboot (whose processes are gone, and whose
// start times count from another boot) are dropped unread.
type Records struct {
	dir  string
	path string   // this daemon's file
	f    *os.File // open on path
	self procID
	boot string
	log  *zap.Logger

	mu    sync.Mutex
	free  []int64 // cleared slots, reused first
	next  int64   // the slots the file has had
	inUse int     // slots holding a record
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

const (
	// recordsSubdir is the directory of the records under the state
	// directory.
	recordsSubdir = "attempts"
	// recordsExt ends the name of a daemon's file of records.
	recordsExt = ".records"
	// recordSize is a record's slot: a record with the longest instance
	// id (255 bytes, each at most 6 in JSON) and job name (64) fits, and a
	// slot never straddles a page.
	recordSize = 2048
)

// zeroSlot clears a slot.
var zeroSlot [recordSize]byte

// OpenRecords opens the records in stateDir, creating it (and its
// attempts directory) with mode 0700 when missing, and this daemon's file
// of records in it. One process opens the records of a directory once.
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
	// A file of this name is from another boot (a pid and start time name
	// one process per boot): its records are dropped.
	path := filepath.Join(dir, fmt.Sprintf("%d-%d%s", self.Pid, self.Start, recordsExt))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating the attempts' records: %w", err)
	}
	return &Records{dir: dir, path: path, f: f, self: self, boot: boot, log: log}, nil
}

// Dir is the directory the records are kept in.
func (rs *Records) Dir() string { return rs.dir }

// Close closes this daemon's file of records and removes it, unless it
// still holds a record (a group the daemon did not see end): the next
// daemon reaps that.
func (rs *Records) Close() error {
	rs.mu.Lock()
	held := rs.inUse
	rs.mu.Unlock()
	if held == 0 {
		os.Remove(rs.path)
	}
	return rs.f.Close()
}

// add records the process group pgid, whose leader the runner has just
// forked, for the attempt a; it returns the record's slot for remove.
func (rs *Records) add(pgid int, a attemptRecord) (int64, error) {
	start, err := startTime(pgid)
	if err != nil {
		return 0, fmt.Errorf("reading the job's start time: %w", err)
	}
	a.Boot, a.Daemon, a.Pgid, a.Leader = rs.boot, rs.self, pgid, start
	b, err := json.Marshal(a)
	if err != nil {
		return 0, err
	}
	if len(b) >= recordSize {
		return 0, fmt.Errorf("the attempt's record takes %d bytes, more than its slot's %d", len(b)+1, recordSize)
	}
	slot := rs.take()
	if _, err := rs.f.WriteAt(append(b, '\n'), slot*recordSize); err != nil {
		// Not used again unless zeroed: a part of the record may be in it.
		_ = rs.clear(slot)
		return 0, fmt.Errorf("writing the attempt's record: %w", err)
	}
	return slot, nil
}

// remove clears the record in slot once its group is gone.
func (rs *Records) remove(slot int64) {
	if err := rs.clear(slot); err != nil {
		rs.log.Warn("clearing the attempt's record", zap.String("path", rs.path), zap.Int64("slot", slot), zap.Error(err))
	}
}

// take returns a free slot: a cleared one, else a new one at the end.
func (rs *Records) take() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.inUse++
	if n := len(rs.free); n > 0 {
		slot := rs.free[n-1]
		rs.free = rs.free[:n-1]
		return slot
	}
	rs.next++
	return rs.next - 1
}

// clear zeroes slot and frees it. A slot that could not be zeroed is not
// used again: what it holds names a group that is gone, which Reap leaves
// alone.
func (rs *Records) clear(slot int64) error {
	_, err := rs.f.WriteAt(zeroSlot[:], slot*recordSize)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.inUse--
	if err == nil {
		rs.free = append(rs.free, slot)
	}
	return err
}

// Reap kills what is left of the process groups recorded by daemons that
// are gone, logs one warning per attempt it reaped processes of, and
// removes those daemons' records. It returns how many attempts it reaped
// processes of. The records of live daemons are left alone. It also reads
// the per-attempt files of earlier versions (PID-START-PGID.json, one
// record each).
func (rs *Records) Reap() (int, error) {
	entries, err := os.ReadDir(rs.dir)
	if err != nil {
		return 0, fmt.Errorf("reading the attempts' records: %w", err)
	}
	reaped := 0
	for _, ent := range entries {
		name := ent.Name()
		owner, ok := ownerOfName(strings.TrimPrefix(name, "."))
		if !ok || owner == rs.self || rs.alive(owner) {
			continue // not a record, or this daemon's, or a live sibling's
		}
		path := filepath.Join(rs.dir, name)
		if strings.HasPrefix(name, ".") {
			// An earlier version's record that was being written when
			// its daemon died: its group went unrecorded.
			os.Remove(path)
			continue
		}
		n, err := rs.reapFile(path)
		if err != nil {
			rs.log.Warn("leftover attempt records could not be reaped", zap.String("path", path), zap.Error(err))
		}
		reaped += n
	}
	return reaped, nil
}

// reapFile handles the records of a dead daemon in the file at path: it
// kills what is left of each group recorded in this boot, and removes the
// file unless a kill failed (the next start tries again). It returns how
// many attempts it killed processes of.
func (rs *Records) reapFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	reaped := 0
	var errs []error
	for _, raw := range recordsIn(b) {
		var a attemptRecord
		if err := json.Unmarshal(raw, &a); err != nil || a.Pgid <= 1 {
			rs.log.Warn("an unreadable attempt record was dropped", zap.String("path", path),
				zap.ByteString("record", raw), zap.Error(err))
			continue
		}
		if a.Boot != rs.boot {
			continue // from before a reboot: its processes are gone
		}
		n, err := rs.reapOne(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("process group %d: %w", a.Pgid, err))
		}
		reaped += n
	}
	if len(errs) > 0 {
		return reaped, errors.Join(errs...) // kept: the next start tries again
	}
	os.Remove(path)
	return reaped, nil
}

// recordsIn splits a file of records into its records: each slot's bytes
// up to its line feed, the free (zero) slots left out. An earlier
// version's per-attempt file is one slot without a line feed.
func recordsIn(b []byte) [][]byte {
	var out [][]byte
	for off := 0; off < len(b); off += recordSize {
		slot := b[off:min(off+recordSize, len(b))]
		if i := bytes.IndexByte(slot, '\n'); i >= 0 {
			slot = slot[:i]
		}
		if slot = bytes.TrimRight(slot, "\x00"); len(slot) > 0 {
			out = append(out, slot)
		}
	}
	return out
}

// reapOne kills what is left of the group of record a; it returns 1 if it
// killed processes.
func (rs *Records) reapOne(a attemptRecord) (int, error) {
	pids, err := killGroupLeftovers(a.Pgid, a.Leader)
	if err != nil || len(pids) == 0 {
		return 0, err
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

// ownerOfName reads the daemon of a records file's name:
// PID-START.records, or an earlier version's per-attempt
// PID-START-PGID.json.
func ownerOfName(name string) (procID, bool) {
	var f []string
	if base, ok := strings.CutSuffix(name, recordsExt); ok {
		if f = strings.Split(base, "-"); len(f) != 2 {
			return procID{}, false
		}
	} else if base, ok := strings.CutSuffix(name, ".json"); ok {
		if f = strings.Split(base, "-"); len(f) != 3 {
			return procID{}, false
		}
	} else {
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
