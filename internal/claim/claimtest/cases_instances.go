package claimtest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The cases of backends that are claim.Registry (docs/spec.md#s6-cluster):
// an instance's heartbeat record is read back as written, stamped with the
// store's time where it has a clock, renewed in place by the next beat,
// still listed (not alive) after it expires, and gone after its retention.

// instanceOf is a record of a fresh instance, beating now by the local
// clock.
func instanceOf(what string) claim.Instance {
	return claim.Instance{
		Name: "inst-" + what + "-" + claim.NewToken().Short(), Host: "host-" + what, PID: 4242,
		Version: "1.2.3", Tags: []string{"a", "b"},
		StartedAt: time.Now().Add(-time.Minute).Truncate(time.Millisecond).UTC(),
		LastSeen:  time.Now(), Retain: time.Hour,
		Jobs: map[string]string{"backup": "h1.h2", "report": "h3.h4"}, JobsHash: "abcdef",
	}
}

func mustBeat(ctx context.Context, t *testing.T, b claim.Backend, i claim.Instance, ttl time.Duration) claim.Instance {
	t.Helper()
	got, err := as[claim.Registry](t, b).Beat(ctx, i, ttl)
	if err != nil {
		t.Fatalf("Beat(%s): %v", i.Name, err)
	}
	return got
}

// listed reads every record, returns name's (ok false: none) and the store
// time of the read (the local clock where the store has none).
func listed(ctx context.Context, t *testing.T, b claim.Backend, name string) (claim.Instance, time.Time, bool) {
	t.Helper()
	all, now, err := as[claim.Registry](t, b).Instances(ctx)
	if err != nil {
		t.Fatalf("Instances: %v", err)
	}
	if now.IsZero() {
		now = time.Now()
	}
	out, n := findAll(all, func(i claim.Instance) bool { return i.Name == name })
	if n > 1 {
		t.Fatalf("Instances lists %s %d times", name, n)
	}
	return out, now, n == 1
}

// wantRecord fails unless got holds want's own fields (those the store
// does not stamp).
func wantRecord(t *testing.T, got, want claim.Instance, what string) {
	t.Helper()
	g, w := got, want
	g.LastSeen, g.ExpiresAt, g.SkewMs = time.Time{}, time.Time{}, 0
	w.LastSeen, w.ExpiresAt, w.SkewMs = time.Time{}, time.Time{}, 0
	g.StartedAt, w.StartedAt = g.StartedAt.UTC(), w.StartedAt.UTC()
	for _, i := range []*claim.Instance{&g, &w} {
		if len(i.Tags) == 0 {
			i.Tags = nil
		}
		if len(i.Jobs) == 0 {
			i.Jobs = nil
		}
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, g, w)
	}
}

func (s *suite) testBeatThenListed(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	in := instanceOf("listed")
	ttl := 15 * time.Second
	got := mustBeat(ctx, t, b, in, ttl)
	wantRecord(t, got, in, "the record Beat returned")
	if s.h.Advance == nil {
		if d := time.Until(got.LastSeen).Abs(); d > s.h.ClockSkew {
			t.Fatalf("LastSeen %v is %v from the local clock (more than %v)", got.LastSeen, d, s.h.ClockSkew)
		}
	}
	if !got.ExpiresAt.Equal(got.LastSeen.Add(ttl)) {
		t.Fatalf("ExpiresAt %v, want LastSeen %v + %v", got.ExpiresAt, got.LastSeen, ttl)
	}
	read, now, ok := listed(ctx, t, b, in.Name)
	if !ok {
		t.Fatalf("Instances does not list %s after its beat", in.Name)
	}
	wantRecord(t, read, in, "the record read back")
	if !read.LastSeen.Equal(got.LastSeen) || !read.ExpiresAt.Equal(got.ExpiresAt) || read.SkewMs != got.SkewMs {
		t.Fatalf("read back %+v, Beat returned %+v", read, got)
	}
	if !read.Alive(now) {
		t.Fatalf("the record just beaten is not alive at the store's %v: %+v", now, read)
	}
}

