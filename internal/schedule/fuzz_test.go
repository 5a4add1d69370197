package schedule_test

import (
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/schedule"
)

var fuzzZones = []string{"UTC", "Europe/Athens", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia"}

// FuzzParse: Parse never panics; a parsed schedule's Next terminates and
// returns either zero or a UTC instant strictly after its argument, successive
// slots strictly increase, and any instant between t and Next(t) has the
// same next slot.
func FuzzParse(f *testing.F) {
	for _, seed := range []struct {
		expr string
		zone uint8
		unix int64
	}{
		{"*/5 * * * *", 0, 1800000000},
		{"30 3 * * *", 1, 1837990800},
		{"0,30 3 * * *", 1, 1837990800},
		{"*/30 * * * *", 1, 1856556000},
		{"*/20 * * * * *", 2, 1804921200},
		{"30 1 * * *", 2, 1825480800},
		{"45 1 * * *", 3, 1806670800},
		{"15 2 * * *", 3, 1822658400},
		{"0 0 L * *", 0, 1830297600},
		{"0 0 * * 5L", 4, 1830297600},
		{"0 0 15W * 1#2", 5, 1830297600},
		{"0 0 30 2 *", 0, 1830297600},
		{"0 12 * * *", 5, 3534141600}, // Pacific/Apia, 2011-12-29T10:00Z: 30 December skipped
		{"* 0-59 0-23 * * *", 5, 3534170400},
		{"0 0 * * fri-mon/2", 1, 1830297600},
		{"@daily", 1, 0},
		{"@every 90m", 2, -86400},
		{"@every 0s", 0, 0},
		{"*/61 * * * *", 0, 0},
		{"0 0 * * * 2027", 0, 0},
		{"5,99 * * * *", 0, 0},
		{"@reboot", 0, 0},
		{"", 0, 0},
	} {
		f.Add(seed.expr, seed.zone, seed.unix)
	}
	locs := make([]*time.Location, len(fuzzZones))
	for i, z := range fuzzZones {
		locs[i] = mustLoc(f, z)
	}
	f.Fuzz(func(t *testing.T, expr string, zone uint8, unix int64) {
		loc := locs[int(zone)%len(locs)]
		s, err := schedule.Parse(expr, loc)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bad schedule ") {
				t.Fatalf("error %q does not start with `bad schedule`", err)
			}
			return
		}
		if s.String() != expr {
			t.Fatalf("String() = %q, want %q", s.String(), expr)
		}
		// keep t within 1900..2200 (and some sub-second part)
		const span = 300 * 365 * 86400
		sec := unix % span
		if sec < 0 {
			sec += span
		}
		tt := time.Unix(sec-2208988800, (unix&0xffff)*15000).In(loc)
		for i := 0; i < 20; i++ {
			next := s.Next(tt)
			if next.IsZero() {
				return
			}
			if !next.After(tt) || next.Location() != time.UTC {
				t.Fatalf("%q in %s: Next(%s) = %s, want a UTC instant after it", expr, loc, tt, next)
			}
			mid := tt.Add(next.Sub(tt) / 2)
			if again := s.Next(mid); !again.Equal(next) {
				t.Fatalf("%q in %s: Next(%s) = %s but Next(%s) = %s", expr, loc, tt, next, mid, again)
			}
			if again := s.Next(next.Add(-time.Millisecond)); !again.Equal(next) {
				t.Fatalf("%q in %s: Next(%s) = %s, want %s", expr, loc, next.Add(-time.Millisecond), again, next)
			}
			tt = next
		}
	})
}

func BenchmarkNext(b *testing.B) {
	from := mustTime(b, "2027-03-27T22:17:03Z")
	for _, bb := range []struct{ zone, expr string }{
		{"UTC", "*/5 * * * *"},
		{"UTC", "* * * * * *"},
		{"Europe/Athens", "30 3 * * *"},
		{"Europe/Athens", "*/30 * * * *"},
		{"Europe/Athens", "*/20 * * * * *"},
		{"America/New_York", "0 9-17 * * 1-5"},
		{"UTC", "0 0 L * *"},
		{"UTC", "0 0 * * 1#2"},
		{"UTC", "0 0 13 * 5"},
		{"UTC", "@yearly"},
		{"Europe/Athens", "@every 90m"},
		{"UTC", "0 0 29 2 *"},
		{"UTC", "0 0 30 2 *"}, // impossible: the whole horizon
	} {
		s, err := schedule.Parse(bb.expr, mustLoc(b, bb.zone))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bb.zone+" "+bb.expr, func(b *testing.B) {
			b.ReportAllocs()
			t := from
			for b.Loop() {
				next := s.Next(t)
				if next.IsZero() {
					next = from
				}
				t = next
			}
		})
	}
}
