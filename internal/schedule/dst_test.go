package schedule_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/adhocore/gronx"

	"github.com/anarchon/anarchon/internal/schedule"
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load zone %s: %v", name, err)
	}
	return loc
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad time %q in test: %v", s, err)
	}
	return v
}

// firstN calls Next n times, starting after from.
func firstN(s schedule.Schedule, from time.Time, n int) []time.Time {
	var out []time.Time
	for t := from; len(out) < n; {
		next := s.Next(t)
		if next.IsZero() {
			break
		}
		out = append(out, next)
		t = next
	}
	return out
}

func show(ts []time.Time, loc *time.Location) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "\n\t%s (%s)", t.In(loc).Format(time.RFC3339), t.UTC().Format(time.RFC3339Nano))
	}
	return b.String()
}

// checkSlots checks the slots after from against want (RFC 3339 instants,
// any offset), and that every slot is a UTC instant.
func checkSlots(t *testing.T, zone, expr, from string, want []string) {
	t.Helper()
	loc := mustLoc(t, zone)
	s, err := schedule.Parse(expr, loc)
	if err != nil {
		t.Fatalf("Parse(%q, %s): %v", expr, zone, err)
	}
	var wantT []time.Time
	for _, w := range want {
		wantT = append(wantT, mustTime(t, w))
	}
	got := firstN(s, mustTime(t, from), len(want))
	equal := len(got) == len(wantT)
	for i := 0; equal && i < len(got); i++ {
		equal = got[i].Equal(wantT[i]) && got[i].Location() == time.UTC
	}
	if !equal {
		t.Errorf("%s %q after %s:\ngot%s\nwant%s", zone, expr, from, show(got, loc), show(wantT, loc))
	}
}

// TestTransitionsAsAssumed pins the tzdata facts the DST tables rely on.
func TestTransitionsAsAssumed(t *testing.T) {
	tests := []struct {
		zone                string
		at                  string // the transition instant
		before, after       string // wall clock one second before, and at it
		offBefore, offAfter int
	}{
		{"Europe/Athens", "2027-03-28T01:00:00Z", "02:59:59", "04:00:00", 2 * 3600, 3 * 3600},
		{"Europe/Athens", "2027-10-31T01:00:00Z", "03:59:59", "03:00:00", 3 * 3600, 2 * 3600},
		{"America/New_York", "2027-03-14T07:00:00Z", "01:59:59", "03:00:00", -5 * 3600, -4 * 3600},
		{"America/New_York", "2027-11-07T06:00:00Z", "01:59:59", "01:00:00", -4 * 3600, -5 * 3600},
		{"Australia/Lord_Howe", "2027-04-03T15:00:00Z", "01:59:59", "01:30:00", 11 * 3600, 10*3600 + 1800},
		{"Australia/Lord_Howe", "2027-10-02T15:30:00Z", "01:59:59", "02:30:00", 10*3600 + 1800, 11 * 3600},
		{"Antarctica/Troll", "2027-03-28T01:00:00Z", "00:59:59", "03:00:00", 0, 2 * 3600},
		{"Antarctica/Casey", "2022-10-01T16:01:00Z", "00:00:59", "03:01:00", 8 * 3600, 11 * 3600},
		{"Pacific/Apia", "2011-12-30T10:00:00Z", "23:59:59", "00:00:00", -10 * 3600, 14 * 3600}, // and 30 December is skipped
	}
	for _, tt := range tests {
		loc := mustLoc(t, tt.zone)
		at := mustTime(t, tt.at)
		b := at.Add(-time.Second).In(loc)
		a := at.In(loc)
		_, ob := b.Zone()
		_, oa := a.Zone()
		if b.Format(time.TimeOnly) != tt.before || a.Format(time.TimeOnly) != tt.after || ob != tt.offBefore || oa != tt.offAfter {
			t.Errorf("%s at %s: %s (%d) -> %s (%d), want %s (%d) -> %s (%d)", tt.zone, tt.at,
				b.Format(time.TimeOnly), ob, a.Format(time.TimeOnly), oa, tt.before, tt.offBefore, tt.after, tt.offAfter)
		}
	}
}

