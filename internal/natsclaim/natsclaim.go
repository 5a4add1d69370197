// Package natsclaim is the NATS JetStream claim-only backend
// (docs/spec.md#s3-2-nats): every instance publishes its claim of a run into
// one stream with the header Nats-Msg-Id: <namespace>:<job>:<slot>, and the
// stream's de-duplication keeps the first. The stream leader orders the
// publishes. The backend keeps no lease, so a run whose winner dies is not
// run again (at most once).
//
// # Stream and subjects
//
// One stream (backend.nats.stream, default ANARCHON) holds the subjects
// <namespace>.> with
//
//	<namespace>.<job>.claims   one message per run: the winner's claim
//	<namespace>.<job>.results  one message per finished run
//
// The backend creates the stream when it is missing: file storage,
// Options.Replicas replicas placed by Options.PlacementCluster and
// PlacementTags, limits retention, Duplicates =
// backend.nats.duplicateWindowMs and MaxAge = max(7 days, the duplicate
// window). It never changes an existing stream: one whose duplicate window
// is below the configured one, whose max age is below the duplicate window,
// whose subjects do not cover <namespace>.*.claims and
// <namespace>.*.results, that is a mirror or that does not acknowledge
// publishes is a start-up error naming the stream and both values.
//
// # Replicas
//
// At open the backend finds the topology (Topology): a server without a
// cluster is a single server; on a cluster it asks every server of the
// account for its name ($SYS.REQ.ACCOUNT.PING.CONNZ, which needs no system
// account) and counts the JetStream servers of the stream's cluster that
// answer, or the server URLs the client knows when there are more (a
// server that is down answers nothing, its URL stays in the list). With
// Options.Replicas 0 the stream gets 3 replicas on a cluster of 3 servers
// or more, 1 otherwise; more replicas than servers is a refusal
// (claim.PermanentError) naming the cluster's size. An existing stream with
// fewer replicas than wanted, or a single replica on a cluster, is used as
// it is with a warning naming the command that fixes it (nats stream edit
// <stream> --replicas N). Inspect reports all this for validate.
//
// # The claim
//
// Late first: with the instance's clock (Request.Now), a slot older than
// maxLate is late and nothing is sent. Otherwise the claim (JSON: token,
// instance, job, slot) is published to <namespace>.<job>.claims with
// Nats-Msg-Id <namespace>:<job>:<slot> and Nats-Expected-Stream set. (The
// original design spec wrote the id as <job>:<slot>, docs/spec.md#departures;
// the stream de-duplicates by id alone, across subjects, so the namespace is
// added: two namespaces on one stream must not take each other's claims.) The
// ack decides:
//
//	duplicate: false                      -> won(1): the stream stored mine
//	duplicate: true, stored token is mine -> won(1): my own re-sent claim
//	duplicate: true, another token        -> lost
//	duplicate: true, a note of the slot   -> lost: its outcome is recorded
//	duplicate: true, message gone (404)   -> lost: the de-duplication entry
//	                                         outlived the message (purged or
//	                                         deleted); never a second winner
//	no ack (timeout, disconnect)          -> error: the scheduler re-sends
//	                                         the claim with the same token
//
// A duplicate ack carries the sequence of the stored message; the backend
// reads it (stream.GetMsg) to compare tokens. On a stream with AllowDirect
// a direct get may be answered by a replica that has not applied the
// message yet; a "not found" there is asked again of the stream leader
// before it counts as lost. A clustered stream may answer "duplicate
// message id is in process" (10158) while the first publish of the same id
// is being replicated: the claim is published again after a short pause.
//
// # Notes
//
// The backend is a claim.Recorder. A note, the outcome of a slot no
// attempt ran (skipped, missed, unknown), is published exactly as the
// slot's claim would be: to <namespace>.<job>.claims with Nats-Msg-Id
// <namespace>:<job>:<slot>, its body (JSON: instance, job, slot, status,
// reason, held_by) with no token. The stream's de-duplication keeps the
// first claim or note of a run, so Record writes a note only when no claim
// or note came first (false otherwise), and a claim after the note gets a
// duplicate ack whose stored message is the note: lost, with no holder. The
// stream and its subjects are unchanged, so an existing stream takes notes
// as it is; an older binary on the same stream reads a note as a message
// that is not a claim (its claim is lost; its status does not list the
// note). Like a claim, a note is de-duplicated within the duplicate window
// only: a note of a slot older than the window is stored even if the slot
// was claimed, and status then shows the slot's run, not the note, since
// a claim or result of a slot wins over its note.
//
// # Retention
//
// The stream remembers a claim's Nats-Msg-Id for its duplicate window only.
// An instance that claims a slot after the window (its clock behind, or
// paused) would win it a second time, so the window must exceed maxLate +
// the largest clock skew + the longest pause you expect; configuration
// validation refuses a maxLate above half of duplicateWindowMs. Messages
// live for the stream's max age, which must be at least the duplicate
// window (the server refuses a window above the max age anyway): a re-sent
// claim must find the message its duplicate ack points to.
//
// # Status
//
// ListRuns reads the newest messages of the stream: it starts a short-lived
// consumer at the last sequence minus a span, joins claims, notes and
// results per (job, slot), and widens the span (four times each round)
// until it has the asked number of runs in the asked statuses
// (ListQuery.Statuses) or has reached the stream's first message. So
// status sees back as far as the stream keeps messages (its max age, 7
// days by default), and reads only as much of it as the limit needs. A
// claim without a result shows as running; on this backend that also means
// a run whose winner died before recording its result (no lease expires),
// and a claim that landed but whose answer never reached the instance
// before the slot became late (nobody runs it). Runs are ordered by slot,
// but read by the time they were stored: a claim sent late may rank a
// little out of place at the edge of what one read covered.
// Results carry the runner's start and finish times; a running run's start
// is the time the stream stored its claim. A note is listed as a finished
// run with no attempt, its reason and held-by slot, finished when the
// stream stored it (store time).
//
// # Connection
//
// Options.URL may list several servers (a cluster's): the client connects
// to one that answers and learns the cluster's others from it. Each server
// of the list that does not answer at open is logged by name; when none
// answers, the error names each with its reason. nats.go reconnects by
// itself, forever (MaxReconnects -1), to any server it knows: a disconnect
// and the reconnect are logged once each. A claim sent while disconnected
// waits in the client's reconnect buffer until it is sent or its context
// (or Options.Timeout) ends; then it fails and is re-sent with the same
// token. Credentials in the URL never appear in logs or errors.
//
// # TLS and credentials
//
// Options.TLS (backend.nats.tls) turns TLS on for every server of the URL,
// nats:// ones included (nats.Secure): the connection fails rather than
// falling back to plain text. Options.PasswordFile
// (backend.nats.passwordFile) names a file whose content (without its
// trailing newline) is the secret: with a user in the URL
// (nats://alice@host) it is that user's password, replacing any password
// written there; without one it is the token. The URL's user info is then
// removed from every server URL (nats.go would prefer it to the options).
// The file's content, like the URL's credentials, never appears in logs
// or errors.
package natsclaim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/secret"
	"github.com/anarchon/anarchon/internal/store"
)

