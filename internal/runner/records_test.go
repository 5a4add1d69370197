package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// groupWithChild starts `sh` leading a new process group with a
// background sleep, and returns the shell and the sleep's pid.
func groupWithChild(t *testing.T) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	var line [32]byte
	n, _ := out.Read(line[:])
	child, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil {
		t.Fatalf("the shell printed %q: %v", line[:n], err)
	}
	return cmd, child
}

// recordFor writes the record of cmd's group, as edit changes it, into a
// file of records of the daemon owner, in its second slot (the first one
// free), and returns the file's path.
func recordFor(t *testing.T, rs *Records, cmd *exec.Cmd, owner procID, edit func(*attemptRecord)) string {
	t.Helper()
	start, err := startTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	a := attemptRecord{Boot: rs.boot, Daemon: owner, Pgid: cmd.Process.Pid, Leader: start,
		Job: "j", Slot: "2027-01-01T00:00:00Z", Attempt: 1, Instance: "i1"}
	if edit != nil {
		edit(&a)
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	file := make([]byte, recordSize+len(b)+1)
	copy(file[recordSize:], append(b, '\n'))
	path := filepath.Join(rs.Dir(), fmt.Sprintf("%d-%d%s", owner.Pid, owner.Start, recordsExt))
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// gone is a daemon that is no longer running: its pid now names a process
// started at another time.
func gone(rs *Records) procID { return procID{Pid: rs.self.Pid, Start: rs.self.Start + 1} }

func awaitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, _, err := statOf(pid); err != nil || zombie(pid) {
			return
		}
	}
	t.Fatalf("process %d still runs", pid)
}

func openRecords(t *testing.T) (*Records, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.WarnLevel)
	rs, err := OpenRecords(t.TempDir(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	return rs, logs
}

func TestReapKillsTheGroupOfADeadDaemon(t *testing.T) {
	rs, logs := openRecords(t)
	cmd, child := groupWithChild(t)
	path := recordFor(t, rs, cmd, gone(rs), nil)
	n, err := rs.Reap()
	if err != nil || n != 1 {
		t.Fatalf("Reap() = %d, %v; want 1 attempt reaped", n, err)
	}
	awaitGone(t, child)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the record is left after reaping: %v", err)
	}
	if logs.Len() != 1 || !strings.Contains(logs.All()[0].Message, "daemon and job guard died together") {
		t.Fatalf("logged %v; want one warning naming the attempt", logs.All())
	}
	f := logs.All()[0].ContextMap()
	if f["job"] != "j" || f["attempt"] != int64(1) {
		t.Errorf("the warning's fields are %v", f)
	}
}

func TestReapLeavesTheJobsOfALiveDaemon(t *testing.T) {
	rs, logs := openRecords(t)
	sibling := exec.Command("sleep", "300")
	if err := sibling.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sibling.Process.Kill(); _ = sibling.Wait() }()
	owner, err := procOf(sibling.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cmd, child := groupWithChild(t)
	path := recordFor(t, rs, cmd, owner, nil)
	if n, err := rs.Reap(); err != nil || n != 0 {
		t.Fatalf("Reap() = %d, %v; want nothing reaped", n, err)
	}
	if _, _, err := statOf(child); err != nil || zombie(child) {
		t.Errorf("the live daemon's job was killed")
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the live daemon's record is gone: %v", err)
	}
	if logs.Len() != 0 {
		t.Errorf("logged %v", logs.All())
	}
}

func TestReapDropsTheRecordsOfAnotherBoot(t *testing.T) {
	rs, _ := openRecords(t)
	cmd, child := groupWithChild(t)
	path := recordFor(t, rs, cmd, gone(rs), func(a *attemptRecord) { a.Boot = "another-boot" })
	if n, err := rs.Reap(); err != nil || n != 0 {
		t.Fatalf("Reap() = %d, %v; want nothing reaped", n, err)
	}
	if _, _, err := statOf(child); err != nil {
		t.Errorf("a process matched by a record of another boot was killed")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the record of another boot is left: %v", err)
	}
}

// A group id reused by a new group (a process whose pid is the recorded
// group's, started later) is never killed.
func TestReapSparesAReusedGroupID(t *testing.T) {
	rs, logs := openRecords(t)
	cmd, child := groupWithChild(t)
	// The recorded leader started before the process now there.
	recordFor(t, rs, cmd, gone(rs), func(a *attemptRecord) { a.Leader-- })
	if n, err := rs.Reap(); err != nil || n != 0 {
		t.Fatalf("Reap() = %d, %v; want nothing reaped", n, err)
	}
	if _, _, err := statOf(child); err != nil || zombie(child) {
		t.Errorf("a process of a reused group id was killed")
	}
	if logs.Len() != 0 {
		t.Errorf("logged %v", logs.All())
	}
}

func TestOpenRecordsCreatesAPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	rs, err := OpenRecords(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, rs.Dir()} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a directory with mode 0700", d, fi.Mode(), err)
		}
	}
}

// recordIn returns the record in slot of the file at path, "" when the slot
// is free (all zeros); it fails the test on a slot that is neither.
func recordIn(t *testing.T, path string, slot int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := make([]byte, recordSize)
	if off := slot * recordSize; off < int64(len(b)) {
		copy(s, b[off:])
	}
	if strings.Trim(string(s), "\x00") == "" {
		return ""
	}
	rec, rest, ok := strings.Cut(string(s), "\n")
	if !ok || strings.Trim(rest, "\x00") != "" || !strings.HasPrefix(rec, "{") {
		t.Fatalf("slot %d of %s holds %q: want a line of JSON and zeros, or zeros", slot, path, strings.TrimRight(string(s), "\x00"))
	}
	return rec
}

func TestRecordsAddAndRemove(t *testing.T) {
	rs, _ := openRecords(t)
	cmd, _ := groupWithChild(t)
	a := attemptRecord{Job: "j", Slot: "2027-01-01T00:00:00Z", Attempt: 2, Instance: "i1"}
	first, err := rs.add(cmd.Process.Pid, a)
	if err != nil {
		t.Fatal(err)
	}
	second, err := rs.add(cmd.Process.Pid, a)
	if err != nil || second == first {
		t.Fatalf("second add: slot %d (first %d), %v", second, first, err)
	}
	var got attemptRecord
	if err := json.Unmarshal([]byte(recordIn(t, rs.path, first)), &got); err != nil {
		t.Fatal(err)
	}
	start, _ := startTime(cmd.Process.Pid)
	if got.Pgid != cmd.Process.Pid || got.Leader != start || got.Daemon != rs.self || got.Boot != rs.boot ||
		got.Job != "j" || got.Attempt != 2 {
		t.Errorf("record %+v", got)
	}
	rs.remove(first)
	if s := recordIn(t, rs.path, first); s != "" {
		t.Errorf("slot %d holds %q after remove; want it zeroed", first, s)
	}
	if again, err := rs.add(cmd.Process.Pid, a); err != nil || again != first {
		t.Errorf("add after remove: slot %d, %v; want the freed slot %d", again, err, first)
	}
	// Close keeps a file that still holds records: the next daemon reaps
	// them.
	if err := rs.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rs.path); err != nil {
		t.Errorf("the file of records that still hold groups is gone: %v", err)
	}
}

func TestCloseRemovesTheRecordsOfNoAttempt(t *testing.T) {
	rs, _ := openRecords(t)
	cmd, _ := groupWithChild(t)
	slot, err := rs.add(cmd.Process.Pid, attemptRecord{Job: "j"})
	if err != nil {
		t.Fatal(err)
	}
	rs.remove(slot)
	if err := rs.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rs.path); !os.IsNotExist(err) {
		t.Errorf("the file of records is left after Close: %v", err)
	}
}

// A dead daemon of an earlier version left one file per attempt.
func TestReapReadsAnEarlierVersionsRecord(t *testing.T) {
	rs, logs := openRecords(t)
	cmd, child := groupWithChild(t)
	owner := gone(rs)
	start, _ := startTime(cmd.Process.Pid)
	b, _ := json.Marshal(attemptRecord{Boot: rs.boot, Daemon: owner, Pgid: cmd.Process.Pid, Leader: start, Job: "j", Attempt: 1})
	path := filepath.Join(rs.Dir(), fmt.Sprintf("%d-%d-%d.json", owner.Pid, owner.Start, cmd.Process.Pid))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := rs.Reap(); err != nil || n != 1 {
		t.Fatalf("Reap() = %d, %v; want 1 attempt reaped", n, err)
	}
	awaitGone(t, child)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the record is left after reaping: %v", err)
	}
	if _, err := os.Stat(rs.path); err != nil {
		t.Errorf("Reap touched this daemon's own records: %v", err)
	}
	if logs.Len() != 1 {
		t.Errorf("logged %v; want one warning", logs.All())
	}
}
