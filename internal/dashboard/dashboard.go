// Package dashboard is anarchond's web dashboard and its JSON API
// (docs/spec.md#s6-dashboard), served beside /metrics on metrics.listen
// when dashboard.enabled is set: the jobs with their next slot, pause,
// last outcome and a strip of their last slots; the recent runs; the
// instances. The page is rendered on the server with html/template and
// refreshes itself; the API under /api/v1/ answers with the objects the
// CLI's --json prints. Both render from one cached read of the store,
// refreshed at most every dashboard.refreshMs whatever the number of
// clients, so that the dashboard never loads the store the scheduler
// claims in. The actions (pause, resume, trigger) need the bearer token of
// dashboard.tokenFile.
package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/clock"
	"github.com/anarchon/anarchon/internal/config"
	"github.com/anarchon/anarchon/internal/secret"
)

// Options are what the dashboard needs besides the config.
type Options struct {
	Log   *zap.Logger
	Clock clock.Clock
}

// Dashboard serves the page and the API. Its zero value is not usable:
// build it with New, hand it the store with SetBackend once open.
type Dashboard struct {
	log   *zap.Logger
	clock clock.Clock
	// tokenHash is the SHA-256 of the actions' token; nil: no token file,
	// the actions are refused.
	tokenHash []byte
	refresh   time.Duration

	mu  sync.Mutex
	cfg *config.Config
	b   claim.Backend // nil until the store is open
	// snap is the last read; reading is closed when the read in flight
	// ends (nil: none in flight).
	snap    *snapshot
	reading chan struct{}
	// stale asks the next request for a new read (after an action).
	stale bool
}

// New builds the dashboard of cfg. It reads dashboard.tokenFile, refusing
// one that is missing, empty or readable by others (the error names the
// file), so that a daemon with a bad token file does not start.
func New(cfg *config.Config, o Options) (*Dashboard, error) {
	d := &Dashboard{log: o.Log, clock: o.Clock, refresh: cfg.Dashboard.Refresh, cfg: cfg}
	if d.log == nil {
		d.log = zap.NewNop()
	}
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	if d.refresh <= 0 {
		d.refresh = config.DefaultDashboardRefresh
	}
	if f := cfg.Dashboard.TokenFile; f != "" {
		tok, err := secret.ReadFile(f, "dashboard.tokenFile")
		if err != nil {
			return nil, err
		}
		h := sha256.Sum256([]byte(tok))
		d.tokenHash = h[:]
	}
	return d, nil
}

// SetBackend hands the dashboard the open store; until then it answers
// 503.
func (d *Dashboard) SetBackend(b claim.Backend) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.b = b
}

// SetConfig replaces the crontab after a reload; the next read uses it.
func (d *Dashboard) SetConfig(cfg *config.Config) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg = cfg
}

// Handler serves the page (/), the API (/api/v1/) and the actions. Every
// request that changes something must come from the page's own origin
// (http.CrossOriginProtection) and carry the token. A nil dashboard (not
// enabled) has none.
func (d *Dashboard) Handler() http.Handler {
	if d == nil {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.page)
	mux.HandleFunc("GET /api/v1/status", d.apiStatus)
	mux.HandleFunc("GET /api/v1/jobs", d.apiJobs)
	mux.HandleFunc("GET /api/v1/cluster", d.apiCluster)
	mux.HandleFunc("GET /api/v1/next", d.apiNext)
	mux.HandleFunc("POST /api/v1/jobs/{job}/{action}", d.apiAction)
	mux.HandleFunc("GET /actions/{job}", d.actionPage)
	mux.HandleFunc("POST /actions/{job}/{action}", d.formAction)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such API path; see docs/operating.md#dashboard")
	})
	return http.NewCrossOriginProtection().Handler(mux)
}

// ActionsEnabled reports whether a token file was configured.
func (d *Dashboard) ActionsEnabled() bool { return d.tokenHash != nil }

// authorized reports whether tok is the configured token (never when none
// is configured), in time independent of where they differ.
func (d *Dashboard) authorized(tok string) bool {
	if d.tokenHash == nil || tok == "" {
		return false
	}
	h := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(h[:], d.tokenHash) == 1
}

// bearer is the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(v)
}

// unauthorized answers 401 with no detail.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="anarchond"`)
	http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
}

// noActions answers a request for an action when no token file is set.
func noActions(w http.ResponseWriter) {
	writeError(w, http.StatusForbidden, "actions are off: dashboard.tokenFile is not set")
}

// describe names the store in messages.
func describe(cfg *config.Config) string { return fmt.Sprintf("store %s", cfg.Backend.Describe()) }