// Defaults of Options.
const (
	// DefaultDuplicateWindow is backend.nats.duplicateWindowMs's default.
	DefaultDuplicateWindow = time.Hour
	// DefaultMaxAge is the max age of a stream the backend creates, unless
	// the duplicate window is longer.
	DefaultMaxAge = 7 * 24 * time.Hour
	// DefaultTimeout bounds one request (publish, get, stream info) whose
	// context has no deadline.
	DefaultTimeout = 5 * time.Second
	// reconnectWait is the pause between reconnection attempts (nats.go
	// adds jitter).
	reconnectWait = time.Second
)

// defaultListLimit is ListRuns's limit when the query sets none.
const defaultListLimit = 50

// errCodeDuplicateInProcess is the server's "duplicate message id is in
// process" (JSStreamDuplicateMessageConflict), answered by clustered
// streams while the first publish of the same id is still being replicated.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

// Options configures New.
type Options struct {
	// URL is the server URL, or a comma-separated list of them
	// (backend.nats.url). User and password or a token may be written in
	// it; they never appear in logs or errors.
	URL string
	// PasswordFile, if set, names a file holding the password of the URL's
	// user, or the token when the URL names no user
	// (backend.nats.passwordFile; see the package doc).
	PasswordFile string
	// TLS, if set, is the client TLS configuration, required of every
	// server (backend.nats.tls).
	TLS *tls.Config
	// Stream is the JetStream stream's name (backend.nats.stream).
	Stream string
	// Namespace is the first token of every subject (config namespace).
	Namespace string
	// DuplicateWindow is the stream's de-duplication window
	// (backend.nats.duplicateWindowMs); 0 means DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// MaxAge is how long the stream keeps messages, hence how far back
	// status sees. 0 means max(DefaultMaxAge, DuplicateWindow) for a stream
	// the backend creates, and any max age of at least DuplicateWindow for
	// an existing one. Set, it must be at least DuplicateWindow, and an
	// existing stream whose max age is smaller is refused.
	MaxAge time.Duration
	// Replicas is the replica count of the stream the backend creates
	// (backend.nats.replicas), at most the cluster's size; 0 chooses: 3 on
	// a cluster of 3 servers or more, else 1. An existing stream with fewer
	// is used as it is, with a warning.
	Replicas int
	// PlacementCluster and PlacementTags place the stream the backend
	// creates (backend.nats.placementCluster, placementTags): in that
	// cluster, on servers that have every tag (their server_tags).
	PlacementCluster string
	PlacementTags    []string
	// Timeout bounds one request whose context has no deadline; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Name is the client's connection name, shown by the server's
	// monitoring (default "anarchond").
	Name string
	// Log receives connection and stream messages; nil discards them.
	Log *zap.Logger
}

