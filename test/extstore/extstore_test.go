package extstore

// The tests drive the memory store as a user would: through anarchond's
// commands, run in-process (internal/cli), and the conformance suite.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/claimtest"
	"github.com/anarchon/anarchon/internal/cli"
	"github.com/anarchon/anarchon/internal/store"
	"github.com/anarchon/anarchon/internal/testserver"
)

// The test binary is also the jobs' supervisor, as anarchond is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ()}))
	}
	os.Exit(m.Run())
}

// anarchond runs the command line in-process and returns its exit code and
// output.
func anarchond(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(ctx, args, cli.Env{Stdout: &out, Stderr: &errb, Environ: []string{"PATH=/usr/bin:/bin"}})
	return code, out.String(), errb.String()
}

// crontab writes a crontab on the memory store called name, with a job
// that appends its slot to ticks every second, and returns its path.
func crontab(t *testing.T, name, ticks string) string {
	t.Helper()
	body := fmt.Sprintf(`metrics: {listen: "127.0.0.1:0"}
backend:
  type: memory
  memory: {name: %s}
jobs:
  - name: tick
    schedule: "* * * * * *"
    command: echo "$ANARCHON_SLOT_MS" >> %s
`, name, ticks)
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// validate accepts the crontab and opens the store, naming it as the
// store describes itself.
func TestValidate(t *testing.T) {
	path := crontab(t, "validate", filepath.Join(t.TempDir(), "ticks"))
	code, out, stderr := anarchond(t.Context(), "validate", "--config", path)
	if code != cli.ExitOK {
		t.Fatalf("validate: exit %d: %s", code, stderr)
	}
	desc := Settings{Name: "validate"}.Describe()
	for _, want := range []string{"ok: 1 job(s), backend " + desc + ", instance ", "store ok: " + desc + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate says %q; want %q in it", out, want)
		}
	}
}

// TestRunThenStatus proves that a store is one package and one
// registration: the memory store relies on test/extstore/extstore.go
// alone, whose init registers it (store.Register), and on no change to
// any other file of the module. Registered, it is a backend.type as the
// built-in stores are (which internal/cli/cli.go imports, one line each;
// here the store's own package is the test's). `run` runs the job every
// second until it is stopped; `status --all --json` then lists each run
// the job made as succeeded.
func TestRunThenStatus(t *testing.T) {
	ticks := filepath.Join(t.TempDir(), "ticks")
	path := crontab(t, "run", ticks)
	ctx, stop := context.WithTimeout(t.Context(), 4500*time.Millisecond)
	defer stop()
	if code, _, stderr := anarchond(ctx, "run", "--config", path); code != cli.ExitOK {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(ticks)
	if err != nil {
		t.Fatalf("the job never ran: %v", err)
	}
	ran := strings.Fields(string(b))
	if len(ran) < 2 {
		t.Fatalf("the job ran %d time(s) in 4.5 s, want 2 or more", len(ran))
	}

	code, out, stderr := anarchond(t.Context(), "status", "--config", path, "--all", "--json")
	if code != cli.ExitOK {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var succeeded []string
	for line := range strings.Lines(out) {
		var r struct {
			Job    string `json:"job"`
			SlotMs int64  `json:"slot_ms"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("status line %q: %v", line, err)
		}
		if r.Job == "tick" && r.Status == string(claim.StatusSucceeded) {
			succeeded = append(succeeded, strconv.FormatInt(r.SlotMs, 10))
		}
	}
	t.Logf("the job ran %d times; status --all --json:\n%s", len(ran), out)
	for _, slot := range ran {
		if !slices.Contains(succeeded, slot) {
			t.Errorf("the run of slot %s is not listed as succeeded:\n%s", slot, out)
		}
	}
}

// The harnesses find the store in the registry, as a local lease store,
// and give a test its own set of runs (store.Testing.Isolate).
func TestHarnessesFindIt(t *testing.T) {
	target, err := testserver.Find("memory")
	if err != nil {
		t.Fatal(err)
	}
	if target.Server != nil || !target.Driver.Local || !target.Settings.Leases() {
		t.Fatalf("target %s: server %v, local %v, leases %v; want no server, local, leases",
			target.Name, target.Server, target.Driver.Local, target.Settings.Leases())
	}
	place, err := target.Isolate(t.Context(), "", "harness_1", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "memory", "memory": map[string]any{"name": "harness_1"}}
	if got := place.Backend(nil); !reflect.DeepEqual(got, want) {
		t.Errorf("the place's backend block is %v, want %v", got, want)
	}
	if err := place.Cleanup(t.Context()); err != nil {
		t.Error(err)
	}
}

// The store passes the conformance suite of the claim backends.
func TestConformance(t *testing.T) {
	var (
		mu    sync.Mutex
		n     int
		names = map[claim.Backend]string{} // the set of runs each backend opened
	)
	openSet := func(t *testing.T, name string) claim.Backend {
		b, err := store.Open(t.Context(), "memory", store.OpenParams{Settings: Settings{Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	claimtest.Exercise(t, claimtest.Harness{
		New: func(t *testing.T) claim.Backend {
			mu.Lock()
			n++
			name := fmt.Sprintf("conformance_%d", n)
			mu.Unlock()
			t.Cleanup(func() { forget(name) })
			b := openSet(t, name)
			mu.Lock()
			names[b] = name
			mu.Unlock()
			return b
		},
		// Another opening of the same set of runs.
		Open: func(t *testing.T, b claim.Backend) claim.Backend {
			mu.Lock()
			name := names[b]
			mu.Unlock()
			return openSet(t, name)
		},
	})
}
