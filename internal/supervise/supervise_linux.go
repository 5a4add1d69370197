package supervise

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Main is the supervisor: the body of anarchon-supervise and of the hidden
// `anarchond supervise` command. argv is the job's argv (a leading "--" is
// skipped). It returns the exit code for os.Exit.
//
// The runner starts the supervisor as the leader of a new process group with
// the parent-death signal SIGTERM, and passes the daemon's pid, the workdir
// and the job's credentials in Env. The supervisor starts the job in its own
// process group, with its own stdio and environment (without Env), and waits
// for it. On SIGTERM, SIGINT or SIGHUP it checks its parent: if the daemon is
// gone (the parent-death signal) it SIGKILLs the whole group, itself
// included; otherwise the signal came from the daemon to the whole group, the
// job got it too, and the supervisor keeps waiting. It exits with the job's
// exit code, 128+N if the job was killed by signal N, ExitNotFound if the
// program was not found, ExitCannotExecute if it could not be started, and
// ExitMisuse when the supervisor itself is misused.
//
// Given GuardFlag alone, Main is the daemon's job guard instead (Guard).
func Main(argv []string) int {
	// Catch, not ignore: an ignored disposition would be inherited by the job.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	if len(argv) == 1 && argv[0] == GuardFlag {
		return Guard(os.Stdin)
	}
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, prefix+"no command given")
		return ExitMisuse
	}
	spec, ok := readSpec()
	if !ok {
		return ExitMisuse
	}
	s := supervisor{sigs: sigs, parent: spec.Parent}
	// The daemon may have died before the handler was installed.
	s.killIfOrphaned()

	cmd := jobCommand(argv, spec)
	// The parent-death signal may have arrived while the command was being
	// prepared: never start a job for a daemon that is gone.
	select {
	case <-sigs:
		s.killIfOrphaned()
	default:
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, prefix+"%v\n", err)
		return StartFailureCode(err)
	}
	return s.wait(cmd)
}

// readSpec reads the runner's instructions from Env and removes it from the
// environment the job inherits; without them the daemon is the supervisor's
// parent. It prints why and returns false when Env cannot be read.
func readSpec() (Spec, bool) {
	var spec Spec
	if s, ok := os.LookupEnv(Env); ok {
		if err := json.Unmarshal([]byte(s), &spec); err != nil {
			fmt.Fprintf(os.Stderr, prefix+"%s: %v\n", Env, err)
			return spec, false
		}
		os.Unsetenv(Env)
	}
	if spec.Parent == 0 {
		spec.Parent = os.Getppid()
	}
	return spec, true
}

// jobCommand is the job's command as spec says to run it: its workdir and
// credentials, the supervisor's stdio and environment.
func jobCommand(argv []string, spec Spec) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Dir = spec.Dir
	// The job's environment as the runner built it: set explicitly, so that
	// os/exec adds no PWD (a job started directly gets none either).
	cmd.Env = os.Environ()
	if spec.UID != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: *spec.UID, Gid: spec.GID, Groups: spec.Groups,
		}}
	}
	return cmd
}

// supervisor is what Main watches besides the job: the signals it caught
// and the daemon's pid.
type supervisor struct {
	sigs   chan os.Signal
	parent int // the daemon's pid (Spec.Parent)
}

// killIfOrphaned kills the whole group, the supervisor included, when the
// daemon is gone: the supervisor's parent is no longer the daemon.
func (s supervisor) killIfOrphaned() {
	if os.Getppid() != s.parent {
		killGroup()
	}
}

// wait waits for the started job and returns its exit code; a signal in the
// meantime kills the group only if the daemon is gone (otherwise the daemon
// sent it to the whole group, and the job got it too).
func (s supervisor) wait(cmd *exec.Cmd) int {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			return exitCode(cmd.ProcessState)
		case <-s.sigs:
			s.killIfOrphaned()
		}
	}
}

// killGroup SIGKILLs the supervisor's process group, the supervisor included.
func killGroup() {
	_ = syscall.Kill(0, syscall.SIGKILL)
	os.Exit(128 + int(syscall.SIGKILL)) // not reached
}

// exitCode is the job's exit code as a shell reports it: 128+N for a job
// killed by signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