// Backend is the JetStream claim-only backend. It is safe for concurrent
// use. It is not a claim.Leaser: a claim is decided once and has no lease.
type Backend struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	name   string // stream name
	ns     string
	url    string // redacted
	log    *zap.Logger
	// dupWindow is the stream's actual de-duplication window (at least
	// the configured one).
	dupWindow time.Duration
	// allowDirect: the stream answers direct gets, possibly from replicas.
	allowDirect bool
	timeout     time.Duration
	// topo is the deployment found at open; plan the stream's replicas
	// chosen from it.
	topo Topology
	plan replicaPlan

	// owners remembers the instance of each claim this backend won, so
	// that Finish (whose Fence names no instance) can record it.
	mu     sync.Mutex
	owners map[ownerKey]string

	// ctl is the bucket of the jobs' control records (control.go).
	ctl controlBucket
	// reg is the bucket of the instances' records (instances.go).
	reg registryBucket
}

type ownerKey struct {
	job   string
	slot  int64
	token claim.Token
}

var (
	_ claim.Backend  = (*Backend)(nil)
	_ claim.Recorder = (*Backend)(nil)
)

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	switch {
	case strings.TrimSpace(o.URL) == "":
		return o, errors.New("backend.nats.url is empty")
	case !validStreamName(o.Stream):
		return o, fmt.Errorf("stream name %q: want 1-255 characters, none of '.', '*', '>', '/', '\\' or white space", o.Stream)
	case !validToken(o.Namespace):
		return o, fmt.Errorf("namespace %q is not a valid subject token", o.Namespace)
	case o.DuplicateWindow < 0:
		return o, fmt.Errorf("negative duplicate window %v", o.DuplicateWindow)
	case o.MaxAge < 0:
		return o, fmt.Errorf("negative max age %v", o.MaxAge)
	case o.Timeout < 0:
		return o, fmt.Errorf("negative timeout %v", o.Timeout)
	case o.Replicas < 0 || o.Replicas > MaxReplicas:
		return o, fmt.Errorf("backend.nats.replicas %d: want 1 to %d (JetStream's limit), or 0 to choose from the cluster's size", o.Replicas, MaxReplicas)
	case slices.Contains(o.PlacementTags, ""):
		return o, errors.New("backend.nats.placementTags has an empty tag")
	}
	if o.DuplicateWindow == 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	if o.DuplicateWindow < 100*time.Millisecond {
		return o, fmt.Errorf("duplicate window %v is below the server's minimum of 100ms", o.DuplicateWindow)
	}
	if o.MaxAge != 0 && o.MaxAge < o.DuplicateWindow {
		return o, fmt.Errorf("max age %v is below the duplicate window %v: a re-sent claim must find its message", o.MaxAge, o.DuplicateWindow)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Name == "" {
		o.Name = "anarchond"
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return o, nil
}

// New connects to NATS, creates the stream o.Stream if it is missing or
// checks the existing one (see the package doc), and returns the backend.
func New(ctx context.Context, o Options) (*Backend, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open nats backend: %w", err)
	}
	c, err := dial(ctx, o)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		nc: c.nc, js: c.js, name: o.Stream, ns: o.Namespace, url: c.where, log: o.Log,
		timeout: o.Timeout, owners: map[ownerKey]string{},
	}
	b.topo = discover(ctx, c.nc, o.PlacementCluster)
	b.log.Info("nats topology", zap.String("found", b.topo.String()), zap.String("server", b.topo.Server))
	if b.plan, err = planReplicas(o, b.topo); err == nil {
		err = b.ensureStream(ctx, o)
	}
	if err != nil {
		c.nc.Close()
		return nil, fmt.Errorf("%s: %w", c.where, secret.Scrub(refusal(err), c.secrets...))
	}
	return b, nil
}

