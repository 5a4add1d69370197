package dashboard

import (
	"bytes"
	_ "embed"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/sanitize"
	"github.com/anarchon/anarchon/internal/status"
)

// pageRuns is how many of the newest runs the page lists.
const pageRuns = 50

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"ts": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") },
}).Parse(pageHTML))

// pageData is what the template shows; every string from a job, the
// crontab or the store is escaped by internal/sanitize first, and by
// html/template for HTML.
type pageData struct {
	Instance, Backend string
	RefreshSec        int
	ReadAt, OkAt      time.Time
	Err, Done         string
	ControlNote       string
	Actions           bool
	Jobs              []pageJob
	Runs              []pageRun
	Instances         []status.InstanceRecord
	InstancesNote     string
	Legend            []string
}

type pageJob struct {
	status.JobRecord
	PausedText, Last string
	Strip            []cell
}

type pageRun struct {
	status.Record
	StatusCell, Started, Duration, Exit string
}

// page renders the dashboard from the cached read.
func (d *Dashboard) page(w http.ResponseWriter, r *http.Request) {
	s, err := d.snapshotFor(r.Context())
	data := pageData{RefreshSec: int(math.Ceil(d.refresh.Seconds())),
		Actions: d.ActionsEnabled(), Legend: legend}
	data.RefreshSec = max(data.RefreshSec, 2)
	switch {
	case err != nil:
		data.Err = err.Error()
	default:
		d.fillPage(&data, s)
		data.Done = doneText(s, r.URL.Query().Get("job"), r.URL.Query().Get("did"))
	}
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, data); err != nil {
		d.log.Error("dashboard: render the page")
		http.Error(w, "render the page", http.StatusInternalServerError)
		return
	}
	writeHTML(w, buf.Bytes())
}

// fillPage sets what the snapshot shows.
func (d *Dashboard) fillPage(data *pageData, s *snapshot) {
	data.Instance, data.Backend = sanitize.Line(s.cfg.Instance), sanitize.Line(s.cfg.Backend.Describe())
	data.ReadAt, data.OkAt, data.ControlNote = s.at, s.okAt, sanitize.Line(s.controlNote)
	if s.err != nil {
		data.Err = sanitize.Line(s.err.Error())
	}
	for _, j := range s.jobs {
		rec := status.JobRecordOf(j)
		pj := pageJob{JobRecord: rec, PausedText: "-", Last: "-"}
		if rec.Paused {
			pj.PausedText = pausedText(rec)
		}
		if j.Last != nil {
			pj.Last = string(j.Last.Status)
			if j.Last.Reason != "" {
				pj.Last += " (" + j.Last.Reason + ")"
			}
			pj.Last = sanitize.Line(pj.Last)
		}
		if cj, ok := jobConfig(s, j.Name); ok {
			pj.Strip = stripOf(cj, j.Recent, s.at, StripSlots)
		}
		data.Jobs = append(data.Jobs, pj)
	}
	for _, run := range s.runs {
		if !run.Status.Noted() && len(data.Runs) < pageRuns {
			data.Runs = append(data.Runs, pageRunOf(run))
		}
	}
	switch {
	case s.noInstances:
		data.InstancesNote = noInstancesText(s.cfg)
	case s.instancesErr != nil:
		data.InstancesNote = sanitize.Line(s.instancesErr.Error())
	default:
		data.Instances = instanceRecords(s.instances, s.storeNow, s.at)
	}
}

// pageRunOf is one row of the runs table.
func pageRunOf(run claim.Run) pageRun {
	rec := status.RecordOf(run)
	pr := pageRun{Record: rec, StatusCell: rec.Status, Started: "-", Duration: "-", Exit: "-"}
	if rec.Reason != "" {
		pr.StatusCell += " (" + rec.Reason + ")"
	}
	if !run.StartedAt.IsZero() {
		pr.Started = run.StartedAt.UTC().Format("15:04:05.000Z")
	}
	if rec.DurationMs != nil {
		pr.Duration = run.Duration().Round(time.Millisecond).String()
	}
	if rec.ExitCode != nil {
		pr.Exit = strconv.Itoa(*rec.ExitCode)
	}
	return pr
}

// pausedText is the paused column, as jobs shows it.
func pausedText(rec status.JobRecord) string {
	var b strings.Builder
	b.WriteString("paused until ")
	if rec.PausedUntil != nil {
		b.WriteString(*rec.PausedUntil)
	} else {
		b.WriteString("resumed")
	}
	if rec.PausedBy != "" {
		b.WriteString(" by " + rec.PausedBy)
	}
	if rec.PausedReason != "" {
		b.WriteString(": " + rec.PausedReason)
	}
	return b.String()
}

// jobConfig is the crontab entry of the job named.
func jobConfig(s *snapshot, name string) (cj config.Job, ok bool) {
	for _, j := range s.cfg.Jobs {
		if j.Name == name {
			return j, true
		}
	}
	return cj, false
}

// legend lists the strip's colours.
var legend = []string{"succeeded", "running", "failed", "timeout", "interrupted", "abandoned",
	"skipped", "missed", "unknown", cellPending, cellNone}

// doneText is the page's word on the action a form just asked for: the
// outcome is one of a fixed set, the job one of the crontab's.
func doneText(s *snapshot, job, did string) string {
	if _, ok := jobConfig(s, job); !ok {
		return ""
	}
	switch did {
	case "paused", "resumed":
		return "job " + job + " " + did + " on every instance"
	case "triggered":
		return "job " + job + ": one run asked for; an instance runs it within seconds"
	case "unchanged":
		return "job " + job + " was not paused: nothing to resume"
	case "failed":
		return "the action on job " + job + " failed: the token was right, the daemon's log says why"
	}
	return ""
}

// actionData is the action page of one job.
type actionData struct {
	Job, State string
	Paused     bool
}

// actionPage is GET /actions/{job}: the forms of pause or resume and of
// trigger, on a page of their own that does not refresh while the token
// is typed.
func (d *Dashboard) actionPage(w http.ResponseWriter, r *http.Request) {
	if !d.ActionsEnabled() {
		noActions(w)
		return
	}
	s, err := d.snapshotFor(r.Context())
	if err != nil || s.okAt.IsZero() {
		http.Error(w, "the store has not been read yet", http.StatusServiceUnavailable)
		return
	}
	job := r.PathValue("job")
	var data *actionData
	for _, j := range s.jobs {
		if j.Name == job {
			rec := status.JobRecordOf(j)
			data = &actionData{Job: rec.Job, Paused: rec.Paused, State: "not paused"}
			if rec.Paused {
				data.State = pausedText(rec)
			}
		}
	}
	if data == nil {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	var buf bytes.Buffer
	if err := pageTmpl.ExecuteTemplate(&buf, "action", data); err != nil {
		http.Error(w, "render the page", http.StatusInternalServerError)
		return
	}
	writeHTML(w, buf.Bytes())
}

// writeHTML answers a rendered page, with no script allowed.
func writeHTML(w http.ResponseWriter, page []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(page) //nolint:errcheck // the client went away
}
