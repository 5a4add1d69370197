package claim_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/claim/memclaim"
	"github.com/anarchon/anarchon/internal/clock"
)

func TestControlPausedAt(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	for _, tc := range []struct {
		c    claim.Control
		at   time.Time
		want bool
	}{
		{claim.Control{Job: "a"}, now, false},
		{claim.Control{Job: "a", Paused: true}, now, true},
		{claim.Control{Job: "a", Paused: true}, now.Add(100 * 365 * 24 * time.Hour), true},
		{claim.Control{Job: "a", Paused: true, Until: now.UnixMilli()}, now.Add(-time.Millisecond), true},
		{claim.Control{Job: "a", Paused: true, Until: now.UnixMilli()}, now, false},
		{claim.Control{Job: "a", Paused: true, Until: now.UnixMilli()}, now.Add(time.Hour), false},
	} {
		if got := tc.c.PausedAt(tc.at); got != tc.want {
			t.Errorf("%+v.PausedAt(%d) = %v, want %v", tc.c, tc.at.UnixMilli(), got, tc.want)
		}
	}
	if !(claim.Control{Paused: true}).UntilTime().IsZero() {
		t.Error("UntilTime of a pause with no end: want the zero time")
	}
}

func TestControlCheck(t *testing.T) {
	for _, tc := range []struct {
		c    claim.Control
		want string // "" for none
	}{
		{claim.Control{Job: "a", Paused: true, Until: 5, Reason: "r", By: "u@h"}, ""},
		{claim.Control{Job: "a"}, ""},
		{claim.Control{}, "empty job"},
		{claim.Control{Job: "a", Paused: true, Until: -1}, "negative until"},
		{claim.Control{Job: "a", Until: 5}, "not paused"},
		{claim.Control{Job: "a", Reason: strings.Repeat("x", claim.MaxControlText+1)}, "reason of 1025 bytes"},
		{claim.Control{Job: "a", By: strings.Repeat("x", claim.MaxControlText+1)}, "by of 1025 bytes"},
	} {
		err := tc.c.Check()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%+v) = %v, want %q", tc.c, err, tc.want)
		}
	}
}

// noControl is a backend that cannot keep control records and says why.
type noControl struct{ claim.Backend }

func (noControl) WhyNoControl() string { return "it cannot" }

func TestControllerOf(t *testing.T) {
	mem := memclaim.New(clock.NewFake(time.Now()))
	if c, err := claim.ControllerOf(mem, "mem"); err != nil || c == nil {
		t.Fatalf("ControllerOf(a Controller) = %v, %v", c, err)
	}
	_, err := claim.ControllerOf(noControl{mem}, "rabbitmq")
	if !errors.Is(err, claim.ErrNoControl) || err.Error() != "pause is not supported on backend rabbitmq: it cannot" {
		t.Fatalf("ControllerOf(a NoController) = %v", err)
	}
	type plain struct{ claim.Backend }
	_, err = claim.ControllerOf(plain{mem}, "x")
	if !errors.Is(err, claim.ErrNoControl) || !strings.Contains(err.Error(), "on backend x: the store keeps no control records") {
		t.Fatalf("ControllerOf(a plain Backend) = %v", err)
	}
}
