package supervise

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// superviseArg, as the test binary's first argument, makes it the
// supervisor (TestMain).
const superviseArg = "anarchon-test-supervise"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == superviseArg {
		os.Exit(Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// supervise runs this test binary as the supervisor of argv with the spec
// (none when nil) and returns the exit code and the combined output.
func supervise(t *testing.T, spec *Spec, argv ...string) (int, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{superviseArg, "--"}, argv...)...)
	// The race runtime's 1 s sleep at exit is not what is tested here.
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0", "SUPERVISE_TEST=kept")
	if spec != nil {
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, Env+"="+string(b))
	}
	// Its own group, like the runner starts it: a killed group is not ours.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState == nil {
		t.Fatalf("the supervisor did not run: %s", out)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		argv   []string
		code   int
		output string
	}{
		{"success", []string{"/bin/sh", "-c", "true"}, 0, ""},
		{"exit code", []string{"/bin/sh", "-c", "exit 3"}, 3, ""},
		{"killed by a signal", []string{"/bin/sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
		{"not found", []string{"/nonexistent/program"}, ExitNotFound, prefix},
		{"not executable", []string{"/etc/hostname"}, ExitCannotExecute, prefix},
		{"no command", nil, ExitMisuse, prefix + "no command given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out := supervise(t, nil, tc.argv...)
			if code != tc.code || !strings.Contains(out, tc.output) {
				t.Errorf("exit %d, output %q; want %d, %q", code, out, tc.code, tc.output)
			}
		})
	}
}

func TestBadSpec(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, superviseArg, "--", "/bin/true")
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0", Env+"=not json")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != ExitMisuse || !strings.Contains(string(out), Env) {
		t.Errorf("exit %v, output %q; want %d and a word on %s", cmd.ProcessState, out, ExitMisuse, Env)
	}
}

// The job runs in the spec's directory, with the supervisor's environment
// but not the spec itself.
func TestJobSetting(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	code, out := supervise(t, &Spec{Parent: os.Getpid(), Dir: dir},
		"/bin/sh", "-c", `pwd; echo "kept=$SUPERVISE_TEST"; echo "spec=${`+Env+`-unset}"`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{dir + "\n", "kept=kept\n", "spec=unset\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the job printed %q, want %q in it", out, want)
		}
	}
}