// conn is a connection dial made, with what its messages need.
type conn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	where   string   // the URL list, redacted
	secrets []string // hidden from every message
	// dead are the servers of the URL list that did not answer.
	dead []deadServer
}

// dial connects to o.URL with o's credentials and TLS, and logs (and
// keeps) each server of the list that does not answer. Its errors name the URL list
// (redacted) and, when no server answered, each server and its reason.
func dial(ctx context.Context, o Options) (*conn, error) {
	c := &conn{where: secret.Redact(o.URL), secrets: secret.Find(o.URL)}
	var auth []nats.Option
	if o.PasswordFile != "" {
		pw, err := secret.ReadFile(o.PasswordFile, "backend.nats.passwordFile")
		if err != nil {
			return nil, fmt.Errorf("open nats backend: %w", err)
		}
		c.secrets = append(c.secrets, pw)
		if o.URL, auth, err = passwordAuth(o.URL, pw); err != nil {
			return nil, fmt.Errorf("open nats backend: %w", err)
		}
	}
	if o.TLS != nil {
		auth = append(auth, nats.Secure(o.TLS))
	}
	nc, err := connect(ctx, o, c.secrets, auth)
	if err != nil {
		if err = refusal(err); !claim.IsPermanent(err) {
			err = noServerError(ctx, o.URL, err)
		}
		return nil, fmt.Errorf("connect to %s: %w", c.where, secret.Scrub(err, c.secrets...))
	}
	if len(serverList(o.URL)) > 1 {
		c.dead = probeServers(ctx, o.URL, hostPort(nc.ConnectedUrl()))
		for i, d := range c.dead {
			c.dead[i].err = secret.Scrub(d.err, c.secrets...)
			o.Log.Warn("a nats server of backend.nats.url does not answer; connected to another",
				zap.String("down", d.url), zap.String("error", c.dead[i].err.Error()),
				zap.String("connected", secret.Redact(nc.ConnectedUrlRedacted())))
		}
	}
	if c.js, err = jetstream.New(nc, jetstream.WithDefaultTimeout(o.Timeout)); err != nil {
		nc.Close()
		return nil, fmt.Errorf("connect to %s: jetstream: %w", c.where, err)
	}
	c.nc = nc
	return c, nil
}

