package runner

import (
	"encoding/json"
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

// recordFor writes the record of cmd's group as the daemon owner wrote it.
func recordFor(t *testing.T, rs *Records, cmd *exec.Cmd, owner procID) string {
	t.Helper()
	path, err := rs.add(cmd.Process.Pid, attemptRecord{Job: "j", Slot: "2027-01-01T00:00:00Z", Attempt: 1, Instance: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var a attemptRecord
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	a.Daemon = owner
	b, _ = json.Marshal(a)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

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
	// The daemon that wrote the record is gone: its pid now names a
	// process started at another time.
	path := recordFor(t, rs, cmd, procID{Pid: rs.self.Pid, Start: rs.self.Start + 1})
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
	path := recordFor(t, rs, cmd, owner)
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
	path := recordFor(t, rs, cmd, procID{Pid: rs.self.Pid, Start: rs.self.Start + 1})
	b, _ := os.ReadFile(path)
	b = []byte(strings.Replace(string(b), rs.boot, "another-boot", 1))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
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
	path := recordFor(t, rs, cmd, procID{Pid: rs.self.Pid, Start: rs.self.Start + 1})
	b, _ := os.ReadFile(path)
	var a attemptRecord
	_ = json.Unmarshal(b, &a)
	a.Leader-- // the recorded leader started before the process now there
	b, _ = json.Marshal(a)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
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
