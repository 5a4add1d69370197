package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/sanitize"
	"github.com/anarchon/anarchon/internal/status"
)

const (
	// maxNext bounds /api/v1/next's n: a page of a week of minutely
	// slots is the CLI's business.
	maxNext = 1000
	// defaultStatusLimit is status's --limit default.
	defaultStatusLimit = 20
)

// apiError is the body of every API failure.
type apiError struct {
	Error string `json:"error"`
}

// writeJSON answers v as JSON with code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		code, buf = http.StatusInternalServerError, *bytes.NewBufferString(`{"error":"encode the answer"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

// writeError answers a JSON error, its message escaped to one line.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: sanitize.Line(msg)})
}

// readSnapshot is the request's snapshot, or false after answering the
// failure (503: no store yet, or no read ever succeeded).
func (d *Dashboard) readSnapshot(w http.ResponseWriter, r *http.Request) (*snapshot, bool) {
	s, err := d.snapshotFor(r.Context())
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, "the first read of the store has not ended")
		return nil, false
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return nil, false
	case s.okAt.IsZero():
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("%s did not answer: %v", describe(s.cfg), s.err))
		return nil, false
	}
	// The answer is the read of Anarchon-Read-At; a later read that failed
	// says why in Anarchon-Read-Error.
	w.Header().Set("Anarchon-Read-At", s.okAt.UTC().Format(time.RFC3339Nano))
	if s.err != nil {
		w.Header().Set("Anarchon-Read-Error", sanitize.Line(s.err.Error()))
	}
	return s, true
}

// jobOf checks the request's job parameter: "" (every job) or one of the
// crontab; false after answering 404.
func jobOf(w http.ResponseWriter, cfg *config.Config, name string) ([]config.Job, bool) {
	if name == "" {
		return cfg.Jobs, true
	}
	for _, j := range cfg.Jobs {
		if j.Name == name {
			return []config.Job{j}, true
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no job %q in %s", name, cfg.File))
	return nil, false
}

// apiStatus is `status --json` as an array, from the cached read: job,
// limit (default 20), all, outcome as status's flags.
func (d *Dashboard) apiStatus(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, filter, err := statusQuery(q.Get("limit"), q.Get("all"), q.Get("outcome"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s, ok := d.readSnapshot(w, r)
	if !ok {
		return
	}
	job := q.Get("job")
	if _, ok := jobOf(w, s.cfg, job); !ok {
		return
	}
	runs := s.runs
	if job != "" {
		// A perInstance job's runs are under every instance's key.
		runs = slices.DeleteFunc(slices.Clone(runs), func(r claim.Run) bool { return config.JobOfKey(r.Job) != job })
	}
	query := filter.Query()
	runs = slices.DeleteFunc(slices.Clone(runs), func(r claim.Run) bool {
		st := r.Status
		if st == status.Abandoned {
			st = claim.StatusRunning
		}
		return query != nil && !slices.Contains(query, st)
	})
	runs = filter.Keep(runs)
	out := make([]status.Record, 0, min(limit, len(runs)))
	for _, run := range runs[:min(limit, len(runs))] {
		out = append(out, status.RecordOf(run))
	}
	writeJSON(w, http.StatusOK, out)
}

// statusQuery reads status's parameters as status reads its flags.
func statusQuery(limitS, allS, outcome string) (int, status.Filter, error) {
	var f status.Filter
	limit := defaultStatusLimit
	if limitS != "" {
		n, err := strconv.Atoi(limitS)
		if err != nil || n <= 0 || n > RecentRuns {
			return 0, f, fmt.Errorf("limit %q: want a count from 1 to %d", limitS, RecentRuns)
		}
		limit = n
	}
	if allS != "" {
		all, err := strconv.ParseBool(allS)
		if err != nil {
			return 0, f, fmt.Errorf("all %q: want true or false", allS)
		}
		f.All = all
	}
	if outcome != "" {
		if f.All {
			return 0, f, errors.New("all and outcome: give one of them (all shows every outcome)")
		}
		var err error
		if f.Outcomes, err = status.ParseOutcomes(outcome); err != nil {
			return 0, f, fmt.Errorf("outcome: %w", err)
		}
	}
	return limit, f, nil
}

// apiJobs is `jobs --json` as an array; job selects one (404 if unknown).
func (d *Dashboard) apiJobs(w http.ResponseWriter, r *http.Request) {
	s, ok := d.readSnapshot(w, r)
	if !ok {
		return
	}
	job := r.URL.Query().Get("job")
	if _, ok := jobOf(w, s.cfg, job); !ok {
		return
	}
	out := []status.JobRecord{}
	for _, j := range s.jobs {
		if job == "" || j.Name == job {
			out = append(out, status.JobRecordOf(j))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// apiCluster is the instances' heartbeat records; 501 on a store that
// keeps none.
func (d *Dashboard) apiCluster(w http.ResponseWriter, r *http.Request) {
	s, ok := d.readSnapshot(w, r)
	if !ok {
		return
	}
	switch {
	case s.noInstances:
		writeError(w, http.StatusNotImplemented, noInstancesText(s.cfg))
	case s.instancesErr != nil:
		writeError(w, http.StatusServiceUnavailable, s.instancesErr.Error())
	default:
		writeJSON(w, http.StatusOK, instanceRecords(s.instances, s.storeNow, s.at))
	}
}

// noInstancesText says that the store keeps no instance records.
func noInstancesText(cfg *config.Config) string {
	return fmt.Sprintf("this store keeps no instance records (backend %s)", cfg.Backend.Type)
}

// apiNext is `next --json` as an array: job, n (default 5, at most 1000),
// from (RFC 3339, default now). It needs no store.
func (d *Dashboard) apiNext(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d.mu.Lock()
	cfg := d.cfg
	d.mu.Unlock()
	n := 5
	if v := q.Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 || n > maxNext {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("n %q: want a count from 1 to %d", v, maxNext))
			return
		}
	}
	from := d.clock.Now()
	if v := q.Get("from"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("from %q: want RFC 3339, e.g. 2027-03-28T00:00:00Z", v))
			return
		}
		from = t
	}
	jobs, ok := jobOf(w, cfg, q.Get("job"))
	if !ok {
		return
	}
	out, err := status.NextSlots(jobs, from, n)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if out == nil {
		out = []status.NextSlot{}
	}
	writeJSON(w, http.StatusOK, out)
}
