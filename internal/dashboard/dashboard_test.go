package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/status"
)

// hostile is a job's output that tries to drive a terminal and a page.
const hostile = "<script>alert(1)</script>\x1b[31mred\u202e\n"

// counting is a memclaim store that counts its reads of runs.
type counting struct {
	*memclaim.Backend
	lists atomic.Int64
}

func (c *counting) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	c.lists.Add(1)
	return c.Backend.ListRuns(ctx, q)
}

// registry is a store that keeps instance records (in memory).
// plain is a store with none of the optional capabilities: no instance
// records, no control records.
type plain struct{ claim.Backend }

type registry struct {
	*memclaim.Backend
	insts []claim.Instance
}

func (r *registry) Beat(_ context.Context, inst claim.Instance, _ time.Duration) (claim.Instance, error) {
	return inst, nil
}

func (r *registry) Instances(context.Context) ([]claim.Instance, time.Time, error) {
	return r.insts, time.Now(), nil
}

func loadConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	yml := "instance: i1\n" + extra + "jobs:\n  - name: yearly\n    schedule: '0 0 1 1 *'\n    command: 'true'\n" +
		"  - name: tick\n    schedule: '* * * * * *'\n    command: 'true'\n"
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "crontab.yaml"), []byte(yml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// seed records a failed run of tick with hostile output, one slot later
// a missed note, and returns their slots.
func seed(t *testing.T, b *memclaim.Backend) (run, note int64) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	run = now.Truncate(time.Second).Add(-3 * time.Second).UnixMilli()
	req := claim.Request{Job: "tick", Slot: run, Token: "tok1", Instance: "i2", MaxLate: time.Minute,
		Lease: time.Minute, MaxAttempts: 1, Now: now}
	res, err := b.Claim(ctx, req)
	if err != nil || res.Outcome != claim.Won {
		t.Fatalf("claim: %v %v", res, err)
	}
	if err := b.Finish(ctx, req.Fence(res.Attempt), claim.Finish{Status: claim.StatusFailed, ExitCode: 3,
		OutputTail: hostile, StartedAt: now, FinishedAt: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	note = run + 1000
	if _, err := b.Record(ctx, claim.Note{Job: "tick", Slot: note, Status: claim.StatusMissed, Reason: "late", Instance: "i1", At: now}); err != nil {
		t.Fatal(err)
	}
	return run, note
}

func newServer(t *testing.T, cfg *config.Config, b claim.Backend) *httptest.Server {
	t.Helper()
	d, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.SetBackend(b)
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAPIMirrorsCLI: /api/v1/jobs and /api/v1/status answer the objects
// jobs --json and status --json print, as an array; /api/v1/next those of
// next --json.
func TestAPIMirrorsCLI(t *testing.T) {
	b := memclaim.New(clock.Real{})
	seed(t, b)
	cfg := loadConfig(t, "")
	srv := newServer(t, cfg, b)

	jobs, _, err := status.ReadJobs(context.Background(), cfg, b, time.Now(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := status.WriteJobsJSON(&want, jobs[:1]); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, srv.URL+"/api/v1/jobs?job=yearly")
	if code != 200 || body != "["+strings.TrimSpace(want.String())+"]\n" {
		t.Errorf("jobs: %d %s, want [%s]", code, body, want.String())
	}

	runs, err := b.ListRuns(context.Background(), claim.ListQuery{Limit: 20, Statuses: claim.RunStatuses})
	if err != nil {
		t.Fatal(err)
	}
	want.Reset()
	if err := status.WriteJSON(&want, runs); err != nil {
		t.Fatal(err)
	}
	code, body = get(t, srv.URL+"/api/v1/status")
	if code != 200 || body != "["+strings.TrimSpace(want.String())+"]\n" {
		t.Errorf("status: %d %s, want [%s]", code, body, want.String())
	}
	var all []status.Record
	_, body = get(t, srv.URL+"/api/v1/status?all=true&job=tick")
	if err := json.Unmarshal([]byte(body), &all); err != nil || len(all) != 2 || all[0].Status != "missed" {
		t.Errorf("status?all: %s (%v)", body, err)
	}
	_, body = get(t, srv.URL+"/api/v1/next?job=yearly&n=2&from=2030-06-01T00:00:00Z")
	if !strings.HasPrefix(body, `[{"job":"yearly","slot":"2031-01-01T00:00:00Z","slot_ms":1924992000000,"local":"2031-01-01T00:00:00Z","start":"2031-01-01T00:00:00Z","start_ms":1924992000000},`) {
		t.Errorf("next: %s", body)
	}
}

// TestAPIRefuses: an unknown job is 404 with a JSON error; a bad query is
// 400; a store without instance records says so.
func TestAPIRefuses(t *testing.T) {
	srv := newServer(t, loadConfig(t, ""), plain{memclaim.New(clock.Real{})})
	for path, want := range map[string]int{
		"/api/v1/jobs?job=nope":    404,
		"/api/v1/status?job=nope":  404,
		"/api/v1/next?job=nope":    404,
		"/api/v1/status?limit=0":   400,
		"/api/v1/status?outcome=x": 400,
		"/api/v1/next?n=100000":    400,
		"/api/v1/cluster":          501,
		"/api/v1/nothing":          404,
	} {
		code, body := get(t, srv.URL+path)
		var e apiError
		if code != want || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
			t.Errorf("%s: %d %q, want %d and a JSON error", path, code, body, want)
		}
	}
	_, body := get(t, srv.URL+"/api/v1/cluster")
	if !strings.Contains(body, "this store keeps no instance records") {
		t.Errorf("cluster: %s", body)
	}
}

// TestPage: the jobs, the runs with their escaped output, the strip and
// the instances are on the page; hostile output is escaped as status
// escapes it, then for HTML.
func TestPage(t *testing.T) {
	b := &registry{Backend: memclaim.New(clock.Real{}), insts: []claim.Instance{
		{Name: "i2", Host: "h2", Version: "1.2.3", SkewMs: -7, LastSeen: time.Now(), ExpiresAt: time.Now().Add(time.Minute)},
		{Name: "i1<b>", Host: "h1", Version: "1.2.3", ExpiresAt: time.Now().Add(-time.Second), Retain: time.Hour},
	}}
	seed(t, b.Backend)
	srv := newServer(t, loadConfig(t, ""), b)
	code, page := get(t, srv.URL+"/")
	if code != 200 {
		t.Fatalf("page: %d", code)
	}
	for _, want := range []string{
		`data-job="yearly"`, `data-job="tick"`, `<td class="status">failed</td>`,
		`&lt;script&gt;alert(1)&lt;/script&gt;\x1b[31mred\u202e`, `<span class="c missed"`, `<span class="c failed"`,
		`data-instance="i2"`, `<td>-7</td>`, `i1&lt;b&gt;`, `<meta http-equiv="refresh"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "\x1b") || strings.Contains(page, "\u202e") {
		t.Errorf("page holds the output raw:\n%s", page)
	}
	_, body := get(t, srv.URL+"/api/v1/cluster")
	if !strings.HasPrefix(body, `[{"instance":"i1\u003cb\u003e","host":"h1"`) {
		t.Errorf("cluster: %s", body)
	}

	if !strings.Contains(page, `<td>alive</td>`) || !strings.Contains(page, `<td>gone</td>`) {
		t.Errorf("the page does not say which instance is alive and which gone")
	}
	srv = newServer(t, loadConfig(t, ""), plain{memclaim.New(clock.Real{})})
	if _, page = get(t, srv.URL+"/"); !strings.Contains(page, "this store keeps no instance records") {
		t.Errorf("page without instance records:\n%s", page)
	}
}

// TestCache: however many requests arrive within the refresh interval,
// the store is read once.
func TestCache(t *testing.T) {
	b := &counting{Backend: memclaim.New(clock.Real{})}
	cfg := loadConfig(t, "dashboard: {refreshMs: 3600000}\n")
	srv := newServer(t, cfg, b)
	for range 20 {
		for _, p := range []string{"/", "/api/v1/jobs", "/api/v1/status"} {
			if code, body := get(t, srv.URL+p); code != 200 {
				t.Fatalf("%s: %d %s", p, code, body)
			}
		}
	}
	// One read: each job's recent runs, and the newest runs of all.
	if n := b.lists.Load(); n != int64(len(cfg.Jobs)+1) {
		t.Errorf("%d reads of runs for 60 requests, want %d", n, len(cfg.Jobs)+1)
	}
}

func writeToken(t *testing.T, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dash.token")
	if err := os.WriteFile(p, []byte("s3cret\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTokenFileRefused: a token file missing or readable by others stops
// the start, naming the file.
func TestTokenFileRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.token")
	open := writeToken(t, 0o644)
	for path, want := range map[string]string{missing: "no such file", open: "chmod 600 " + open} {
		cfg := loadConfig(t, "")
		cfg.Dashboard.TokenFile = path
		_, err := New(cfg, Options{})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want the path and %q", path, err, want)
		}
	}
}

func post(t *testing.T, u, token string, form url.Values, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// TestActions: pause, resume and trigger need the token; without a token file they
// are refused; a cross-origin POST is refused; the page's form works.
func TestActions(t *testing.T) {
	b := memclaim.New(clock.Real{})
	off := newServer(t, loadConfig(t, ""), b)
	if code, body, _ := post(t, off.URL+"/api/v1/jobs/tick/pause", "s3cret", nil, nil); code != 403 || !strings.Contains(body, "tokenFile") {
		t.Errorf("no token file: %d %s", code, body)
	}
	cfg := loadConfig(t, "")
	cfg.Dashboard.TokenFile = writeToken(t, 0o600)
	srv := newServer(t, cfg, b)
	for _, tok := range []string{"", "wrong"} {
		if code, body, _ := post(t, srv.URL+"/api/v1/jobs/tick/pause", tok, nil, nil); code != 401 || strings.TrimSpace(body) != "Unauthorized" {
			t.Errorf("token %q: %d %q, want 401 with no detail", tok, code, body)
		}
	}
	code, body, _ := post(t, srv.URL+"/api/v1/jobs/tick/pause", "s3cret", nil, map[string]string{"Sec-Fetch-Site": "cross-site"})
	if code != 403 {
		t.Errorf("cross-site POST: %d %s, want 403", code, body)
	}
	if code, body, _ := post(t, srv.URL+"/api/v1/jobs/nope/pause", "s3cret", nil, nil); code != 404 {
		t.Errorf("unknown job: %d %s", code, body)
	}
	// A trigger asks for one run: a manual trigger in the job's record,
	// which the pause that follows keeps.
	code, body, _ = post(t, srv.URL+"/api/v1/jobs/tick/trigger", "s3cret", nil, nil)
	if code != 200 || !strings.Contains(body, `"action":"trigger"`) || !strings.Contains(body, `"slot_ms":`) {
		t.Errorf("trigger: %d %s", code, body)
	}
	code, body, _ = post(t, srv.URL+"/api/v1/jobs/tick/pause", "s3cret", url.Values{"reason": {"deploy"}}, nil)
	if code != 200 || !strings.Contains(body, `"paused":true,"paused_reason":"deploy","by":"dashboard@i1","changed":true`) {
		t.Errorf("pause: %d %s", code, body)
	}
	if ctl, _ := b.Controls(context.Background()); len(ctl) != 1 || len(ctl[0].Triggers) != 1 ||
		ctl[0].Triggers[0].Kind != claim.TriggerManual || ctl[0].Triggers[0].By != "dashboard@i1" {
		t.Errorf("the record after a trigger and a pause: %+v", ctl)
	}
	if _, body := get(t, srv.URL+"/api/v1/jobs?job=tick"); !strings.Contains(body, `"paused":true`) {
		t.Errorf("jobs after the pause: %s", body)
	}
	// The action page of a paused job has the resume form; the main page
	// links to it.
	if code, page := get(t, srv.URL+"/actions/tick"); code != 200 || !strings.Contains(page, `<form method="post" action="/actions/tick/resume" id="resume">`) ||
		!strings.Contains(page, "paused until resumed by dashboard@i1: deploy") {
		t.Errorf("action page: %d\n%s", code, page)
	}
	if _, page := get(t, srv.URL+"/"); !strings.Contains(page, `<a href="/actions/tick">resume… run now…</a>`) {
		t.Errorf("the page does not link to the action page:\n%s", page)
	}
	if code, _ := get(t, srv.URL+"/actions/nope"); code != 404 {
		t.Errorf("action page of an unknown job: %d", code)
	}
	if code, _ := get(t, off.URL+"/actions/tick"); code != 403 {
		t.Errorf("action page without a token file: %d", code)
	}
	// The page's form: the token in the form, back to the page.
	code, _, hdr := post(t, srv.URL+"/actions/tick/resume", "", url.Values{"token": {"s3cret"}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if code != 303 || hdr.Get("Location") != "/?job=tick&did=resumed" {
		t.Errorf("form resume: %d %v", code, hdr)
	}
	if _, page := get(t, srv.URL+hdr.Get("Location")); !strings.Contains(page, "job tick resumed on every instance") {
		t.Errorf("the page after the form does not say what was done:\n%s", page)
	}
	if _, page := get(t, srv.URL+"/?job=tick&did=hacked"); strings.Contains(page, "hacked") {
		t.Errorf("the page shows text from its link")
	}
	ctl, _ := b.Controls(context.Background())
	if len(ctl) != 1 || ctl[0].Paused {
		t.Errorf("controls after resume: %+v", ctl)
	}
	if code, _, _ := post(t, srv.URL+"/actions/tick/pause", "", url.Values{"token": {"wrong"}}, nil); code != 401 {
		t.Errorf("form with a wrong token: %d", code)
	}
}

// failing is a store whose reads of runs fail while down is set.
type failing struct {
	*memclaim.Backend
	down atomic.Bool
}

func (f *failing) ListRuns(ctx context.Context, q claim.ListQuery) ([]claim.Run, error) {
	if f.down.Load() {
		return nil, errors.New("connection refused")
	}
	return f.Backend.ListRuns(ctx, q)
}

// TestStoreDown: a read that fails is shown on the page, which keeps the
// last read that succeeded; once refreshMs has passed, the next request
// starts the next read.
func TestStoreDown(t *testing.T) {
	b := &failing{Backend: memclaim.New(clock.Real{})}
	seed(t, b.Backend)
	fake := clock.NewFake(time.Now())
	d, err := New(loadConfig(t, "dashboard: {refreshMs: 1000}\n"), Options{Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	d.SetBackend(b)
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	if _, page := get(t, srv.URL+"/"); !strings.Contains(page, `<td class="status">failed</td>`) || strings.Contains(page, `id="error"`) {
		t.Fatalf("first page:\n%s", page)
	}
	b.down.Store(true)
	fake.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, page := get(t, srv.URL+"/")
		if strings.Contains(page, "the store did not answer") {
			if !strings.Contains(page, "connection refused") || !strings.Contains(page, "showing the read of") ||
				!strings.Contains(page, `<td class="status">failed</td>`) {
				t.Errorf("page while the store is down:\n%s", page)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never said the store is down:\n%s", page)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get(srv.URL + "/api/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Anarchon-Read-At") == "" || !strings.Contains(resp.Header.Get("Anarchon-Read-Error"), "connection refused") {
		t.Errorf("the API answers from the last read, saying so: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestPerInstanceJob: the runs of a perInstance job, under one key per
// instance, are the job's in /api/v1/status?job= and in its strip.
func TestPerInstanceJob(t *testing.T) {
	b := memclaim.New(clock.Real{})
	yml := "instance: i1\njobs:\n  - name: every\n    schedule: '* * * * * *'\n    perInstance: true\n    command: 'true'\n"
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "crontab.yaml"), []byte(yml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	slot := time.Now().Truncate(time.Second).Add(-2 * time.Second).UnixMilli()
	for _, inst := range []string{"i1", "i2"} {
		req := claim.Request{Job: cfg.Jobs[0].Key(inst), Slot: slot, Token: claim.NewToken(), Instance: inst,
			MaxLate: time.Minute, Lease: time.Minute, MaxAttempts: 1, Now: time.Now()}
		if res, err := b.Claim(context.Background(), req); err != nil || res.Outcome != claim.Won {
			t.Fatalf("claim %s: %v %v", req.Job, res, err)
		}
	}
	srv := newServer(t, cfg, b)
	var recs []status.Record
	_, body := get(t, srv.URL+"/api/v1/status?job=every")
	if err := json.Unmarshal([]byte(body), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("status?job=every: %s (%v), want the runs of both instances", body, err)
	}
	if _, page := get(t, srv.URL+"/"); !strings.Contains(page, `<span class="c running"`) {
		t.Errorf("the strip lacks the running slot:\n%s", page)
	}
}