// passwordAuth returns the server URLs of rawURL without their user info,
// and the option that authenticates with pw: the user's password when the
// URLs name a user, the token otherwise. Its errors never quote a URL's
// credentials.
func passwordAuth(rawURL, pw string) (string, []nats.Option, error) {
	parts := strings.Split(rawURL, ",")
	user := ""
	for i, part := range parts {
		part = strings.TrimSpace(part)
		if !strings.Contains(part, "://") {
			part = "nats://" + part
		}
		u, err := url.Parse(part)
		if err != nil {
			return "", nil, fmt.Errorf("server URL %s: cannot be parsed", secret.Redact(part))
		}
		if u.User != nil {
			name := u.User.Username()
			if user != "" && name != user {
				return "", nil, errors.New("the server URLs name different users; with backend.nats.passwordFile they must name one user or none")
			}
			user = name
			u.User = nil
		}
		parts[i] = u.String()
	}
	stripped := strings.Join(parts, ",")
	if user != "" {
		return stripped, []nats.Option{nats.UserInfo(user, pw)}, nil
	}
	return stripped, []nats.Option{nats.Token(pw)}, nil
}

// connect dials o.URL with the reconnect policy, logging handlers and the
// extra options; secrets are hidden from what it logs.
func connect(ctx context.Context, o Options, secrets []string, extra []nats.Option) (*nats.Conn, error) {
	w := &connWatch{log: o.Log, url: o.URL, secrets: secrets}
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		// No reconnect buffer: a publish while disconnected fails at once
		// instead of waiting in nats.go's buffer (8 MiB by default) to be
		// sent on reconnection. The caller has given such a claim up by
		// then (its context ended; re-sends stop when the slot is late),
		// and a copy arriving later would win a slot past maxLate, or one
		// another instance claimed meanwhile, with nobody running it.
		// Results and history records are re-sent by their callers too.
		nats.ReconnectBufSize(-1),
		// One line per state change: nats.go calls these once per
		// disconnection and once per reconnection, not per failed attempt.
		nats.DisconnectErrHandler(w.disconnected),
		nats.ReconnectHandler(w.reconnected),
		nats.ErrorHandler(w.asyncError),
	}
	opts = append(opts, extra...)
	// nats.Connect takes no context: each server's dial is bounded by
	// nats.go's own timeout (2s).
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, err
	}
	w.setServer(nc)
	w.log.Info("connected to nats", zap.String("url", w.lastServer()),
		zap.String("server_version", nc.ConnectedServerVersion()))
	return nc, nil
}

// connWatch logs a connection's state changes (nats.go's handlers) with
// the server it was on, and the secrets hidden.
type connWatch struct {
	log     *zap.Logger
	url     string // the URLs dialled, named until a server answers
	secrets []string
	// server is the redacted URL of the server last connected to: nats.go
	// no longer names it once the connection is lost.
	server atomic.Pointer[string]
}

// setServer remembers the server nc is connected to.
func (w *connWatch) setServer(nc *nats.Conn) {
	u := secret.Redact(nc.ConnectedUrlRedacted())
	w.server.Store(&u)
}

// lastServer is the redacted URL of the server last connected to, or of
// the URLs dialled before any answered.
func (w *connWatch) lastServer() string {
	if u := w.server.Load(); u != nil {
		return *u
	}
	return secret.Redact(w.url)
}

// disconnected logs a lost connection; nats.go reconnects by itself.
func (w *connWatch) disconnected(_ *nats.Conn, err error) {
	if err == nil { // closed by us
		return
	}
	w.log.Warn("nats connection lost; reconnecting", zap.String("url", w.lastServer()),
		zap.String("error", secret.Hide(err.Error(), w.secrets...)))
}

// reconnected logs the server the connection is back on.
func (w *connWatch) reconnected(nc *nats.Conn) {
	w.setServer(nc)
	w.log.Info("nats reconnected", zap.String("url", w.lastServer()))
}