// TestDST covers real transition days. Expected slots are written with the
// zone's offset so that they read as wall-clock times.
func TestDST(t *testing.T) {
	tests := []struct {
		name, zone, expr, from string
		want                   []string
	}{
		// Europe/Athens, spring 2027-03-28: 03:00 EET -> 04:00 EEST (01:00Z).
		{"athens spring fixed in gap", "Europe/Athens", "30 3 * * *", "2027-03-27T00:00:00+02:00",
			[]string{"2027-03-27T03:30:00+02:00", "2027-03-28T04:00:00+03:00", "2027-03-29T03:30:00+03:00"}},
		{"athens spring fixed in gap, from just before", "Europe/Athens", "30 3 * * *", "2027-03-28T02:59:59+02:00",
			[]string{"2027-03-28T04:00:00+03:00", "2027-03-29T03:30:00+03:00"}},
		{"athens spring fixed in gap, from the gap end", "Europe/Athens", "30 3 * * *", "2027-03-28T04:00:00+03:00",
			[]string{"2027-03-29T03:30:00+03:00"}},
		{"athens spring two wall times in gap collapse", "Europe/Athens", "0,30 3 * * *", "2027-03-27T12:00:00+02:00",
			[]string{"2027-03-28T04:00:00+03:00", "2027-03-29T03:00:00+03:00", "2027-03-29T03:30:00+03:00"}},
		{"athens spring gap and gap end collapse", "Europe/Athens", "0 3,4 * * *", "2027-03-27T12:00:00+02:00",
			[]string{"2027-03-28T04:00:00+03:00", "2027-03-29T03:00:00+03:00", "2027-03-29T04:00:00+03:00"}},
		{"athens spring seconds fixed job in gap", "Europe/Athens", "*/20 30 3 * * *", "2027-03-27T12:00:00+02:00",
			[]string{"2027-03-28T04:00:00+03:00", "2027-03-29T03:30:00+03:00", "2027-03-29T03:30:20+03:00", "2027-03-29T03:30:40+03:00", "2027-03-30T03:30:00+03:00"}},
		{"athens spring fixed outside gap", "Europe/Athens", "30 2 * * *", "2027-03-27T12:00:00+02:00",
			[]string{"2027-03-28T02:30:00+02:00", "2027-03-29T02:30:00+03:00"}},
		{"athens spring */30", "Europe/Athens", "*/30 * * * *", "2027-03-28T02:00:00+02:00",
			[]string{"2027-03-28T02:30:00+02:00", "2027-03-28T04:00:00+03:00", "2027-03-28T04:30:00+03:00"}},
		{"athens spring 5 * * * *", "Europe/Athens", "5 * * * *", "2027-03-28T01:30:00+02:00",
			[]string{"2027-03-28T02:05:00+02:00", "2027-03-28T04:05:00+03:00", "2027-03-28T05:05:00+03:00"}},
		{"athens spring seconds", "Europe/Athens", "*/20 * * * * *", "2027-03-28T02:59:20+02:00",
			[]string{"2027-03-28T02:59:40+02:00", "2027-03-28T04:00:00+03:00", "2027-03-28T04:00:20+03:00"}},
		{"athens spring @daily", "Europe/Athens", "@daily", "2027-03-27T12:00:00+02:00",
			[]string{"2027-03-28T00:00:00+02:00", "2027-03-29T00:00:00+03:00"}},
		{"athens spring @hourly", "Europe/Athens", "@hourly", "2027-03-28T01:30:00+02:00",
			[]string{"2027-03-28T02:00:00+02:00", "2027-03-28T04:00:00+03:00", "2027-03-28T05:00:00+03:00"}},
		{"athens spring @every 90m", "Europe/Athens", "@every 90m", "2027-03-28T00:00:00Z",
			[]string{"2027-03-28T01:30:00Z", "2027-03-28T03:00:00Z", "2027-03-28T04:30:00Z", "2027-03-28T06:00:00Z"}},

		// Europe/Athens, fall 2027-10-31: 04:00 EEST -> 03:00 EET (01:00Z).
		{"athens fall fixed in repeated hour", "Europe/Athens", "30 3 * * *", "2027-10-30T12:00:00+03:00",
			[]string{"2027-10-31T03:30:00+03:00", "2027-11-01T03:30:00+02:00"}},
		{"athens fall fixed, from the second copy", "Europe/Athens", "30 3 * * *", "2027-10-31T03:10:00+02:00",
			[]string{"2027-11-01T03:30:00+02:00"}},
		{"athens fall fixed, from first copy after the slot", "Europe/Athens", "30 3 * * *", "2027-10-31T03:40:00+03:00",
			[]string{"2027-11-01T03:30:00+02:00"}},
		{"athens fall fixed, from the transition", "Europe/Athens", "30 3 * * *", "2027-10-31T03:00:00+02:00",
			[]string{"2027-11-01T03:30:00+02:00"}},
		{"athens fall fixed list in repeated hour", "Europe/Athens", "0,30 3,4 * * *", "2027-10-31T02:00:00+03:00",
			[]string{"2027-10-31T03:00:00+03:00", "2027-10-31T03:30:00+03:00", "2027-10-31T04:00:00+02:00", "2027-10-31T04:30:00+02:00", "2027-11-01T03:00:00+02:00"}},
		{"athens fall seconds fixed job", "Europe/Athens", "*/30 59 3 * * *", "2027-10-31T02:00:00+03:00",
			[]string{"2027-10-31T03:59:00+03:00", "2027-10-31T03:59:30+03:00", "2027-11-01T03:59:00+02:00"}},
		{"athens fall */30", "Europe/Athens", "*/30 * * * *", "2027-10-31T02:45:00+03:00",
			[]string{"2027-10-31T03:00:00+03:00", "2027-10-31T03:30:00+03:00", "2027-10-31T03:00:00+02:00", "2027-10-31T03:30:00+02:00", "2027-10-31T04:00:00+02:00"}},
		{"athens fall 5 * * * *", "Europe/Athens", "5 * * * *", "2027-10-31T02:30:00+03:00",
			[]string{"2027-10-31T03:05:00+03:00", "2027-10-31T03:05:00+02:00", "2027-10-31T04:05:00+02:00"}},
		{"athens fall seconds", "Europe/Athens", "*/20 * * * * *", "2027-10-31T03:59:20+03:00",
			[]string{"2027-10-31T03:59:40+03:00", "2027-10-31T03:00:00+02:00", "2027-10-31T03:00:20+02:00"}},
		{"athens fall @daily", "Europe/Athens", "@daily", "2027-10-30T12:00:00+03:00",
			[]string{"2027-10-31T00:00:00+03:00", "2027-11-01T00:00:00+02:00"}},
		{"athens fall @every 90m", "Europe/Athens", "@every 90m", "2027-10-31T00:00:00Z",
			[]string{"2027-10-31T01:30:00Z", "2027-10-31T03:00:00Z", "2027-10-31T04:30:00Z", "2027-10-31T06:00:00Z"}},

		// America/New_York, spring 2027-03-14: 02:00 EST -> 03:00 EDT (07:00Z).
		{"new york spring fixed in gap", "America/New_York", "30 2 * * *", "2027-03-13T12:00:00-05:00",
			[]string{"2027-03-14T03:00:00-04:00", "2027-03-15T02:30:00-04:00"}},
		{"new york spring fixed after gap", "America/New_York", "30 3 * * *", "2027-03-13T12:00:00-05:00",
			[]string{"2027-03-14T03:30:00-04:00", "2027-03-15T03:30:00-04:00"}},
		{"new york spring */30", "America/New_York", "*/30 * * * *", "2027-03-14T01:00:00-05:00",
			[]string{"2027-03-14T01:30:00-05:00", "2027-03-14T03:00:00-04:00", "2027-03-14T03:30:00-04:00"}},
		{"new york spring 5 * * * *", "America/New_York", "5 * * * *", "2027-03-14T01:00:00-05:00",
			[]string{"2027-03-14T01:05:00-05:00", "2027-03-14T03:05:00-04:00", "2027-03-14T04:05:00-04:00"}},
		{"new york spring seconds", "America/New_York", "*/20 * * * * *", "2027-03-14T01:59:20-05:00",
			[]string{"2027-03-14T01:59:40-05:00", "2027-03-14T03:00:00-04:00", "2027-03-14T03:00:20-04:00"}},
		{"new york spring @daily", "America/New_York", "@daily", "2027-03-13T12:00:00-05:00",
			[]string{"2027-03-14T00:00:00-05:00", "2027-03-15T00:00:00-04:00"}},
		{"new york spring @every 90m", "America/New_York", "@every 90m", "2027-03-14T05:00:00Z",
			[]string{"2027-03-14T06:00:00Z", "2027-03-14T07:30:00Z", "2027-03-14T09:00:00Z", "2027-03-14T10:30:00Z"}},

		// America/New_York, fall 2027-11-07: 02:00 EDT -> 01:00 EST (06:00Z).
		{"new york fall fixed in repeated hour", "America/New_York", "30 1 * * *", "2027-11-06T12:00:00-04:00",
			[]string{"2027-11-07T01:30:00-04:00", "2027-11-08T01:30:00-05:00"}},
		{"new york fall fixed at start of repeated hour", "America/New_York", "0 1 * * *", "2027-11-06T12:00:00-04:00",
			[]string{"2027-11-07T01:00:00-04:00", "2027-11-08T01:00:00-05:00"}},
		{"new york fall */30", "America/New_York", "*/30 * * * *", "2027-11-07T00:45:00-04:00",
			[]string{"2027-11-07T01:00:00-04:00", "2027-11-07T01:30:00-04:00", "2027-11-07T01:00:00-05:00", "2027-11-07T01:30:00-05:00", "2027-11-07T02:00:00-05:00"}},
		{"new york fall 5 * * * *", "America/New_York", "5 * * * *", "2027-11-07T00:30:00-04:00",
			[]string{"2027-11-07T01:05:00-04:00", "2027-11-07T01:05:00-05:00", "2027-11-07T02:05:00-05:00"}},
		{"new york fall seconds", "America/New_York", "*/20 * * * * *", "2027-11-07T01:59:20-04:00",
			[]string{"2027-11-07T01:59:40-04:00", "2027-11-07T01:00:00-05:00", "2027-11-07T01:00:20-05:00"}},
		{"new york fall @daily", "America/New_York", "@daily", "2027-11-06T12:00:00-04:00",
			[]string{"2027-11-07T00:00:00-04:00", "2027-11-08T00:00:00-05:00"}},
		{"new york fall @every 90m", "America/New_York", "@every 90m", "2027-11-07T04:00:00Z",
			[]string{"2027-11-07T04:30:00Z", "2027-11-07T06:00:00Z", "2027-11-07T07:30:00Z", "2027-11-07T09:00:00Z"}},

		// Australia/Lord_Howe, fall 2027-04-04: 02:00 +11 -> 01:30 +1030 (15:00Z on the 3rd).
		{"lord howe fall fixed in repeated half hour", "Australia/Lord_Howe", "45 1 * * *", "2027-04-03T12:00:00+11:00",
			[]string{"2027-04-04T01:45:00+11:00", "2027-04-05T01:45:00+10:30"}},
		{"lord howe fall fixed before repeated half hour", "Australia/Lord_Howe", "15 1 * * *", "2027-04-03T12:00:00+11:00",
			[]string{"2027-04-04T01:15:00+11:00", "2027-04-05T01:15:00+10:30"}},
		{"lord howe fall */30", "Australia/Lord_Howe", "*/30 * * * *", "2027-04-04T01:00:00+11:00",
			[]string{"2027-04-04T01:30:00+11:00", "2027-04-04T01:30:00+10:30", "2027-04-04T02:00:00+10:30"}},
		{"lord howe fall 5 * * * *", "Australia/Lord_Howe", "5 * * * *", "2027-04-04T00:30:00+11:00",
			[]string{"2027-04-04T01:05:00+11:00", "2027-04-04T02:05:00+10:30"}},
		{"lord howe fall 45 * * * *", "Australia/Lord_Howe", "45 * * * *", "2027-04-04T00:30:00+11:00",
			[]string{"2027-04-04T00:45:00+11:00", "2027-04-04T01:45:00+11:00", "2027-04-04T01:45:00+10:30", "2027-04-04T02:45:00+10:30"}},
		{"lord howe fall seconds", "Australia/Lord_Howe", "*/20 * * * * *", "2027-04-04T01:59:20+11:00",
			[]string{"2027-04-04T01:59:40+11:00", "2027-04-04T01:30:00+10:30", "2027-04-04T01:30:20+10:30"}},
		{"lord howe fall @daily", "Australia/Lord_Howe", "@daily", "2027-04-03T12:00:00+11:00",
			[]string{"2027-04-04T00:00:00+11:00", "2027-04-05T00:00:00+10:30"}},
		{"lord howe fall @every 90m", "Australia/Lord_Howe", "@every 90m", "2027-04-03T13:00:00Z",
			[]string{"2027-04-03T13:30:00Z", "2027-04-03T15:00:00Z", "2027-04-03T16:30:00Z", "2027-04-03T18:00:00Z"}},

		// Australia/Lord_Howe, spring 2027-10-03: 02:00 +1030 -> 02:30 +11 (15:30Z on the 2nd).
		{"lord howe spring fixed in gap", "Australia/Lord_Howe", "15 2 * * *", "2027-10-02T12:00:00+10:30",
			[]string{"2027-10-03T02:30:00+11:00", "2027-10-04T02:15:00+11:00"}},
		{"lord howe spring fixed at gap end", "Australia/Lord_Howe", "0,30 2 * * *", "2027-10-02T12:00:00+10:30",
			[]string{"2027-10-03T02:30:00+11:00", "2027-10-04T02:00:00+11:00", "2027-10-04T02:30:00+11:00"}},
		{"lord howe spring */30", "Australia/Lord_Howe", "*/30 * * * *", "2027-10-03T01:00:00+10:30",
			[]string{"2027-10-03T01:30:00+10:30", "2027-10-03T02:30:00+11:00", "2027-10-03T03:00:00+11:00"}},
		{"lord howe spring 5 * * * *", "Australia/Lord_Howe", "5 * * * *", "2027-10-03T01:00:00+10:30",
			[]string{"2027-10-03T01:05:00+10:30", "2027-10-03T03:05:00+11:00"}},
		{"lord howe spring 45 * * * *", "Australia/Lord_Howe", "45 * * * *", "2027-10-03T01:00:00+10:30",
			[]string{"2027-10-03T01:45:00+10:30", "2027-10-03T02:45:00+11:00"}},
		{"lord howe spring seconds", "Australia/Lord_Howe", "*/20 * * * * *", "2027-10-03T01:59:20+10:30",
			[]string{"2027-10-03T01:59:40+10:30", "2027-10-03T02:30:00+11:00", "2027-10-03T02:30:20+11:00"}},
		{"lord howe spring @daily", "Australia/Lord_Howe", "@daily", "2027-10-02T12:00:00+10:30",
			[]string{"2027-10-03T00:00:00+10:30", "2027-10-04T00:00:00+11:00"}},
		{"lord howe spring @every 90m", "Australia/Lord_Howe", "@every 90m", "2027-10-02T13:00:00Z",
			[]string{"2027-10-02T13:30:00Z", "2027-10-02T15:00:00Z", "2027-10-02T16:30:00Z", "2027-10-02T18:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSlots(t, tt.zone, tt.expr, tt.from, tt.want)
		})
	}
}

