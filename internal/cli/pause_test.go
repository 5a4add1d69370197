package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
	"github.com/anarchon/anarchon/internal/testserver"
)

const twoJobs = `jobs:
  - name: a
    schedule: "*/30 * * * *"
    timezone: Europe/Athens
    command: "true"
  - name: b
    schedule: "@hourly"
    command: "true"
`

// jobRow is one line of jobs --json.
type jobRow struct {
	Job          string   `json:"job"`
	Schedule     string   `json:"schedule"`
	Timezone     string   `json:"timezone"`
	NextSlot     *string  `json:"next_slot"`
	NextSlotMs   *int64   `json:"next_slot_ms"`
	Paused       bool     `json:"paused"`
	PausedUntil  *string  `json:"paused_until"`
	PausedReason string   `json:"paused_reason"`
	PausedBy     string   `json:"paused_by"`
	LastStatus   *string  `json:"last_status"`
	LastSlotMs   *int64   `json:"last_slot_ms"`
	Tags         []string `json:"tags"`
	PerInstance  bool     `json:"per_instance"`
	RunsHere     bool     `json:"runs_here"`
	Drift        bool     `json:"drift"`
	DriftFields  []string `json:"drift_fields"`
}

// jobsOf runs jobs --json in dir and returns its rows by job, checking
// that each line has exactly the documented fields.
func jobsOf(t *testing.T, dir string) map[string]jobRow {
	t.Helper()
	code, out, stderr := run(t, dir, "jobs", "--config", "c.yaml", "--json")
	if code != 0 {
		t.Fatalf("jobs: exit %d: %s", code, stderr)
	}
	rows := map[string]jobRow{}
	for line := range strings.Lines(out) {
		var fields map[string]any
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		if len(fields) != 16 {
			t.Fatalf("a jobs --json line has %d fields, want 16: %s", len(fields), line)
		}
		var r jobRow
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		rows[r.Job] = r
	}
	return rows
}

// pause, resume and jobs on one store: the pause is the store's record,
// shown by jobs with its until, reason and author; a resume ends it; a
// resume of a job not paused writes nothing.
func TestPauseResumeJobs(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+twoJobs, 0o644)
	rows := jobsOf(t, dir)
	if len(rows) != 2 || rows["a"].Paused || rows["a"].Schedule != "*/30 * * * *" || rows["a"].Timezone != "Europe/Athens" ||
		rows["a"].NextSlotMs == nil || rows["a"].LastStatus != nil {
		t.Fatalf("jobs before any pause: %+v", rows)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	code, out, stderr := run(t, dir, "pause", "--config", "c.yaml", "a", "--until", until.Format(time.RFC3339), "--reason", "db migration")
	by := caller(Env{})
	want := "job a paused until " + until.Format(time.RFC3339) + ", by " + by + " at "
	if code != 0 || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, ": db migration\n") {
		t.Fatalf("pause: exit %d, stdout %q (want %q...), stderr %q", code, out, want, stderr)
	}
	rows = jobsOf(t, dir)
	a := rows["a"]
	if !a.Paused || a.PausedUntil == nil || *a.PausedUntil != until.Format(time.RFC3339) || a.PausedReason != "db migration" ||
		a.PausedBy != by || rows["b"].Paused {
		t.Fatalf("jobs after pausing a: %+v", rows)
	}
	code, out, _ = run(t, dir, "jobs", "--config", "c.yaml")
	if code != 0 || !regexp.MustCompile(`(?m)^a +\*/30 \* \* \* \* +Europe/Athens +\S+ +until \S+ by \S+: db migration +- +-$`).MatchString(out) {
		t.Fatalf("jobs table (exit %d):\n%s", code, out)
	}
	code, out, _ = run(t, dir, "resume", "--config", "c.yaml", "a")
	if code != 0 || !strings.HasPrefix(out, "job a resumed, by "+by) {
		t.Fatalf("resume: exit %d, stdout %q", code, out)
	}
	if rows = jobsOf(t, dir); rows["a"].Paused || rows["a"].PausedUntil != nil || rows["a"].PausedBy != "" {
		t.Fatalf("jobs after the resume: %+v", rows["a"])
	}
	code, out, _ = run(t, dir, "resume", "--config", "c.yaml", "a")
	if code != 0 || out != "job a is not paused: nothing to resume\n" {
		t.Fatalf("a second resume: exit %d, stdout %q", code, out)
	}
	if c := controlIn(t, filepath.Join(dir, "s.db"), "a"); c.Version != 2 || c.Paused {
		t.Fatalf("the record after pause, resume, resume: %+v, want version 2 not paused", c)
	}
}