// asyncError logs an error nats.go reports outside any call, with the
// subscription's subject when it has one.
func (w *connWatch) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	subj := ""
	if sub != nil {
		subj = sub.Subject
	}
	w.log.Warn("nats asynchronous error", zap.String("subject", subj), zap.String("error", secret.Hide(err.Error(), w.secrets...)))
}

// Stream returns the stream's name.
func (b *Backend) Stream() string { return b.name }

// Namespace returns the subjects' first token.
func (b *Backend) Namespace() string { return b.ns }

// DuplicateWindow returns the stream's de-duplication window: how long a
// claim is remembered (at least Options.DuplicateWindow).
func (b *Backend) DuplicateWindow() time.Duration { return b.dupWindow }

// Close closes the connection.
func (b *Backend) Close() error {
	b.nc.Close()
	return nil
}

// claimSubject and resultSubject are a job's subjects.
func (b *Backend) claimSubject(job string) string  { return b.ns + "." + job + ".claims" }
func (b *Backend) resultSubject(job string) string { return b.ns + "." + job + ".results" }

// claimRecord is the body of a message on a job's claims subject: a claim
// (Token set), or a note of a slot no attempt ran (Token empty, Status one
// of claim.NoteStatuses). A note's fields are omitted from a claim, so a
// claim's body is what it was before notes existed; a binary that predates
// notes reads a note as a message that is not a claim (lost, and not
// listed).
type claimRecord struct {
	Token    claim.Token  `json:"token"`
	Instance string       `json:"instance"`
	Job      string       `json:"job"`
	Slot     int64        `json:"slot"`
	Status   claim.Status `json:"status,omitempty"`
	Reason   string       `json:"reason,omitempty"`
	HeldBy   int64        `json:"held_by,omitempty"`
}

// isNote reports whether rec is a note (of any run).
func (rec claimRecord) isNote() bool {
	return rec.Token == "" && rec.Job != "" && rec.Status.Noted() && rec.Reason != ""
}

// resultRecord is the body of a result message.
type resultRecord struct {
	Job        string       `json:"job"`
	Slot       int64        `json:"slot"`
	Attempt    int          `json:"attempt"`
	Instance   string       `json:"instance,omitempty"`
	Token      claim.Token  `json:"token"`
	Status     claim.Status `json:"status"`
	ExitCode   *int         `json:"exit_code"`
	StartedAt  time.Time    `json:"started_at"`
	FinishedAt time.Time    `json:"finished_at"`
	OutputTail string       `json:"output_tail"`
}

// claimMsgID is the de-duplication id of the run's claim:
// <namespace>:<job>:<slot>. The stream de-duplicates by id alone, whatever
// the subject, so the namespace is part of it: two namespaces sharing one
// stream never take each other's claims.
func (b *Backend) claimMsgID(job string, slot int64) string {
	return b.ns + ":" + job + ":" + strconv.FormatInt(slot, 10)
}

// resultMsgID is the de-duplication id of a token's result of the run.
func (b *Backend) resultMsgID(job string, slot int64, tok claim.Token) string {
	return b.claimMsgID(job, slot) + ":result:" + string(tok)
}

// Claim decides req (see the package doc). An error means no decision
// arrived; the claim may be re-sent with the same token.
func (b *Backend) Claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	if err := checkRequest(req); err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	if req.Now.Sub(req.SlotTime()) > req.MaxLate {
		return claim.Result{Outcome: claim.Late}, nil
	}
	res, err := b.claim(ctx, req)
	if err != nil {
		return claim.Result{}, fmt.Errorf("claim %s@%d: %w", req.Job, req.Slot, err)
	}
	return res, nil
}

