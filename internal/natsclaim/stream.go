package natsclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// streamConfig is the stream the backend creates when it is missing,
// with the replicas of the plan.
func streamConfig(o Options, p replicaPlan) jetstream.StreamConfig {
	maxAge := o.MaxAge
	if maxAge == 0 {
		maxAge = max(DefaultMaxAge, o.DuplicateWindow)
	}
	return jetstream.StreamConfig{
		Name:              o.Stream,
		Description:       "anarchon claims and results (namespace " + o.Namespace + ")",
		Subjects:          []string{o.Namespace + ".>"},
		Retention:         jetstream.LimitsPolicy,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		Discard:           jetstream.DiscardOld,
		MaxAge:            maxAge,
		Storage:           jetstream.FileStorage,
		Replicas:          p.want,
		Placement:         placement(o),
		Duplicates:        o.DuplicateWindow,
	}
}

// ensureStream creates the stream when it is missing and checks it
// otherwise; it never changes an existing stream.
func (b *Backend) ensureStream(ctx context.Context, o Options) error {
	s, err := readStream(ctx, b.js, o.Stream, b.log)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = b.createStream(ctx, o)
		if err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("read stream %s: %w", o.Stream, err)
	}
	cfg := s.CachedInfo().Config
	if err := checkStream(cfg, o); err != nil {
		return streamRefusal(err)
	}
	b.warnLimits(cfg)
	for _, w := range replicaWarnings(cfg, b.plan, o) {
		b.log.Warn("nats stream: "+w, zap.String("stream", cfg.Name))
	}
	b.stream = s
	b.dupWindow = cfg.Duplicates
	b.allowDirect = cfg.AllowDirect
	return nil
}

// streamReadTries bounds the reads of a stream that go unanswered: a
// clustered stream being created, or electing its leader, answers nothing
// until it has one.
const streamReadTries = 3

// readStream reads the stream's info, asking again (up to streamReadTries
// times in all) while the request times out and ctx lasts.
func readStream(ctx context.Context, js jetstream.JetStream, name string, log *zap.Logger) (jetstream.Stream, error) {
	for try := 1; ; try++ {
		s, err := js.Stream(ctx, name)
		if err == nil || try == streamReadTries || ctx.Err() != nil || !isTimeout(err) {
			return s, err
		}
		log.Info("the nats stream does not answer yet (a clustered stream being created or electing its leader); asking again",
			zap.String("stream", name), zap.Int("try", try), zap.Error(err))
	}
}

// isTimeout reports whether err is a request that got no answer in time.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// createStream creates the missing stream, or finds the one another
// instance created meanwhile.
func (b *Backend) createStream(ctx context.Context, o Options) (jetstream.Stream, error) {
	cfg := streamConfig(o, b.plan)
	s, err := b.js.CreateStream(ctx, cfg)
	switch {
	case err == nil:
		b.log.Info("nats stream created", zap.String("stream", o.Stream),
			zap.Strings("subjects", cfg.Subjects), zap.Duration("duplicate_window", cfg.Duplicates),
			zap.Duration("max_age", cfg.MaxAge), zap.Int("replicas", cfg.Replicas),
			zap.String("replicas_from", b.plan.why()), zap.Any("placement", cfg.Placement))
		return s, nil
	case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse), isSubjectsOverlap(err), isTimeout(err) && ctx.Err() == nil:
		// Another instance created it first (with other settings, or
		// while the server was still adding it, which the server answers
		// as an overlap with itself, or on a cluster not at all): check
		// what it made. An overlap with a stream of another name is the
		// operator's.
		created := err
		s, err = readStream(ctx, b.js, o.Stream, b.log)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound) && isSubjectsOverlap(created):
			return nil, streamRefusal(b.overlapError(ctx, o, created))
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return nil, fmt.Errorf("create stream %s: %w", o.Stream, created)
		case err != nil:
			return nil, fmt.Errorf("read stream %s: %w", o.Stream, err)
		}
		return s, nil
	default:
		return nil, createRefusal(err, cfg, b.topo)
	}
}

// errCodeSubjectsOverlap is the server's answer to a stream whose
// subjects overlap another stream's (nats.go names no error for it).
const errCodeSubjectsOverlap jetstream.ErrorCode = 10065

func isSubjectsOverlap(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeSubjectsOverlap
}

