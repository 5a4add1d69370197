package runner

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// statOf reads the process group (field 5) and the start time (field 22,
// clock ticks since boot) of pid from /proc/PID/stat.
func statOf(pid int) (pgrp int, start uint64, err error) {
	var buf [1024]byte
	b, err := readStat(pid, buf[:])
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold anything
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	if pgrp, err = strconv.Atoi(f[2]); err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	if start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return pgrp, start, nil
}

// readStat reads /proc/PID/stat into buf with plain system calls: the
// runner reads it after every fork, and an os.File costs several more
// calls and allocations. The line is far shorter than buf (the command
// name is at most 64 bytes, the 50 other fields numbers).
func readStat(pid int, buf []byte) ([]byte, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
	}
	return nil, fmt.Errorf("%s: longer than %d bytes", path, len(buf))
}

// startTime is pid's start time in clock ticks since boot.
func startTime(pid int) (uint64, error) {
	_, start, err := statOf(pid)
	return start, err
}

// bootID identifies the running boot of the host.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b)), err
}

// maxReapRounds bounds the scans of killGroupLeftovers: a process forked
// between a scan and the kills is found by the next scan.
const maxReapRounds = 10

// killGroupLeftovers SIGKILLs every process of the process group pgid that
// started no earlier than the group's leader (leaderStart), scanning /proc
// until none is left, and returns their pids. When a process whose pid is
// pgid runs but started at another time than the leader, the id has been
// reused by a new group (Linux hands out no pid still in use as a group
// id, so the old group was empty then): nothing is killed.
func killGroupLeftovers(pgid int, leaderStart uint64) ([]int, error) {
	if _, start, err := statOf(pgid); err == nil && start != leaderStart {
		return nil, nil
	}
	var killed []int
	for range maxReapRounds {
		pids, err := groupMembers(pgid, leaderStart)
		if err != nil {
			return killed, err
		}
		if len(pids) == 0 {
			return killed, nil
		}
		for _, pid := range pids {
			if killIfMember(pid, pgid, leaderStart) {
				killed = append(killed, pid)
			}
		}
	}
	return killed, fmt.Errorf("process group %d still has processes after %d rounds of SIGKILL", pgid, maxReapRounds)
}

// groupMembers lists the live processes of group pgid started no earlier
// than leaderStart (never this process).
func groupMembers(pgid int, leaderStart uint64) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == os.Getpid() {
			continue
		}
		if pg, start, err := statOf(pid); err == nil && pg == pgid && start >= leaderStart && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// zombie reports whether pid has exited and waits to be reaped by its
// parent: killing it again is pointless, and it is not left running.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) < i+3 || s[i+2] == 'Z' || s[i+2] == 'X'
}

// killIfMember SIGKILLs pid if it is still a member of group pgid started
// no earlier than leaderStart: through a pidfd opened before the check, so
// that a pid reused in between is never signalled.
func killIfMember(pid, pgid int, leaderStart uint64) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.3: a plain kill, right after the check.
		if pg, start, err := statOf(pid); err == nil && pg == pgid && start >= leaderStart {
			return syscall.Kill(pid, syscall.SIGKILL) == nil
		}
		return false
	}
	if err != nil {
		return false // gone
	}
	defer unix.Close(fd)
	if pg, start, err := statOf(pid); err != nil || pg != pgid || start < leaderStart {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}