func (b *Backend) claim(ctx context.Context, req claim.Request) (claim.Result, error) {
	body, err := json.Marshal(claimRecord{Token: req.Token, Instance: req.Instance, Job: req.Job, Slot: req.Slot})
	if err != nil {
		return claim.Result{}, err
	}
	msg := &nats.Msg{Subject: b.claimSubject(req.Job), Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, b.claimMsgID(req.Job, req.Slot))
	ack, err := b.publish(ctx, msg)
	if err != nil {
		return claim.Result{}, fmt.Errorf("publish: %w", err)
	}
	if !ack.Duplicate {
		b.remember(req)
		return claim.Result{Outcome: claim.Won, Attempt: 1}, nil
	}
	// Someone's claim, maybe mine, came first: ack.Sequence is its message.
	if ack.Sequence == 0 {
		return claim.Result{}, errors.New("duplicate ack without the stored message's sequence: the server is too old for this backend")
	}
	stored, err := b.getClaim(ctx, ack.Sequence)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		b.log.Info("claim lost: the stream still remembers the run's claim id but the message is gone",
			zap.String("job", req.Job), zap.Int64("slot", req.Slot), zap.Uint64("seq", ack.Sequence),
			zap.String("token", req.Token.Short()))
		return claim.Result{Outcome: claim.Lost}, nil
	case err != nil:
		return claim.Result{}, fmt.Errorf("read the stored claim (seq %d): %w", ack.Sequence, err)
	}
	var rec claimRecord
	err = json.Unmarshal(stored.Data, &rec)
	if err == nil && rec.Job == req.Job && rec.Slot == req.Slot && rec.isNote() {
		// The slot's outcome was recorded before any claim: it is final.
		return claim.Result{Outcome: claim.Lost}, nil
	}
	if err != nil || rec.Job != req.Job || rec.Slot != req.Slot || rec.Token == "" {
		// Not a claim of this run: whoever wrote it, it is not mine.
		b.log.Warn("claim lost to a message that is not a claim of this run",
			zap.String("job", req.Job), zap.Int64("slot", req.Slot), zap.Uint64("seq", ack.Sequence),
			zap.String("subject", stored.Subject))
		return claim.Result{Outcome: claim.Lost}, nil //nolint:nilerr // an unreadable message is not a claim of this run: lost
	}
	if rec.Token == req.Token {
		b.remember(req)
		return claim.Result{Outcome: claim.Won, Attempt: 1}, nil
	}
	return claim.Result{Outcome: claim.Lost, Holder: rec.Instance}, nil
}

// inProcessRetries bounds the re-publishes of a message the server
// answers "duplicate message id is in process" (about 3s in all); then the
// error is returned and the caller re-sends later.
const inProcessRetries = 20

// publish publishes msg to the stream and waits for its ack, publishing it
// again, briefly, while a clustered stream answers "duplicate message id is
// in process".
func (b *Backend) publish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	pause := 5 * time.Millisecond
	for try := 1; ; try++ {
		ack, err := b.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(b.name))
		if errors.Is(err, nats.ErrReconnectBufExceeded) {
			// nats.go's word for a publish refused while reconnecting
			// (the reconnect buffer is off, see connect).
			return nil, fmt.Errorf("not connected, reconnecting: %w", err)
		}
		if err == nil || !isInProcess(err) || try == inProcessRetries {
			return ack, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (after: %w)", ctx.Err(), err)
		case <-t.C:
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// isInProcess reports whether err is the server's "duplicate message id is
// in process" (10158).
func isInProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeDuplicateInProcess
}

// getClaim reads the message seq. On a stream with AllowDirect a "not
// found" may come from a replica that lags the leader, so it is asked
// again of the leader.
func (b *Backend) getClaim(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	m, err := b.stream.GetMsg(ctx, seq)
	if err == nil || !b.allowDirect || !errors.Is(err, jetstream.ErrMsgNotFound) {
		return m, err
	}
	return b.leaderGetMsg(ctx, seq)
}

// leaderGetMsg is STREAM.MSG.GET, which the stream leader answers (the
// client's GetMsg uses direct gets on an AllowDirect stream).
func (b *Backend) leaderGetMsg(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.timeout)
		defer cancel()
	}
	req, err := json.Marshal(struct {
		Seq uint64 `json:"seq"`
	}{seq})
	if err != nil {
		return nil, err
	}
	resp, err := b.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+b.name, req)
	if err != nil {
		return nil, err
	}
	var r struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("decode message get response: %w", err)
	}
	switch {
	case r.Error != nil && r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case r.Error != nil:
		return nil, r.Error
	case r.Message == nil:
		return nil, errors.New("empty message get response")
	}
	return &jetstream.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Seq, Data: r.Message.Data, Time: r.Message.Time}, nil
}