func (s *suite) testBeatRenew(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	in := instanceOf("renew")
	first := mustBeat(ctx, t, b, in, time.Minute)
	in.Jobs = map[string]string{"backup": "h9.h9"}
	in.JobsHash, in.Tags = "fedcba", nil
	in.LastSeen = time.Now()
	second := mustBeat(ctx, t, b, in, time.Minute)
	if second.LastSeen.Before(first.LastSeen) {
		t.Fatalf("the second beat's LastSeen %v is before the first's %v", second.LastSeen, first.LastSeen)
	}
	read, _, ok := listed(ctx, t, b, in.Name)
	if !ok {
		t.Fatalf("Instances does not list %s", in.Name)
	}
	wantRecord(t, read, in, "the renewed record (the second beat's jobs, not the first's)")
}

func (s *suite) testBeatSkew(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	in := instanceOf("skew")
	in.LastSeen = time.Now().Add(time.Hour) // an instance clock an hour ahead
	got := mustBeat(ctx, t, b, in, time.Minute)
	want := in.LastSeen.Sub(got.LastSeen).Milliseconds()
	if d := got.SkewMs - want; d < -s.h.ClockSkew.Milliseconds() || d > s.h.ClockSkew.Milliseconds() {
		t.Fatalf("SkewMs %d, want about %d (the instance's clock minus the store's at the beat)", got.SkewMs, want)
	}
	if s.h.Advance == nil && (got.SkewMs < time.Hour.Milliseconds()-s.h.ClockSkew.Milliseconds() ||
		got.SkewMs > time.Hour.Milliseconds()+s.h.ClockSkew.Milliseconds()) {
		t.Fatalf("SkewMs %d of an instance an hour ahead, want about %d", got.SkewMs, time.Hour.Milliseconds())
	}
	if got.LastSeen.After(time.Now().Add(s.h.ClockSkew)) {
		t.Fatalf("LastSeen %v follows the instance's clock, not the store's", got.LastSeen)
	}
}

func (s *suite) testBeatExpires(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	in := instanceOf("expires")
	got := mustBeat(ctx, t, b, in, s.h.ShortLease)
	read := s.waitInstance(ctx, t, b, in.Name, got.ExpiresAt)
	if read.Name == "" {
		t.Fatalf("an expired record within its retention (%v) is no longer listed", in.Retain)
	}
	wantRecord(t, read, in, "the expired record")
}

func (s *suite) testBeatPruned(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	in := instanceOf("pruned")
	in.Retain = time.Millisecond
	got := mustBeat(ctx, t, b, in, s.h.ShortLease)
	s.waitInstance(ctx, t, b, in.Name, got.ExpiresAt.Add(in.Retain))
	other := instanceOf("pruner")
	other.LastSeen = time.Now()
	mustBeat(ctx, t, b, other, time.Minute)
	if _, _, ok := listed(ctx, t, b, in.Name); ok {
		t.Fatalf("a record past its retention is still listed")
	}
	if _, _, ok := listed(ctx, t, b, other.Name); !ok {
		t.Fatalf("the live record %s is not listed", other.Name)
	}
}

func (s *suite) testBeatApart(t *testing.T) {
	ctx, b := s.ctx(t), s.h.New(t)
	conns := s.connections(t, b)
	var names []string
	for i, c := range append(conns, b) {
		in := instanceOf("apart")
		in.PID = 100 + i
		mustBeat(ctx, t, c, in, time.Minute)
		names = append(names, in.Name)
	}
	for _, c := range conns {
		for _, n := range names {
			if _, _, ok := listed(ctx, t, c, n); !ok {
				t.Fatalf("%s is not listed on every connection", n)
			}
		}
	}
}

// waitInstance waits until the store's time is at or after until (by
// Harness.Advance, or by polling), and returns name's record then (the
// zero record when it is not listed).
func (s *suite) waitInstance(ctx context.Context, t *testing.T, b claim.Backend, name string, until time.Time) claim.Instance {
	t.Helper()
	if s.h.Advance != nil {
		_, now, _ := listed(ctx, t, b, name)
		if now.Before(until) {
			s.h.Advance(b, until.Sub(now)+time.Millisecond)
		}
	}
	deadline := time.Now().Add(s.h.ExpiryWait)
	for {
		i, now, _ := listed(ctx, t, b, name)
		if !now.Before(until) {
			if i.Name != "" && i.Alive(now) {
				t.Fatalf("a record is still alive at %v, after it expired at %v", now, i.ExpiresAt)
			}
			return i
		}
		if time.Now().After(deadline) {
			t.Fatalf("store time did not reach %v within %v", until, s.h.ExpiryWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