// overlapError says which stream already takes the namespace's subjects.
func (b *Backend) overlapError(ctx context.Context, o Options, err error) error {
	other, lookupErr := b.js.StreamNameBySubject(ctx, o.Namespace+".x.claims")
	if lookupErr != nil || other == "" {
		return fmt.Errorf("create stream %s: another stream already takes subjects %s.>: set backend.nats.stream to it or use another namespace: %w",
			o.Stream, o.Namespace, err)
	}
	return fmt.Errorf("create stream %s: stream %s already takes subjects %s.>: set backend.nats.stream to %s or use another namespace: %w",
		o.Stream, other, o.Namespace, other, err)
}

// checkStream refuses an existing stream the backend cannot rely on.
func checkStream(cfg jetstream.StreamConfig, o Options) error {
	name := cfg.Name
	needs := []string{o.Namespace + ".*.claims", o.Namespace + ".*.results"}
	for _, need := range needs {
		if !coveredBy(need, cfg.Subjects) {
			return fmt.Errorf("stream %s has subjects %v, which do not cover %s.>: add %s.> to its subjects or use another backend.nats.stream",
				name, cfg.Subjects, o.Namespace, o.Namespace)
		}
	}
	switch {
	case cfg.Duplicates < o.DuplicateWindow:
		return fmt.Errorf("stream %s has a duplicate window of %v, below backend.nats.duplicateWindowMs %v: update the stream or lower the setting",
			name, cfg.Duplicates, o.DuplicateWindow)
	case cfg.MaxAge != 0 && cfg.MaxAge < o.DuplicateWindow:
		return fmt.Errorf("stream %s has a max age of %v, below backend.nats.duplicateWindowMs %v: update the stream or lower the setting",
			name, cfg.MaxAge, o.DuplicateWindow)
	case o.MaxAge != 0 && cfg.MaxAge != 0 && cfg.MaxAge < o.MaxAge:
		return fmt.Errorf("stream %s has a max age of %v, below the configured %v: update the stream or lower the setting",
			name, cfg.MaxAge, o.MaxAge)
	case cfg.NoAck:
		return fmt.Errorf("stream %s does not acknowledge publishes (no_ack): a claim needs the ack", name)
	case cfg.Mirror != nil:
		return fmt.Errorf("stream %s is a mirror of %s and takes no publishes", name, cfg.Mirror.Name)
	case cfg.Sealed:
		return fmt.Errorf("stream %s is sealed and takes no publishes", name)
	}
	return nil
}

// warnLimits logs settings of an existing stream that work but weaken the
// backend.
func (b *Backend) warnLimits(cfg jetstream.StreamConfig) {
	log := b.log.With(zap.String("stream", cfg.Name))
	if cfg.Storage == jetstream.MemoryStorage {
		log.Warn("the nats stream keeps messages in memory: a server restart forgets every claim, and slots within maxLate may be won again")
	}
	if cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 || cfg.MaxMsgsPerSubject > 0 {
		log.Warn("the nats stream has message or byte limits: claims and results may go before their max age, and status shows less",
			zap.Int64("max_msgs", cfg.MaxMsgs), zap.Int64("max_bytes", cfg.MaxBytes),
			zap.Int64("max_msgs_per_subject", cfg.MaxMsgsPerSubject))
	}
	if cfg.MaxAge == 0 {
		log.Info("the nats stream keeps messages forever (no max age)")
	}
	log.Debug("nats stream checked", zap.Duration("duplicate_window", cfg.Duplicates),
		zap.Duration("max_age", cfg.MaxAge), zap.Int("replicas", cfg.Replicas), zap.Bool("allow_direct", cfg.AllowDirect))
}

// coveredBy reports whether every subject matching the pattern need
// matches one of the patterns in have.
func coveredBy(need string, have []string) bool {
	for _, h := range have {
		if covers(h, need) {
			return true
		}
	}
	return false
}

// covers reports whether every subject matching pattern q matches pattern
// p ("*" one token, ">" one or more tokens at the end).
func covers(p, q string) bool {
	pt, qt := strings.Split(p, "."), strings.Split(q, ".")
	for i, t := range pt {
		if t == ">" {
			return i < len(qt)
		}
		if i >= len(qt) {
			return false
		}
		switch {
		case qt[i] == ">":
			return false
		case t == "*":
		case t != qt[i] || qt[i] == "*":
			return false
		}
	}
	return len(pt) == len(qt)
}