// controlIn reads job's control record from the SQLite file.
func controlIn(t *testing.T, path, job string) claim.Control {
	t.Helper()
	b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	all, err := b.Controls(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Job == job {
			return c
		}
	}
	return claim.Control{}
}

// jobs shows each job's newest run or note, and its text is escaped.
func TestJobsShowsLastOutcome(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+twoJobs, 0o644)
	b, err := sqliteclaim.New(t.Context(), sqliteclaim.Options{Path: filepath.Join(dir, "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().Truncate(time.Second)
	req := claimed(t, b, now.Add(-time.Minute), time.Hour)
	if err := b.Finish(t.Context(), req.Fence(1), claim.Finish{Status: claim.StatusFailed, ExitCode: 3}); err != nil {
		t.Fatal(err)
	}
	n := claim.Note{Job: "b", Slot: now.UnixMilli(), Status: claim.StatusSkipped, Reason: "paused", Instance: "i1", At: now}
	if _, err := b.Record(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	p := claim.Control{Job: "b", Paused: true, Reason: "evil\x1b[2J\nreason", By: "op\u202e@host", At: now.UnixMilli()}
	if _, err := b.SetControl(t.Context(), p, 0); err != nil {
		t.Fatal(err)
	}
	rows := jobsOf(t, dir)
	if r := rows["a"]; r.LastStatus == nil || *r.LastStatus != "failed" || *r.LastSlotMs != req.Slot {
		t.Fatalf("a's last outcome: %+v", r)
	}
	if r := rows["b"]; r.LastStatus == nil || *r.LastStatus != "skipped" || *r.LastSlotMs != n.Slot ||
		r.PausedReason != `evil\x1b[2J\x0areason` || r.PausedBy != `op\u202e@host` {
		t.Fatalf("b's row: %+v", r)
	}
	code, out, _ := run(t, dir, "jobs", "--config", "c.yaml")
	if code != 0 || !strings.Contains(out, "skipped (paused) ") || strings.ContainsAny(out, "\x1b\u202e") ||
		strings.Count(out, "\n") != 3 {
		t.Fatalf("jobs table (exit %d):\n%s", code, out)
	}
}

// Bad input is refused with exit 2 before the store is opened: an unknown
// job (with the crontab's jobs), an until in the past or not RFC 3339, a
// reason too long; a store that does not answer is exit 1 naming it.
// Nothing is written.
func TestPauseBadInput(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "backend:\n  sqlite: {path: s.db}\n"+twoJobs, 0o644)
	writeFile(t, dir, "down.yaml", "backend:\n  type: redis\n  redis: {url: \"redis://:s3cret@127.0.0.1:1/0\"}\n"+twoJobs, 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // regexp over stderr
	}{
		{"unknown job", []string{"pause", "--config", "c.yaml", "nope"}, 2, `^anarchond: no job "nope" in c\.yaml; its jobs: a, b\n$`},
		{"unknown job resumed", []string{"resume", "--config", "c.yaml", "nope"}, 2, `no job "nope" in c\.yaml; its jobs: a, b`},
		{"until in the past", []string{"pause", "--config", "c.yaml", "a", "--until", "2001-01-01T00:00:00Z"}, 2,
			`^anarchond: --until 2001-01-01T00:00:00Z is not in the future \(now .*\)\n$`},
		{"until not RFC 3339", []string{"pause", "--config", "c.yaml", "a", "--until", "tomorrow"}, 2,
			`^anarchond: --until "tomorrow": want RFC 3339`},
		{"reason too long", []string{"pause", "--config", "c.yaml", "a", "--reason", strings.Repeat("x", 1025)}, 2,
			`--reason of 1025 bytes: at most 1024`},
		{"no job", []string{"pause", "--config", "c.yaml"}, 2, `accepts 1 arg`},
		{"store down", []string{"pause", "--config", "down.yaml", "a"}, 1,
			`^anarchond: store redis lease \(redis://:xxxxx@127\.0\.0\.1:1/0\): .*connection refused.*; nothing written\n$`},
		{"store down, jobs", []string{"jobs", "--config", "down.yaml"}, 1, `^anarchond: store redis lease \(redis://:xxxxx@127\.0\.0\.1:1/0\): `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, dir, tc.args...)
			if code != tc.code || out != "" || !regexp.MustCompile(tc.want).MatchString(stderr) || strings.Contains(stderr, "s3cret") {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %q, want %s", code, tc.code, out, stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "s.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused input opened the store: %v", err)
	}
}

// On RabbitMQ, pause and resume say that the feature is not supported,
// naming it and the backend; jobs lists the jobs with a note.
func TestPauseRefusedOnRabbitMQ(t *testing.T) {
	testserver.For("rabbitmq").Require(t, "")
	dir := t.TempDir()
	writeFile(t, dir, "c.yaml", "namespace: pause-"+testserver.RandomID()+"\nbackend:\n  type: rabbitmq\n"+twoJobs, 0o644)
	for _, cmd := range []string{"pause", "resume"} {
		code, out, stderr := run(t, dir, cmd, "--config", "c.yaml", "a")
		if code != 1 || out != "" || !strings.HasPrefix(stderr, "anarchond: pause is not supported on backend rabbitmq: a queue cannot be read") {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", cmd, code, out, stderr)
		}
	}
	code, out, stderr := run(t, dir, "jobs", "--config", "c.yaml", "--json")
	if code != 0 || strings.Count(out, `"paused":false`) != 2 || !strings.Contains(stderr, "note: pause is not supported on backend rabbitmq") {
		t.Fatalf("jobs: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// racing is a Controller whose record another writer changes just before
// each of the first n writes, which then meet claim.ErrConflict.
type racing struct {
	*memclaim.Backend
	n int
}

func (r *racing) SetControl(ctx context.Context, c claim.Control, prev int64) (claim.Control, error) {
	if r.n > 0 {
		r.n--
		other := claim.Control{Job: c.Job, Paused: true, Reason: "theirs", By: "other@host", At: 1}
		if _, err := r.Backend.SetControl(ctx, other, prev); err != nil {
			return claim.Control{}, err
		}
	}
	return r.Backend.SetControl(ctx, c, prev)
}

// A write that finds the record changed since it read it reads it again
// and writes once more, saying over what; a second conflict writes
// nothing and says so.
func TestPauseConflict(t *testing.T) {
	for _, tc := range []struct {
		conflicts int
		err       string
		note      bool
	}{{0, "", false}, {1, "", true}, {2, "a was changed by another writer while this one wrote, twice; nothing written", true}} {
		r := &racing{Backend: memclaim.New(clock.NewFake(time.Now())), n: tc.conflicts}
		var out, errb bytes.Buffer
		w := controlWriter{ctl: r, env: Env{Stdout: &out, Stderr: &errb}, cfg: &config.Config{}}
		mine := claim.Control{Job: "a", Paused: true, Reason: "mine", By: "me@host", At: 2}
		err := w.apply(t.Context(), "a", func(claim.Control) (claim.Control, bool) { return mine, true })
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Fatalf("%d conflicts: error %v, want %q", tc.conflicts, err, tc.err)
		}
		if got := strings.Contains(errb.String(), "a changed meanwhile (now: paused until resumed, by other@host"); got != tc.note {
			t.Fatalf("%d conflicts: note %v, stderr %q", tc.conflicts, got, errb.String())
		}
		all, _ := r.Controls(t.Context())
		if tc.err == "" && (len(all) != 1 || all[0].Reason != "mine") {
			t.Fatalf("%d conflicts: the record %+v, want mine", tc.conflicts, all)
		}
		if tc.err != "" && (len(all) != 1 || all[0].Reason != "theirs") {
			t.Fatalf("%d conflicts: the record %+v, want theirs only", tc.conflicts, all)
		}
	}
}
