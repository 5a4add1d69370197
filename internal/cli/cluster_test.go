package cli

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/cluster"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
	"github.com/anarchon/anarchon/internal/testserver"
)

// cluster lists the live instances and the gone ones within their
// retention, one JSON object each with the documented fields; it and jobs
// name the job whose definitions differ.
func TestClusterListsInstancesAndDrift(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+twoJobs, 0o644)
	b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: filepath.Join(dir, "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a := config.Job{Name: "a", Schedule: "*/30 * * * *", Command: "true"}
	changed := a
	changed.Command = "false"
	beat := func(name, version string, ttl time.Duration, jobs ...config.Job) {
		h, all := cluster.JobHashes(jobs)
		inst := claim.Instance{Name: name, Host: "host-" + name, PID: 7, Version: version, StartedAt: time.Now(),
			LastSeen: time.Now(), Retain: time.Hour, Jobs: h, JobsHash: all}
		if _, err := b.Beat(t.Context(), inst, ttl); err != nil {
			t.Fatal(err)
		}
	}
	beat("i1", "1.1.0", time.Minute, a)
	beat("i2", "1.0.0", time.Minute, changed)
	beat("old", "0.9.0", 0, a) // stopped: gone, listed within its retention

	code, out, stderr := run(t, dir, "cluster", "--config", "c.yaml", "--json")
	if code != 0 {
		t.Fatalf("cluster: exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	for line := range strings.Lines(out) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		for _, f := range []string{"instance", "host", "version", "tags", "started_at", "last_seen", "alive", "skew_ms", "jobs_hash"} {
			if _, ok := r[f]; !ok {
				t.Fatalf("a cluster --json line lacks %s: %s", f, line)
			}
		}
		rows = append(rows, r)
	}
	if len(rows) != 3 || rows[0]["instance"] != "i1" || rows[1]["instance"] != "i2" || rows[2]["instance"] != "old" ||
		rows[0]["alive"] != true || rows[2]["alive"] != false || rows[1]["outdated"] != true || rows[0]["outdated"] != false {
		t.Fatalf("cluster --json:\n%s", out)
	}
	if d := rows[0]["drift"].([]any); len(d) != 1 || d[0] != "a" {
		t.Fatalf("i1's drift: %v", d)
	}
	code, out, _ = run(t, dir, "cluster", "--config", "c.yaml")
	if code != 0 || !strings.Contains(out, "drift: job a: command/args/shell differ: i1: ") ||
		!strings.Contains(out, "outdated: i2 runs 1.0.0, older than 1.1.0") || !strings.Contains(out, "gone") {
		t.Fatalf("cluster table (exit %d):\n%s", code, out)
	}
	rowsOf := jobsOf(t, dir)
	if ra := rowsOf["a"]; !ra.Drift || !slices.Equal(ra.DriftFields, []string{"command/args/shell"}) || rowsOf["b"].Drift {
		t.Fatalf("jobs: %+v", rowsOf)
	}
}

// On RabbitMQ, cluster says that the backend keeps no instance records.
func TestClusterRefusedOnRabbitMQ(t *testing.T) {
	testserver.For("rabbitmq").Require(t, "")
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "namespace: cluster-"+testserver.RandomID()+"\nbackend:\n  type: rabbitmq\n"+twoJobs, 0o644)
	code, out, stderr := run(t, dir, "cluster", "--config", "c.yaml")
	if code != 1 || out != "" || !strings.HasPrefix(stderr, "anarchond: the backend keeps no instance records: backend rabbitmq: a queue cannot be read") {
		t.Fatalf("cluster: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}
