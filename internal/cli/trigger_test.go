package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
	"github.com/anarchon/anarchon/internal/testserver"
)

// trigger writes one manual trigger in the job's control record, a little
// after now and never on a slot of the schedule; a pause written after it
// keeps it; bad input and a store that does not answer write nothing.
func TestTriggerWrites(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+twoJobs, 0o644)
	writeFile(t, dir, "down.yaml", "backend:\n  type: redis\n  redis: {url: \"redis://:s3cret@127.0.0.1:1/0\"}\n"+twoJobs, 0o644)
	before := time.Now()
	code, out, stderr := run(t, dir, "trigger", "--config", "c.yaml", "b")
	if code != 0 || !regexp.MustCompile(`^job b: run asked for at slot \S+ \(\d+\), by \S+@\S+\n$`).MatchString(out) {
		t.Fatalf("trigger: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	c := controlIn(t, filepath.Join(dir, "s.db"), "b")
	if c.Paused || len(c.Triggers) != 1 {
		t.Fatalf("the record after a trigger: %+v", c)
	}
	tr := c.Triggers[0]
	if tr.Kind != claim.TriggerManual || tr.Attempt != 1 || tr.By != caller(Env{}) || tr.Slot != tr.Due ||
		tr.Slot < before.Add(TriggerLead).UnixMilli() || tr.Slot > time.Now().Add(TriggerLead).UnixMilli() {
		t.Fatalf("the trigger: %+v (asked at %d)", tr, before.UnixMilli())
	}
	if code, _, stderr := run(t, dir, "pause", "--config", "c.yaml", "b"); code != 0 {
		t.Fatalf("pause: %s", stderr)
	}
	if c := controlIn(t, filepath.Join(dir, "s.db"), "b"); !c.Paused || len(c.Triggers) != 1 || c.Triggers[0] != tr {
		t.Fatalf("a pause dropped the pending trigger: %+v", c)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"trigger", "--config", "c.yaml", "nope"}, 2, `^anarchond: no job "nope" in c\.yaml; its jobs: a, b\n$`},
		{[]string{"trigger", "--config", "down.yaml", "a"}, 1, `^anarchond: store redis lease \(redis://:xxxxx@127\.0\.0\.1:1/0\): .*; nothing written\n$`},
	} {
		code, out, stderr := run(t, dir, tc.args...)
		if code != tc.code || out != "" || !regexp.MustCompile(tc.want).MatchString(stderr) || strings.Contains(stderr, "s3cret") {
			t.Fatalf("%v: exit %d (want %d), stdout %q, stderr %q, want %s", tc.args, code, tc.code, out, stderr, tc.want)
		}
	}
	if c := controlIn(t, filepath.Join(dir, "s.db"), "a"); c.Version != 0 {
		t.Fatalf("refused input wrote a's record: %+v", c)
	}
}

// trigger --wait prints the run once an instance ran it, as status --json
// does with its kind and who asked, and exits 1 when it did not succeed.
// The instance here is the test: it claims the run at the trigger's slot
// and records it failed.
func TestTriggerWait(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+twoJobs, 0o644)
	type result struct {
		code        int
		out, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, stderr := run(t, dir, "trigger", "--config", "c.yaml", "a", "--wait", "--json")
		done <- result{code, out, stderr}
	}()
	b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: filepath.Join(dir, "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var tr claim.Trigger
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		all, _ := b.Controls(t.Context())
		if len(all) == 1 && len(all[0].Triggers) == 1 {
			tr = all[0].Triggers[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no trigger written within 10s")
		}
	}
	req := claimed(t, b, time.UnixMilli(tr.Slot), time.Minute)
	if err := b.Finish(t.Context(), req.Fence(1), claim.Finish{Status: claim.StatusFailed, ExitCode: 3}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	var rec map[string]any
	if err := json.Unmarshal([]byte(r.out), &rec); r.code != 1 || err != nil {
		t.Fatalf("trigger --wait: exit %d (want 1), stdout %q (%v), stderr %q", r.code, r.out, err, r.stderr)
	}
	if rec["slot_ms"] != float64(tr.Slot) || rec["status"] != "failed" || rec["kind"] != "manual" ||
		rec["requested_by"] != caller(Env{}) || rec["exit_code"] != float64(3) {
		t.Fatalf("trigger --wait printed %s", r.out)
	}
	if !strings.Contains(r.stderr, "the run of a ended failed") {
		t.Fatalf("stderr %q", r.stderr)
	}
	code, out, _ := run(t, dir, "status", "--config", "c.yaml", "--json")
	if code != 0 || !strings.Contains(out, `"kind":"manual","requested_by":"`+caller(Env{})+`","retry_of_slot_ms":null}`) {
		t.Fatalf("status: exit %d:\n%s", code, out)
	}
}

// On RabbitMQ trigger says that it is not supported, and why.
func TestTriggerRefusedOnRabbitMQ(t *testing.T) {
	testserver.For("rabbitmq").Require(t, "")
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "namespace: trig-"+testserver.RandomID()+"\nbackend:\n  type: rabbitmq\n"+twoJobs, 0o644)
	code, out, stderr := run(t, dir, "trigger", "--config", "c.yaml", "a")
	if code != 1 || out != "" || !strings.HasPrefix(stderr, "anarchond: trigger is not supported on backend rabbitmq: a queue cannot be read") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// trigger --wait with no instance to pick the trigger up gives up once the
// pickup window after its slot is over: exit 1, saying so.
func TestTriggerWaitNobody(t *testing.T) {
	defer func(w time.Duration) { pickupWindow = w }(pickupWindow)
	pickupWindow = 300 * time.Millisecond
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+twoJobs, 0o644)
	code, out, stderr := run(t, dir, "trigger", "--config", "c.yaml", "a", "--wait")
	if code != 1 || !strings.HasPrefix(out, "job a: run asked for at slot ") ||
		!regexp.MustCompile(`^anarchond: no instance picked up the trigger within 300ms \(slot \S+\): is anarchond running`).MatchString(stderr) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}
