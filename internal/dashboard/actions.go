package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/sanitize"
)

// maxForm bounds an action's request body.
const maxForm = 16 << 10

// actionResult is the answer of an action: the job's control record as
// written, as jobs would show it.
type actionResult struct {
	Job     string `json:"job"`
	Action  string `json:"action"`
	Paused  bool   `json:"paused"`
	Until   string `json:"paused_until,omitempty"`
	Reason  string `json:"paused_reason,omitempty"`
	By      string `json:"by"`
	Changed bool   `json:"changed"`
}

// apiAction is POST /api/v1/jobs/{job}/{pause|resume} with the token in
// an Authorization: Bearer header; form fields until (RFC 3339) and
// reason, as anarchond pause takes them.
func (d *Dashboard) apiAction(w http.ResponseWriter, r *http.Request) {
	if !d.ActionsEnabled() {
		noActions(w)
		return
	}
	if !d.authorized(bearer(r)) {
		unauthorized(w)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	res, code, err := d.act(r, r.PathValue("job"), r.PathValue("action"))
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// formAction is the page's form: the token in the form's token field (a
// browser sends no Authorization header from a form), then back to the
// page with the outcome in its query.
func (d *Dashboard) formAction(w http.ResponseWriter, r *http.Request) {
	if !d.ActionsEnabled() {
		noActions(w)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	if !d.authorized(r.PostForm.Get("token")) {
		unauthorized(w)
		return
	}
	job := r.PathValue("job")
	res, _, err := d.act(r, job, r.PathValue("action"))
	// The page says what became of it from a fixed set of words, never
	// from text a link could carry.
	did := "failed"
	switch {
	case err != nil:
		d.log.Warn("dashboard: action refused", zap.String("job", job), zap.Error(err))
	case !res.Changed:
		did = "unchanged"
	case res.Action == "pause":
		did = "paused"
	default:
		did = "resumed"
	}
	http.Redirect(w, r, "/?job="+url.QueryEscape(job)+"&did="+did, http.StatusSeeOther)
}

// act applies the action to the job's control record: read, change,
// compare and set, once more on a conflict, as anarchond pause does.
func (d *Dashboard) act(r *http.Request, job, action string) (actionResult, int, error) {
	if err := r.ParseForm(); err != nil {
		return actionResult{}, http.StatusBadRequest, errors.New("bad form")
	}
	d.mu.Lock()
	cfg, b := d.cfg, d.b
	d.mu.Unlock()
	if !hasJob(cfg, job) {
		return actionResult{}, http.StatusNotFound, fmt.Errorf("no job %q in %s", job, cfg.File)
	}
	if b == nil {
		return actionResult{}, http.StatusServiceUnavailable, errNoStore
	}
	ctl, err := claim.ControllerOf(b, cfg.Backend.Type)
	if err != nil {
		return actionResult{}, http.StatusNotImplemented, err
	}
	now := d.clock.Now()
	next := claim.Control{Job: job, By: "dashboard@" + cfg.Instance, At: now.UnixMilli()}
	switch action {
	case "pause":
		next.Paused, next.Reason = true, r.PostForm.Get("reason")
		if v := r.PostForm.Get("until"); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil || !t.After(now) {
				return actionResult{}, http.StatusBadRequest, fmt.Errorf("until %q: want a time in the future, RFC 3339", v)
			}
			next.Until = t.UnixMilli()
		}
		if len(next.Reason) > claim.MaxControlText {
			return actionResult{}, http.StatusBadRequest, fmt.Errorf("reason of %d bytes: at most %d", len(next.Reason), claim.MaxControlText)
		}
	case "resume":
	default:
		return actionResult{}, http.StatusNotFound, fmt.Errorf("no action %q: pause or resume", action)
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	got, changed, err := setControl(ctx, ctl, next)
	if err != nil {
		return actionResult{}, http.StatusServiceUnavailable, fmt.Errorf("%s: %w; nothing written", describe(cfg), err)
	}
	d.log.Info("dashboard: job "+action+"d", zap.String("job", job), zap.String("by", next.By))
	d.expire()
	res := actionResult{Job: sanitize.Line(job), Action: action, Paused: got.PausedAt(now),
		Reason: sanitize.Line(got.Reason), By: sanitize.Line(got.By), Changed: changed}
	if !got.UntilTime().IsZero() && res.Paused {
		res.Until = got.UntilTime().Format(time.RFC3339Nano)
	}
	return res, http.StatusOK, nil
}

// setControl writes next over the job's record at the version read; a
// resume of a job not paused writes nothing. On a conflict it reads and
// writes once more; a second conflict is an error.
func setControl(ctx context.Context, ctl claim.Controller, next claim.Control) (claim.Control, bool, error) {
	for try := 0; ; try++ {
		all, err := ctl.Controls(ctx)
		if err != nil {
			return claim.Control{}, false, err
		}
		cur := claim.Control{Job: next.Job}
		for _, c := range all {
			if c.Job == next.Job {
				cur = c
			}
		}
		if !next.Paused && !cur.Paused {
			return cur, false, nil
		}
		got, err := ctl.SetControl(ctx, next, cur.Version)
		switch {
		case errors.Is(err, claim.ErrConflict) && try == 0:
			continue
		case err != nil:
			return claim.Control{}, false, err
		}
		return got, true, nil
	}
}

// expire makes the next request read the store again, so that the page
// shows the action.
func (d *Dashboard) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stale = true
}

// hasJob reports whether the crontab has job.
func hasJob(cfg *config.Config, job string) bool {
	for _, j := range cfg.Jobs {
		if j.Name == job {
			return true
		}
	}
	return false
}
