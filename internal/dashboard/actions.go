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
	"github.com/anarchon/anarchon/internal/scheduler"
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
	// Slot and SlotMs are a trigger's run: the slot it is claimed at.
	Slot   string `json:"slot,omitempty"`
	SlotMs int64  `json:"slot_ms,omitempty"`
}

// apiAction is POST /api/v1/jobs/{job}/{pause|resume|trigger} with the token in
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
	case res.Action == "trigger":
		did = "triggered"
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
	by := "dashboard@" + cfg.Instance
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	var (
		res  actionResult
		err2 error
	)
	switch action {
	case "pause", "resume":
		next, code, err := controlFor(r, job, action, by, now)
		if err != nil {
			return actionResult{}, code, err
		}
		res, err2 = d.setControl(ctx, ctl, next, now)
	case "trigger":
		res, err2 = d.trigger(ctx, ctl, cfg, job, by, now)
	default:
		return actionResult{}, http.StatusNotFound, fmt.Errorf("no action %q: pause, resume or trigger", action)
	}
	if err2 != nil {
		return actionResult{}, http.StatusServiceUnavailable, fmt.Errorf("%s: %w; nothing written", describe(cfg), err2)
	}
	d.log.Info("dashboard: "+action, zap.String("job", job), zap.String("by", by))
	d.expire()
	res.Job, res.Action = sanitize.Line(job), action
	return res, http.StatusOK, nil
}

// controlFor is the record a pause or a resume of job writes (its
// triggers carried over when written), from the form's until and reason.
func controlFor(r *http.Request, job, action, by string, now time.Time) (claim.Control, int, error) {
	next := claim.Control{Job: job, By: by, At: now.UnixMilli()}
	if action == "resume" {
		return next, 0, nil
	}
	next.Paused, next.Reason = true, r.PostForm.Get("reason")
	if v := r.PostForm.Get("until"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || !t.After(now) {
			return next, http.StatusBadRequest, fmt.Errorf("until %q: want a time in the future, RFC 3339", v)
		}
		next.Until = t.UnixMilli()
	}
	if len(next.Reason) > claim.MaxControlText {
		return next, http.StatusBadRequest, fmt.Errorf("reason of %d bytes: at most %d", len(next.Reason), claim.MaxControlText)
	}
	return next, 0, nil
}

// setControl writes next over the job's record at the version read,
// keeping its triggers; a resume of a job not paused writes nothing. On a
// conflict it reads and writes once more.
func (d *Dashboard) setControl(ctx context.Context, ctl claim.Controller, next claim.Control, now time.Time) (actionResult, error) {
	got, changed, err := claim.UpdateControl(ctx, ctl, next.Job, 2, func(cur claim.Control, _ int) (claim.Control, bool) {
		next.Triggers = cur.Triggers // the runs asked for stay asked for
		return next, next.Paused || cur.Paused
	})
	if err != nil {
		return actionResult{}, err
	}
	res := actionResult{Paused: got.PausedAt(now), Reason: sanitize.Line(got.Reason), By: sanitize.Line(got.By), Changed: changed}
	if !got.UntilTime().IsZero() && res.Paused {
		res.Until = got.UntilTime().Format(time.RFC3339Nano)
	}
	return res, nil
}

// trigger asks for one run of job now, as anarchond trigger does.
func (d *Dashboard) trigger(ctx context.Context, ctl claim.Controller, cfg *config.Config, job, by string, now time.Time) (actionResult, error) {
	var j config.Job
	for _, c := range cfg.Jobs {
		if c.Name == job {
			j = c
		}
	}
	tr, err := scheduler.AskRun(ctx, ctl, j, by, now, cfg.Backend.Retention)
	if err != nil {
		return actionResult{}, err
	}
	return actionResult{By: sanitize.Line(by), Changed: true, Slot: time.UnixMilli(tr.Slot).UTC().Format(time.RFC3339Nano), SlotMs: tr.Slot}, nil
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