// maxOwners bounds the owners map. Finish empties it as runs end; entries
// stay only for runs whose result was never recorded. Beyond the bound the
// oldest slots are dropped: a result recorded without its instance still
// shows it in status, taken from the claim.
const maxOwners = 4096

// remember notes the instance of a won claim for Finish.
func (b *Backend) remember(req claim.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	store.Forget(b.owners, maxOwners, func(k ownerKey) int64 { return k.slot })
	b.owners[ownerKey{req.Job, req.Slot, req.Token}] = req.Instance
}

// owner returns the instance that won f's claim through this backend, if
// it did.
func (b *Backend) owner(f claim.Fence) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owners[ownerKey{f.Job, f.Slot, f.Token}]
}

func (b *Backend) forget(f claim.Fence) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.owners, ownerKey{f.Job, f.Slot, f.Token})
}

// Finish publishes the result of f's run to <namespace>.<job>.results with
// Nats-Msg-Id <namespace>:<job>:<slot>:result:<token>, so that a re-sent
// Finish is stored once. It is not fenced: a claim-only run has one owner.
// The output tail is cut (from its start) to fit the server's max payload.
func (b *Backend) Finish(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	if err := b.finish(ctx, f, fin); err != nil {
		return fmt.Errorf("finish %s: %w", f, err)
	}
	return nil
}

func (b *Backend) finish(ctx context.Context, f claim.Fence, fin claim.Finish) error {
	switch {
	case !validToken(f.Job):
		return fmt.Errorf("job name %q is not a valid subject token", f.Job)
	case f.Token == "":
		return errors.New("empty token")
	case !fin.Status.Final():
		return fmt.Errorf("status %q is not a final status", fin.Status)
	}
	rec := resultRecord{
		Job: f.Job, Slot: f.Slot, Attempt: max(f.Attempt, 1), Instance: b.owner(f), Token: f.Token,
		Status: fin.Status, StartedAt: fin.StartedAt.UTC(), FinishedAt: fin.FinishedAt.UTC(), OutputTail: fin.OutputTail,
	}
	if fin.Status != claim.StatusInterrupted {
		code := fin.ExitCode
		rec.ExitCode = &code
	}
	body, err := b.marshalResult(rec)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: b.resultSubject(f.Job), Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, b.resultMsgID(f.Job, f.Slot, f.Token))
	if _, err := b.publish(ctx, msg); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	b.forget(f)
	return nil
}

// payloadMargin is room left in a message for its headers and protocol.
const payloadMargin = 1024

// marshalResult encodes rec, cutting the output tail from its start until
// the message fits the server's max payload.
func (b *Backend) marshalResult(rec resultRecord) ([]byte, error) {
	limit := int(b.nc.MaxPayload()) - payloadMargin
	for {
		body, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		if len(body) <= limit || limit <= 0 || rec.OutputTail == "" {
			return body, nil
		}
		rec.OutputTail = cutFront(rec.OutputTail, len(body)-limit)
	}
}

// cutFront drops at least n bytes from the start of s, at a rune boundary.
func cutFront(s string, n int) string {
	if n >= len(s) {
		return ""
	}
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return s[n:]
}

// checkRequest refuses requests that cannot be published as designed.
func checkRequest(req claim.Request) error {
	if !validToken(req.Job) {
		return fmt.Errorf("job name %q is not a valid subject token", req.Job)
	}
	return store.CheckClaimOnly(req)
}

// validToken reports whether s can be one token of a subject.
func validToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}

// validStreamName reports whether s is a name JetStream accepts.
func validStreamName(s string) bool {
	return s != "" && len(s) <= 255 && !strings.ContainsAny(s, ".*>/\\ \t\r\n")
}