// TestEveryIgnoresZone checks that @every slots are the multiples of the
// duration since the Unix epoch, the same instants in every zone.
func TestEveryIgnoresZone(t *testing.T) {
	from := mustTime(t, "2027-03-27T22:17:03.5Z") // spans Europe/Athens' spring forward
	for _, tt := range []struct {
		expr string
		d    time.Duration
	}{{"@every 90m", 90 * time.Minute}, {"@every 7s", 7 * time.Second}, {"@every 1h", time.Hour}, {"@every 1.5s", 1500 * time.Millisecond}} {
		to := from.Add(min(48*time.Hour, 3000*tt.d))
		var ref []time.Time
		for _, zone := range []string{"UTC", "Europe/Athens", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"} {
			s, err := schedule.Parse(tt.expr, mustLoc(t, zone))
			if err != nil {
				t.Fatal(err)
			}
			got := schedule.Between(s, from, to, 0)
			if want := int(to.Sub(from) / tt.d); len(got) < want || len(got) > want+1 {
				t.Errorf("%s in %s: %d slots in %v, want about %d", tt.expr, zone, len(got), to.Sub(from), want)
			}
			for _, g := range got {
				if g.UnixMilli()%tt.d.Milliseconds() != 0 || g.Location() != time.UTC {
					t.Errorf("%s in %s: slot %s is not a UTC multiple of %v since the epoch", tt.expr, zone, g.Format(time.RFC3339Nano), tt.d)
				}
			}
			if ref == nil {
				ref = got
			} else if !slices.EqualFunc(got, ref, time.Time.Equal) {
				t.Errorf("%s in %s differs from UTC", tt.expr, zone)
			}
		}
	}
}

// gapWalls lists the wall-clock minutes or seconds (naive, in UTC) skipped by
// the transition at instant at, where the offset goes from prev to next.
func gapWalls(at time.Time, prev, next int, step time.Duration) []time.Time {
	var out []time.Time
	at = at.UTC()
	for w := at.Add(time.Duration(prev) * time.Second); w.Before(at.Add(time.Duration(next) * time.Second)); w = w.Add(step) {
		out = append(out, w)
	}
	return out
}

// oracle computes the slots in (from, to] by brute force, straight from the
// rule in docs/spec.md#s5-zones and gronx's IsDue: it visits every instant
// (every step) and every wall time skipped by a gap.
func oracle(t *testing.T, expr string, loc *time.Location, from, to time.Time, step time.Duration) []time.Time {
	t.Helper()
	segs, err := gronx.Segments(expr)
	if err != nil {
		t.Fatal(err)
	}
	fixed := !strings.HasPrefix(segs[1], "*") && !strings.HasPrefix(segs[2], "*")
	g := gronx.New()
	due := func(wall time.Time) bool {
		// what g.IsDue(expr, wall) does, without splitting expr every time
		g.C.SetRef(wall)
		ok, err := g.SegmentsDue(segs)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	var out []time.Time
	seen := map[time.Time]bool{} // wall times already given a slot (fixed jobs)
	for u := from.Truncate(step).Add(step); !u.After(to); u = u.Add(step) {
		local := u.In(loc)
		_, off := local.Zone()
		wall := u.UTC().Add(time.Duration(off) * time.Second)
		if due(local) && !(fixed && seen[wall]) {
			out = append(out, u)
			seen[wall] = true
		}
		// A fixed-time job's wall times skipped by a gap ending at u run at
		// u, if the gap is shorter than 3 hours.
		if _, prevOff := u.Add(-time.Second).In(loc).Zone(); fixed && prevOff < off && off-prevOff < 3*3600 {
			for _, w := range gapWalls(u, prevOff, off, step) {
				if due(w) && (len(out) == 0 || !out[len(out)-1].Equal(u)) {
					out = append(out, u)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(out, time.Time.Equal)
}

// TestAgainstOracle compares Next with the brute-force oracle over the
// transition days of several zones.
func TestAgainstOracle(t *testing.T) {
	days := []struct{ zone, day string }{
		{"Europe/Athens", "2027-03-28"},
		{"Europe/Athens", "2027-10-31"},
		{"America/New_York", "2027-03-14"},
		{"America/New_York", "2027-11-07"},
		{"Australia/Lord_Howe", "2027-04-04"},
		{"Australia/Lord_Howe", "2027-10-03"},
		{"Europe/London", "2027-03-28"},
		{"Europe/London", "2027-10-31"},
		{"UTC", "2027-06-15"},
		// Beyond the tzdata tables (2037), where Go computes offsets from the
		// zone's rule; 2044 is a leap year, and Go's ZoneBounds gets
		// 31 December of a leap year wrong there.
		{"Europe/Athens", "2044-03-27"},
		{"Europe/Athens", "2044-10-30"},
		{"Europe/Athens", "2044-12-31"},
		{"America/New_York", "2044-11-06"},
		{"Australia/Lord_Howe", "2044-04-03"},
		{"Australia/Lord_Howe", "2044-10-02"},
		{"Australia/Lord_Howe", "2044-12-31"},
		// Forward jumps of 2 hours (caught up), 3 hours and a whole day (not).
		{"Antarctica/Troll", "2027-03-28"},
		{"Antarctica/Casey", "2022-10-02"},
		{"Pacific/Apia", "2011-12-29"},
	}
	minuteExprs := []string{
		"30 3 * * *", "0,30 3 * * *", "0 3,4 * * *", "30 2 * * *", "30 1 * * *", "45 1 * * *", "15 2 * * *",
		"0 0-5 * * *", "15,45 1-4 * * *", "0 */2 * * *", "*/30 * * * *", "5 * * * *", "45 * * * *", "* * * * *",
		"*/7 1-3 * * *", "@hourly", "@daily", "0 2 * * 0", "30 2 14 3 *", "0 1 * * 1-5",
	}
	secondExprs := []string{"*/20 * * * * *", "*/20 30 3 * * *", "15 */15 1-3 * * *", "*/15 0,30 2 * * *", "*/15 59 23 * * *", "30 0 0 * * *"}
	for _, d := range days {
		loc := mustLoc(t, d.zone)
		day, err := time.ParseInLocation(time.DateOnly, d.day, loc)
		if err != nil {
			t.Fatal(err)
		}
		check := func(expr string, from, to time.Time, step time.Duration) {
			s, err := schedule.Parse(expr, loc)
			if err != nil {
				t.Fatalf("Parse(%q): %v", expr, err)
			}
			got := schedule.Between(s, from, to, 0)
			want := oracle(t, expr, loc, from, to, step)
			if !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("%s %s %q:\ngot%s\nwant (oracle)%s", d.zone, d.day, expr, show(got, loc), show(want, loc))
			}
		}
		for _, expr := range minuteExprs {
			check(expr, day.Add(-2*time.Hour), day.Add(26*time.Hour), time.Minute)
		}
		// seconds: around the day's transition, if any
		_, off0 := day.Zone()
		for u := day; !u.After(day.Add(24 * time.Hour)); u = u.Add(time.Minute) {
			if _, off := u.Zone(); off != off0 {
				for _, expr := range secondExprs {
					check(expr, u.Add(-65*time.Minute), u.Add(65*time.Minute), time.Second)
				}
				break
			}
		}
	}
}

// TestGronxQuirkRepeatedWallTime shows why IsDue cannot be used per minute:
// it is due at both instants of a repeated wall time, while a fixed-time
// job must run once.
func TestGronxQuirkRepeatedWallTime(t *testing.T) {
	loc := mustLoc(t, "Europe/Athens")
	first := mustTime(t, "2027-10-31T03:30:00+03:00")
	second := mustTime(t, "2027-10-31T03:30:00+02:00")
	g := gronx.New()
	for _, u := range []time.Time{first, second} {
		if due, err := g.IsDue("30 3 * * *", u.In(loc)); err != nil || !due {
			t.Fatalf("gronx IsDue at %s = %v, %v; the quirk this test documents is gone", u, due, err)
		}
	}
	s, err := schedule.Parse("30 3 * * *", loc)
	if err != nil {
		t.Fatal(err)
	}
	got := schedule.Between(s, first.Add(-time.Hour), second.Add(time.Hour), 0)
	if len(got) != 1 || !got[0].Equal(first) {
		t.Errorf("slots around the repeated 03:30: %s, want only %s", show(got, loc), first)
	}
}

// TestPureFunction: instances that start at different moments compute the
// same slots where their sequences overlap.
func TestPureFunction(t *testing.T) {
	exprs := []string{"*/30 * * * *", "30 3 * * *", "0,30 3 * * *", "5 * * * *", "*/20 * * * * *", "*/7 * * * * *",
		"@daily", "@hourly", "@every 90m", "@every 7s", "@every 1h1m1s", "0 9-17 * * 1-5", "0 0 L * *", "13 */3 * * *"}
	zones := []string{"UTC", "Europe/Athens", "America/New_York", "Australia/Lord_Howe"}
	starts := map[string]time.Time{
		"Europe/Athens":       mustTime(t, "2027-10-30T22:00:00Z"),
		"America/New_York":    mustTime(t, "2027-03-14T04:00:00Z"),
		"Australia/Lord_Howe": mustTime(t, "2027-10-02T12:00:00Z"),
		"UTC":                 mustTime(t, "2027-01-01T00:00:00Z"),
	}
	offsets := []time.Duration{0, 7*time.Second + 123*time.Millisecond, time.Hour, 3*time.Hour + 59*time.Minute + 59*time.Second + 999*time.Millisecond}
	for _, zone := range zones {
		loc := mustLoc(t, zone)
		for _, expr := range exprs {
			var runs [][]time.Time
			for _, off := range offsets {
				s, err := schedule.Parse(expr, loc) // each instance parses its own copy
				if err != nil {
					t.Fatal(err)
				}
				runs = append(runs, firstN(s, starts[zone].Add(off), 500))
			}
			ref := runs[0]
			for i, run := range runs[1:] {
				if len(run) == 0 {
					t.Fatalf("%s %q: no slots", zone, expr)
				}
				// run starts later; it must be a contiguous tail-overlap of ref
				j := slices.IndexFunc(ref, run[0].Equal)
				if j < 0 {
					if run[0].After(ref[len(ref)-1]) {
						continue
					}
					t.Errorf("%s %q: instance started at +%v has slot %s that the first does not", zone, expr, offsets[i+1], run[0])
					continue
				}
				n := min(len(ref)-j, len(run))
				if !slices.EqualFunc(ref[j:j+n], run[:n], time.Time.Equal) {
					t.Errorf("%s %q: instance started at +%v disagrees:%s\nvs%s", zone, expr, offsets[i+1], show(run[:n], loc), show(ref[j:j+n], loc))
				}
				// and it saw every slot of ref after its start
				start := starts[zone].Add(offsets[i+1])
				k := slices.IndexFunc(ref, func(s time.Time) bool { return s.After(start) })
				if k != j {
					t.Errorf("%s %q: instance started at +%v first slot %s, want %s", zone, expr, offsets[i+1], run[0], ref[k])
				}
			}
		}
	}
}

// TestLeapYearEndBeyondTables: past 2037 Go derives zone bounds from the
// zone's rule and, on 31 December of a leap year, ZoneBounds reports an end
// that is not after the instant asked about. Next must still advance.
func TestLeapYearEndBeyondTables(t *testing.T) {
	loc := mustLoc(t, "Europe/Athens")
	at := mustTime(t, "2044-12-31T01:00:00Z")
	if _, end := at.In(loc).ZoneBounds(); end.After(at) {
		t.Logf("Go's ZoneBounds is right here now (end %s); the test still holds", end)
	}
	checkSlots(t, "Europe/Athens", "*/30 * * * *", "2044-12-31T03:00:00+02:00",
		[]string{"2044-12-31T03:30:00+02:00", "2044-12-31T04:00:00+02:00"})
	checkSlots(t, "Europe/Athens", "0 12 * * *", "2044-12-30T13:00:00+02:00",
		[]string{"2044-12-31T12:00:00+02:00", "2045-01-01T12:00:00+02:00"})
	checkSlots(t, "Australia/Lord_Howe", "*/20 * * * * *", "2044-12-31T12:00:00+11:00",
		[]string{"2044-12-31T12:00:20+11:00", "2044-12-31T12:00:40+11:00"})
}
